package e2e

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	at "github.com/codegirl-games/agentbox/agent/anthropic/anthropictest"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
)

// moverScript100 writes a script of 100 key presses (ten Right, ten Left,
// …) for the mover: a 100-step run (101 with its done).
func moverScript100(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("task: Move the character back and forth.\nscreen: 640x480\nsteps:\n  - wait_for: window\n    title: mover\n")
	for i := 0; i < 100; i++ {
		key := "Right"
		if (i/10)%2 == 1 {
			key = "Left"
		}
		fmt.Fprintf(&b, "  - action: key\n    key: %s\n", key)
	}
	p := filepath.Join(t.TempDir(), "play100.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitForResults waits until the trace in dir has at least n step results.
func (b *background) waitForResults(t *testing.T, dir string, n int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		data, _ := os.ReadFile(filepath.Join(dir, trace.StepsFile))
		if bytes.Count(data, []byte(`"type":"result"`)) >= n {
			return
		}
		select {
		case <-b.done:
			t.Fatalf("the run ended before step %d:\n%s", n, b.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached step %d:\n%s", dir, n, b.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestResumeAfterSIGKILL kills agentbox (SIGKILL) at a random step of a
// 100-step mover script, several times, and resumes each run (the mover
// at 20 px/s: it moves by the time a key is seen held, so a replayed tap
// moves it a little more or less than the recorded one; slow, the
// difference stays within the replay's tolerance): every
// resumed run completes all 100 steps, its trace validates
// (trace.Validate), records the seam, and the crashed trace is finalised
// as crashed and names it.
func TestResumeAfterSIGKILL(t *testing.T) {
	bin := testenv.Build(t, "./cmd/agentbox")
	for _, bc := range []struct {
		backend string
		rounds  int
		need    func(t *testing.T)
	}{
		{"local", 5, requireLocal},
		{"docker", 3, func(t *testing.T) { testenv.Require(t, testenv.Image(testenv.RuntimeImage)) }},
	} {
		t.Run(bc.backend, func(t *testing.T) {
			bc.need(t)
			app := exampleMover(t)
			script := moverScript100(t)
			for round := 0; round < bc.rounds; round++ {
				kill := 1 + rand.IntN(98)
				t.Logf("round %d: kill after step %d", round, kill)
				dir := filepath.Join(t.TempDir(), "crashed")
				run := startBackground(t, bin, "run", app, "--backend", bc.backend, "--script", script, "--max-rate", "20", "--out", dir, "--", "-speed", "20")
				run.waitForResults(t, dir, kill)
				run.kill()
				tr := openTrace(t, dir)
				if lv, err := trace.CheckLiveness(dir); err != nil || lv != trace.Crashed {
					t.Fatalf("killed run: liveness %v, %v", lv, err)
				}
				upto := trace.LastCompleted(tr)
				if upto < kill {
					t.Fatalf("the killed run kept %d completed steps; %d were acknowledged", upto, kill)
				}
				ls := agentbox(t, "ls", filepath.Dir(dir))
				if !strings.Contains(ls.stdout, "crashed (resumable)") {
					t.Errorf("ls does not show the killed run as resumable:\n%s", ls)
				}
				out := filepath.Join(t.TempDir(), "resumed")
				t0 := time.Now()
				r := agentbox(t, "resume", dir, "--out", out)
				t.Logf("round %d: resumed after step %d in %v", round, upto, time.Since(t0).Round(time.Millisecond))
				if r.code != 0 {
					t.Fatalf("resume after step %d: exit %d\n%s", upto, r.code, r)
				}
				res := openTrace(t, out)
				if bad := trace.Validate(res); bad != nil {
					t.Fatalf("the resumed trace does not validate: %v", bad)
				}
				if res.Run.Outcome != trace.Success || res.Run.Steps != 101 {
					t.Fatalf("resumed: outcome %s, %d steps; want success, 101", res.Run.Outcome, res.Run.Steps)
				}
				rf := res.Run.ResumedFrom
				if abs, _ := filepath.Abs(dir); rf == nil || rf.Trace != abs || rf.Step != upto {
					t.Fatalf("resumed_from %+v, want %s step %d", rf, dir, upto)
				}
				crashed, err := trace.ReadRun(dir)
				if abs, _ := filepath.Abs(out); err != nil || crashed.Reason != trace.ReasonCrashed || crashed.ResumedBy != abs {
					t.Fatalf("the crashed trace after the resume: %+v, %v", crashed, err)
				}
				if again := agentbox(t, "resume", dir, "--out", filepath.Join(t.TempDir(), "again")); again.code != 2 {
					t.Fatalf("a second resume: exit %d, want 2\n%s", again.code, again)
				}
				if bc.backend == "docker" {
					assertNoContainers(t, tr.Run.ID)
					assertNoContainers(t, res.Run.ID)
				} else {
					assertNoSandboxes(t, tr.Run.ID)
					assertNoSandboxes(t, res.Run.ID)
				}
			}
		})
	}
}

// TestEvalResume kills an eval (SIGKILL) in its second episode of three
// and continues it with eval --resume: the finished episode is kept, the
// crashed one moved aside and run again with the missing one, and the
// summary counts all three as one eval.
func TestEvalResume(t *testing.T) {
	requireLocal(t)
	bin := testenv.Build(t, "./cmd/agentbox")
	dir := t.TempDir()
	suite := filepath.Join(dir, "suite.yaml")
	if err := os.WriteFile(suite, []byte(fmt.Sprintf("name: resumable\ntasks:\n  - name: keys\n    target: %s\n    script: %s\n    timeout: 120s\n    episodes: 3\n",
		exampleMover(t), moverScript100(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	ev := startBackground(t, bin, "eval", suite, "--backend", "local", "--max-rate", "40", "--out", out)
	ev.waitForResults(t, filepath.Join(out, "keys", "002"), 10)
	ev.kill()
	first, err := trace.ReadRun(filepath.Join(out, "keys", "001"))
	if err != nil || first.Status != trace.StatusComplete {
		t.Fatalf("episode 1 before the kill: %+v, %v", first, err)
	}
	r := agentbox(t, "eval", suite, "--backend", "local", "--max-rate", "40", "--resume", out, "--json")
	if r.code != 0 || !strings.Contains(r.stderr, "1 of 3 episodes finished, 2 to run") {
		t.Fatalf("eval --resume: exit %d\n%s", r.code, r)
	}
	if again, err := trace.ReadRun(filepath.Join(out, "keys", "001")); err != nil || again.ID != first.ID {
		t.Fatalf("episode 1 was run again: %+v, %v", again, err)
	}
	if lv, err := trace.CheckLiveness(filepath.Join(out, "keys", "002.crashed-1")); err != nil || lv != trace.Crashed {
		t.Fatalf("the crashed episode, moved aside: %v, %v", lv, err)
	}
	for _, n := range []string{"002", "003"} {
		tr := openTrace(t, filepath.Join(out, "keys", n))
		if bad := trace.Validate(tr); bad != nil || tr.Run.Outcome != trace.Success {
			t.Fatalf("episode %s: %s, %v", n, tr.Run.Outcome, bad)
		}
	}
	if !strings.Contains(r.stdout, `"passed": 3`) {
		t.Fatalf("the summary does not count three passed episodes:\n%s", r.stdout)
	}
}

// TestResumeModelAgent kills agentbox (SIGKILL) while the anthropic agent
// waits for the model's fourth answer, and resumes the run: the replayed
// steps are decided again from the recorded exchanges (the fake model is
// not asked during the replay), and the first request after the seam
// carries the earlier turns — the three tool_use blocks the model sent
// and their tool_results — before the run goes on to its end.
func TestResumeModelAgent(t *testing.T) {
	requireLocal(t)
	bin := testenv.Build(t, "./cmd/agentbox")
	const task = "Move the character right."
	asked := make(chan int, 16)
	srv := at.New(t, func(r *at.Request) at.Reply {
		asked <- r.N
		switch {
		case r.N <= 3:
			return at.Answer("tool_use", at.TextBlock(fmt.Sprintf("turn %d: pressing Right.", r.N)),
				at.ToolUse(fmt.Sprintf("toolu_%d", r.N), map[string]any{"action": "key", "text": "Right"}))
		case r.N == 4:
			return at.Reply{Stall: true} // agentbox is killed while it waits
		case r.N == 5:
			return at.Answer("end_turn", at.TextBlock("The square moved right."))
		}
		return at.APIError(400, "invalid_request_error", "unexpected request")
	})
	t.Setenv("ANTHROPIC_API_KEY", anthropicKey)
	t.Setenv("ANTHROPIC_BASE_URL", "")
	t.Setenv("ANTHROPIC_MODEL", "")
	dir := filepath.Join(t.TempDir(), "crashed")
	run := startBackground(t, bin, "run", moverApp(t, ""), "--backend", "local", "--agent", "anthropic",
		"--agent-opt", "base_url="+srv.URL, "--task", task, "--out", dir)
	deadline := time.After(3 * time.Minute)
	for n := 0; n < 4; {
		select {
		case n = <-asked:
		case <-run.done:
			t.Fatalf("the run ended before the model's fourth request:\n%s", run.stderr.String())
		case <-deadline:
			t.Fatalf("no fourth model request:\n%s", run.stderr.String())
		}
	}
	run.kill()
	tr := openTrace(t, dir)
	if upto := trace.LastCompleted(tr); upto != 3 {
		t.Fatalf("the killed run kept %d completed steps, want 3", upto)
	}
	if ls := agentbox(t, "ls", filepath.Dir(dir)); !strings.Contains(ls.stdout, "crashed (resumable)") {
		t.Errorf("ls (from the index) does not show the killed run as resumable:\n%s", ls)
	}
	out := filepath.Join(t.TempDir(), "resumed")
	r := agentbox(t, "resume", dir, "--out", out)
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s", r.code, r)
	}
	// The index learnt that the crashed trace was finalised (no rescan).
	if ls := agentbox(t, "ls", filepath.Dir(dir)); !strings.Contains(ls.stdout, "resumed") || strings.Contains(ls.stdout, "running") {
		t.Errorf("ls after the resume does not show the crashed run as resumed:\n%s", ls)
	}
	if !strings.Contains(r.stdout, "the agent's conversation rebuilt from 3 recorded steps") {
		t.Errorf("resume's summary does not say the conversation was rebuilt:\n%s", r.stdout)
	}
	reqs := srv.Requests()
	if len(reqs) != 5 {
		t.Fatalf("the model was asked %d times in all, want 5 (none during the replay)", len(reqs))
	}
	seam := reqs[4]
	msgs := seam.Params.Messages
	var uses, results []string
	for _, m := range msgs {
		for _, b := range m.Content {
			switch b.Type {
			case "tool_use":
				uses = append(uses, b.ID)
			case "tool_result":
				results = append(results, b.ToolUseID)
			}
		}
	}
	want := "toolu_1 toolu_2 toolu_3"
	if got := strings.Join(uses, " "); got != want {
		t.Errorf("the first request after the seam carries tool_use %q, want %q (%d messages)", got, want, len(msgs))
	}
	if got := strings.Join(results, " "); got != want {
		t.Errorf("the first request after the seam carries tool_result %q, want %q", got, want)
	}
	if !strings.Contains(string(seam.Raw), "turn 2: pressing Right.") {
		t.Error("the first request after the seam lacks the model's earlier words")
	}
	if len(seam.Images()) == 0 || seam.LastImage() == nil {
		t.Error("the first request after the seam has no screenshot")
	}
	res := openTrace(t, out)
	if bad := trace.Validate(res); bad != nil {
		t.Fatalf("the resumed trace does not validate: %v", bad)
	}
	if res.Run.Outcome != trace.Success || res.Run.Steps != 4 {
		t.Fatalf("resumed: outcome %s (%s), %d steps; want success, 4", res.Run.Outcome, res.Run.Message, res.Run.Steps)
	}
	// The replayed steps keep their exchanges: the resumed trace can be
	// resumed in turn.
	for _, st := range res.Steps[:3] {
		if st.Decision == nil || st.Decision.Files["exchange.json"] == "" {
			t.Errorf("resumed step %d has no exchange.json", st.Step)
		}
	}
	anthropicNoKey(t, result{dir: out})
	assertNoSandboxes(t, res.Run.ID)
}
