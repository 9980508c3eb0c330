package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	junit "github.com/joshdk/go-junit"

	"github.com/codegirl-games/agentbox/eval"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

// evalDir lays out a suite with the mover app beside it.
func evalDir(t *testing.T, suite string) string {
	t.Helper()
	return evalDirWith(t, suite, moverApp)
}

// evalDirWith lays out a suite with apps made by app (moverApp, or stubApp
// where nothing runs).
func evalDirWith(t *testing.T, suite string, app func(t *testing.T, manifest string) string) string {
	t.Helper()
	dir := t.TempDir()
	mover := app(t, "")
	noWindow := app(t, `{"command":"mover","args":["-no-window"],"window_title":"mover","ready_timeout":"1s"}`)
	os.Rename(mover, filepath.Join(dir, "mover"))
	os.Rename(noWindow, filepath.Join(dir, "nowindow"))
	play, _ := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "mover", "play.yaml"))
	os.WriteFile(filepath.Join(dir, "play.yaml"), play, 0o644)
	p := filepath.Join(dir, "suite.yaml")
	os.WriteFile(p, []byte(suite), 0o644)
	return p
}

const suite8 = `name: e2e
tasks:
  - name: script
    target: mover
    script: play.yaml
    episodes: 3
  - name: demo
    target: mover
    agent: demo
    episodes: 2
  - name: broken
    target: mover
    agent: demo
    options: {key: Left}
    episodes: 2
  - name: nowindow
    target: nowindow
    agent: idle
    timeout: 30s
`

func TestEvalSuite(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	r := agentbox(t, "eval", evalDir(t, suite8), "--parallel", "4", "--out", filepath.Join(t.TempDir(), "out"))
	out := strings.TrimSpace(strings.Split(r.stdout, "summary: ")[len(strings.Split(r.stdout, "summary: "))-1])
	outDir := filepath.Dir(strings.Split(out, " ")[0])
	if r.code != 1 {
		t.Fatalf("want exit 1 (a task failed):\n%s", r)
	}
	var sum eval.Summary
	data, err := os.ReadFile(filepath.Join(outDir, eval.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatal(err)
	}
	tot := sum.Totals
	if tot.Episodes != 8 || tot.Passed != 5 || tot.Failed != 2 || tot.Infrastructure != 1 || sum.Parallel != 4 {
		t.Errorf("totals = %+v", tot)
		for _, ep := range sum.Episodes {
			t.Logf("episode %s #%d: %s/%s %q (%d steps, %.0f ms)", ep.Task, ep.N, ep.Outcome, ep.Reason, ep.Message, ep.Steps, ep.DurationMS)
		}
	}
	want := map[string][2]int{"script": {3, 3}, "demo": {2, 2}, "broken": {0, 2}, "nowindow": {0, 1}}
	for _, ts := range sum.Tasks {
		if w := want[ts.Name]; ts.Passed != w[0] || ts.Episodes != w[1] {
			t.Errorf("task %s: %d/%d, want %d/%d", ts.Name, ts.Passed, ts.Episodes, w[0], w[1])
		}
	}
	if sum.Tasks[2].Reasons["gave_up"] != 2 || sum.Tasks[3].Reasons["no_window"] != 1 {
		t.Errorf("reasons: %v %v", sum.Tasks[2].Reasons, sum.Tasks[3].Reasons)
	}
	for _, ep := range sum.Episodes {
		if _, err := os.Stat(filepath.Join(outDir, ep.Trace, "run.json")); err != nil {
			t.Errorf("episode %s #%d has no trace: %v", ep.Task, ep.N, err)
		}
	}
	// A JUnit parser accepts the report and counts the same.
	suites, err := junit.IngestFile(filepath.Join(outDir, eval.JUnitFile))
	if err != nil {
		t.Fatal(err)
	}
	counts := map[junit.Status]int{}
	n := 0
	for _, s := range suites {
		for _, tc := range s.Tests {
			counts[tc.Status]++
			n++
		}
	}
	if n != 8 || counts[junit.StatusPassed] != 5 || counts[junit.StatusFailed] != 2 || counts[junit.StatusError] != 1 {
		t.Errorf("junit: %d tests, %v", n, counts)
	}
	for _, s := range []string{"script", "broken", "nowindow", "5/8"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("the summary table lacks %q:\n%s", s, r.stdout)
		}
	}
	assertNoContainers(t, sum.RunID+"*")
	t.Logf("8 episodes at --parallel 4: %.1f s", sum.DurationMS/1000)
}

// TestEvalRejectsBadSuites: a bad suite is a usage error naming the file
// and line before anything starts (in-process).
func TestEvalRejectsBadSuites(t *testing.T) {
	tests := []struct{ name, suite, want string }{
		{"unknown field", "tasks:\n  - name: a\n    target: mover\n    agent: demo\n    episdes: 3\n", `suite.yaml:5: task 1: unknown field "episdes"`},
		{"script and agent", "tasks:\n  - name: a\n    target: mover\n    agent: demo\n    script: play.yaml\n", `give exactly one of script or agent`},
		{"bad agent option", "tasks:\n  - name: a\n    target: mover\n    agent: demo\n    options: {speed: 3}\n", `unknown option "speed"`},
		{"bad script", "tasks:\n  - name: a\n    target: mover\n    script: missing.yaml\n", `missing.yaml`},
		{"missing target", "tasks:\n  - name: a\n    target: ./nope\n    agent: idle\n", `nope: no such file or directory`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := cliMain(t, "eval", evalDirWith(t, tt.suite, stubApp), "--out", filepath.Join(t.TempDir(), "out"))
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("want exit 2 with %q:\n%s", tt.want, r)
			}
		})
	}
}

// TestEvalInterrupted: Ctrl-C stops scheduling, removes every running
// sandbox and still writes the summary.
func TestEvalInterrupted(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	bin := testenv.Build(t, "./cmd/agentbox")
	out := filepath.Join(t.TempDir(), "out")
	suite := evalDir(t, "tasks:\n  - name: long\n    target: mover\n    agent: idle\n    options: {ms: \"60000\"}\n    episodes: 6\n")
	ev := startBackground(t, bin, "eval", suite, "--parallel", "2", "--out", out)
	ev.waitForSteps(t, filepath.Join(out, "long", "001"), filepath.Join(out, "long", "002"))
	ev.cmd.Process.Signal(os.Interrupt)
	if code := ev.wait(t, 30*time.Second, "of SIGINT"); code != 130 {
		t.Errorf("exit %d, want 130\n%s\n%s", code, ev.stdout.String(), ev.stderr.String())
	}
	var sum eval.Summary
	data, err := os.ReadFile(filepath.Join(out, eval.SummaryFile))
	if err != nil {
		t.Fatalf("no summary after Ctrl-C: %v", err)
	}
	json.Unmarshal(data, &sum)
	if sum.Totals.Interrupted != 2 || sum.Totals.Skipped != 4 {
		t.Errorf("totals = %+v", sum.Totals)
	}
	assertNoContainers(t, sum.RunID+"*")
}
