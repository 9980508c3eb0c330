package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/agent/openai"
	"github.com/codegirl-games/agentbox/agent/openai/openaitest"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
)

// openaiKey is the key the child agentbox gets in its environment; it must
// appear nowhere in the trace.
const openaiKey = "sk-e2e-0123456789abcdef-MUST-NOT-LEAK"

// setOpenAIEnv gives the child agentbox a key and no base URL (the test
// passes base_url as an option).
func setOpenAIEnv(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", openaiKey)
	t.Setenv("OPENAI_BASE_URL", "")
}

// assertKeyNowhere fails if the key appears in any file of the trace.
func assertKeyNowhere(t *testing.T, dir string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		if strings.Contains(string(data), openaiKey) {
			t.Errorf("the API key is in %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Errorf("only %d files in the trace", n)
	}
}

// checkModelRun checks what every successful model run of the mover must
// show: success, the square moved ≥ 100 px (measured here from the
// trace's own PNGs), the app saw Right, each model step carries its meta
// and its recorded exchange with screenshot references, the key is
// nowhere, no container is left. It logs agentbox's per-step overhead: the
// recorded decision latency minus the fake server's handling time.
func checkModelRun(t *testing.T, r result, srv *openaitest.Server, model string) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	srv.Check(t)
	tr := openTrace(t, r.dir)
	if tr.Run.Outcome != trace.Success || tr.Run.Reason != trace.ReasonDone || tr.Incomplete {
		t.Fatalf("outcome %s, reason %s, incomplete %v", tr.Run.Outcome, tr.Run.Reason, tr.Incomplete)
	}
	if !strings.Contains(tr.Run.Message, "moved +") {
		t.Errorf("message %q", tr.Run.Message)
	}
	first, n0 := centroid(t, filepath.Join(r.dir, tr.Steps[0].Observation.Screenshot))
	lastStep := tr.Steps[len(tr.Steps)-1]
	last, n1 := centroid(t, filepath.Join(r.dir, lastStep.Observation.Screenshot))
	if n0 == 0 || n1 == 0 || last-first < 100 {
		t.Errorf("the square moved %.1f px (%.1f → %.1f; %d, %d pixels), want ≥ 100", last-first, first, last, n0, n1)
	}
	stdout, _ := os.ReadFile(filepath.Join(r.dir, trace.StdoutFile))
	if !strings.Contains(string(stdout), "mover: key Right down") {
		t.Errorf("stdout.log lacks the app's key report:\n%.500s", stdout)
	}
	reqs := srv.Requests()
	if len(reqs) != len(tr.Steps) {
		t.Errorf("%d requests for %d steps", len(reqs), len(tr.Steps))
	}
	var over []time.Duration
	for i, s := range tr.Steps {
		d := s.Decision
		if d == nil || d.Meta["model"] != model || d.Meta["attempts"] != float64(1) || d.Meta["usage"] == nil {
			t.Errorf("step %d: decision %+v", s.Step, d)
			continue
		}
		p, ok := d.Files["exchange.json"]
		if !ok {
			t.Errorf("step %d: no exchange recorded", s.Step)
			continue
		}
		ex, err := os.ReadFile(filepath.Join(r.dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(ex), "<screenshot "+s.Observation.Screenshot+">") || strings.Contains(string(ex), "iVBORw0KGgo") {
			t.Errorf("step %d: %s does not reference %s or holds image data", s.Step, p, s.Observation.Screenshot)
		}
		if i < len(reqs) {
			over = append(over, time.Duration(d.LatencyMS*float64(time.Millisecond))-reqs[i].Handling)
		}
	}
	assertKeyNowhere(t, r.dir)
	assertNoContainers(t, tr.Run.ID)
	if len(over) > 0 {
		slices.Sort(over)
		t.Logf("%d steps; agentbox's overhead around the model call (decision latency − server handling): p50 %v, max %v",
			len(over), over[len(over)/2], over[len(over)-1])
	}
}

// TestOpenAIResponsesMover runs the mover in a real sandbox with --agent
// openai against a local server speaking the Responses API, whose scripted
// model finds the green square in each screenshot it is sent and presses
// RIGHT until the square moved 100 px. The server checks every request
// (tool definition with the display size, previous_response_id chaining,
// computer_call_output with the new screenshot as a data URL of 640×480,
// the key).
func TestOpenAIResponsesMover(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	setOpenAIEnv(t)
	m := &openaitest.Mover{MinDX: 100}
	conv := &openaitest.Responses{Key: openaiKey, Model: "computer-use-preview", Task: "Move the character right.",
		Width: 640, Height: 480, AckPolicy: "acknowledge"}
	srv := openaitest.New(t, conv.Handle)
	conv.Turn = openaitest.MoverTurns(srv, m)
	r := agentbox(t, "run", moverApp(t, ""), "--task", "Move the character right.", "--agent", "openai",
		"--agent-opt", "base_url="+srv.URL, "--agent-opt", "model=computer-use-preview")
	checkModelRun(t, r, srv, "computer-use-preview")
	if len(conv.Turns) < 10 || conv.Turns[1].Previous != "resp_0001" {
		t.Errorf("%d turns; the second continues %q", len(conv.Turns), conv.Turns[1].Previous)
	}
	t.Logf("the model saw the square move %+.0f px in %d screenshots", m.Moved(), m.Looks)
}

// TestOpenAIChatMover does the same with --agent openai-chat against a
// local chat-completions server: strict JSON schema, at most 2
// screenshots and 4 earlier steps per request, older screenshots replaced
// by a note.
func TestOpenAIChatMover(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	setOpenAIEnv(t)
	m := &openaitest.Mover{MinDX: 100}
	conv := &openaitest.Chat{Key: openaiKey, Model: "qwen2.5vl:7b", Task: "Move the character right.", Width: 640, Height: 480,
		Format: "json_schema", Schema: openai.AnswerSchema, MaxScreenshots: 2, MaxHistory: 4}
	srv := openaitest.New(t, conv.Handle)
	conv.Turn = openaitest.MoverAnswers(srv, m)
	r := agentbox(t, "run", moverApp(t, ""), "--task", "Move the character right.", "--agent", "openai-chat",
		"--agent-opt", "base_url="+srv.URL, "--agent-opt", "model=qwen2.5vl:7b",
		"--agent-opt", "max_screenshots=2", "--agent-opt", "max_history=4")
	checkModelRun(t, r, srv, "qwen2.5vl:7b")
	var hist, imgs []int
	for _, turn := range conv.Turns {
		hist, imgs = append(hist, turn.History), append(imgs, turn.Images)
	}
	if len(hist) < 6 || slices.Max(hist) != 4 || slices.Max(imgs) != 2 || hist[5] != 4 || imgs[5] != 2 || conv.Turns[5].Omitted != 3 {
		t.Errorf("history per request %v, screenshots %v", hist, imgs)
	}
}

// TestOpenAIMalformedEndToEnd: a model that keeps answering with a key
// agentbox does not know is told so, and after max_malformed retries the
// run ends with outcome error, reason malformed_answer, naming the answer.
func TestOpenAIMalformedEndToEnd(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	setOpenAIEnv(t)
	conv := &openaitest.Responses{Key: openaiKey, Model: "computer-use-preview", Task: "Move", Width: 640, Height: 480}
	srv := openaitest.New(t, conv.Handle)
	conv.Turn = func(turn openaitest.ResponsesTurn) []any {
		return []any{openaitest.ComputerCall("c"+itoa(turn.N), map[string]any{"type": "keypress", "keys": []any{"HYPERDRIVE"}})}
	}
	r := agentbox(t, "run", moverApp(t, ""), "--task", "Move", "--agent", "openai",
		"--agent-opt", "base_url="+srv.URL, "--agent-opt", "max_malformed=1")
	if r.code != 3 {
		t.Fatalf("want exit 3:\n%s", r)
	}
	srv.Check(t)
	tr := openTrace(t, r.dir)
	if tr.Run.Outcome != trace.Error || tr.Run.Reason != trace.ReasonMalformed || !strings.Contains(tr.Run.Message, `unknown key "HYPERDRIVE"`) {
		t.Errorf("outcome %s, reason %s, message %q", tr.Run.Outcome, tr.Run.Reason, tr.Run.Message)
	}
	if len(conv.Turns) != 2 || !strings.Contains(conv.Turns[1].Text, "not performed") {
		t.Errorf("%d requests; the second says %q", len(conv.Turns), conv.Turns[len(conv.Turns)-1].Text)
	}
	assertKeyNowhere(t, r.dir)
	assertNoContainers(t, tr.Run.ID)
}

// TestOpenAIServerErrorEndToEnd: a server that keeps failing with 503 ends
// the run with outcome error, reason agent_error, and the HTTP status in
// the message, after the retries.
func TestOpenAIServerErrorEndToEnd(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	setOpenAIEnv(t)
	srv := openaitest.New(t, func(s *openaitest.Server, r *openaitest.Request) openaitest.Reply {
		rep := openaitest.Error(503, "server_error", "", "The server is overloaded")
		rep.Header = map[string]string{"Retry-After-Ms": "20"}
		return rep
	})
	r := agentbox(t, "run", moverApp(t, ""), "--agent", "openai-chat",
		"--agent-opt", "base_url="+srv.URL, "--agent-opt", "model=llava", "--agent-opt", "max_retries=2")
	if r.code != 3 {
		t.Fatalf("want exit 3:\n%s", r)
	}
	tr := openTrace(t, r.dir)
	if tr.Run.Outcome != trace.Error || tr.Run.Reason != trace.ReasonAgent || !strings.Contains(tr.Run.Message, "HTTP 503") ||
		!strings.Contains(tr.Run.Message, "3 attempts") {
		t.Errorf("outcome %s, reason %s, message %q", tr.Run.Outcome, tr.Run.Reason, tr.Run.Message)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	assertNoContainers(t, tr.Run.ID)
}

// TestOpenAIOptionsRejected: option mistakes and a missing key are usage
// errors (exit 2) before any sandbox starts (in-process, as
// TestStagingRejects).
func TestOpenAIOptionsRejected(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--agent", "openai"}, "set OPENAI_API_KEY"},
		{[]string{"--agent", "openai-chat", "--agent-opt", "model=m", "--agent-opt", "api_key=sk-x"}, "unknown option"},
		{[]string{"--agent", "openai-chat"}, "no model"},
	} {
		r := cliMain(t, append([]string{"run", stubApp(t, ""), "--backend", "docker"}, tt.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%v: want exit 2 naming %q:\n%s", tt.args, tt.want, r)
		}
	}
}
