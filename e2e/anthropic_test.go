package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	at "github.com/codegirl-games/agentbox/agent/anthropic/anthropictest"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/internal/xevents"
	"github.com/codegirl-games/agentbox/trace"
)

// The Anthropic agent end to end: the real binary, a real sandbox and app,
// and a local server speaking the Messages API whose scripted "model" looks
// at the PNGs it receives.

const anthropicKey = "sk-ant-e2e-7f3a9c-DO-NOT-LEAK"

// anthropicRun runs the CLI with the anthropic agent against srv; the key
// is in the child's environment only.
func anthropicRun(t *testing.T, srv *at.Server, target string, args ...string) result {
	t.Helper()
	t.Setenv("ANTHROPIC_API_KEY", anthropicKey)
	t.Setenv("ANTHROPIC_BASE_URL", "")
	t.Setenv("ANTHROPIC_MODEL", "")
	return agentbox(t, append([]string{"run", target, "--agent", "anthropic", "--agent-opt", "base_url=" + srv.URL}, args...)...)
}

// anthropicNoKey fails if the key is anywhere in the trace or the output.
func anthropicNoKey(t *testing.T, r result) {
	t.Helper()
	if strings.Contains(r.stdout+r.stderr, anthropicKey) {
		t.Error("the API key is in agentbox's output")
	}
	n := 0
	err := filepath.WalkDir(r.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		if bytes.Contains(data, []byte(anthropicKey)) {
			t.Errorf("the API key is in %s", p)
		}
		return nil
	})
	if err != nil || n == 0 {
		t.Errorf("walking the trace: %v (%d files)", err, n)
	}
}

// anthropicCheckSent asserts what the SDK sent on every request.
func anthropicCheckSent(t *testing.T, r *at.Request, w, h int, task string) {
	t.Helper()
	if r.Header.Get("X-Api-Key") != anthropicKey || !strings.Contains(r.Header.Get("Anthropic-Beta"), "computer-use-2025-01-24") {
		t.Errorf("request %d: key or beta header wrong (beta %q)", r.N, r.Header.Get("Anthropic-Beta"))
	}
	tool := r.Tool()
	if tool["type"] != "computer_20250124" || tool["display_width_px"] != float64(w) || tool["display_height_px"] != float64(h) || tool["display_number"] != float64(1) {
		t.Errorf("request %d: tool %v, want computer_20250124 at %dx%d", r.N, tool, w, h)
	}
	if !strings.Contains(r.System(), task) {
		t.Errorf("request %d: the task is not in the system prompt", r.N)
	}
	for _, im := range r.Images() {
		if im.Err != nil || im.MediaType != "image/png" {
			t.Errorf("request %d: image: %v (%s)", r.N, im.Err, im.MediaType)
		} else if b := im.Img.Bounds(); b.Dx() != w || b.Dy() != h {
			t.Errorf("request %d: image %dx%d, want %dx%d", r.N, b.Dx(), b.Dy(), w, h)
		}
	}
}

// TestAnthropicMover: the fake model finds the green square in the PNG it
// receives, holds Right for a second, checks the square moved ≥ 100 px in
// the next PNG, and ends its turn: the real mover in a real sandbox, driven
// through the real CLI, succeeds.
func TestAnthropicMover(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	const task = "Move the character right."
	var start at.Box
	srv := at.New(t, func(r *at.Request) at.Reply {
		anthropicCheckSent(t, r, 640, 480, task)
		sq := at.Find(r.LastImage(), at.Green)
		switch r.N {
		case 1:
			if sq.N == 0 {
				return at.Answer("end_turn", at.TextBlock("FAILED: no green square on the screen"))
			}
			start = sq
			return at.Answer("tool_use", at.TextBlock(fmt.Sprintf("The square is at (%.0f, %.0f); holding Right.", sq.CX, sq.CY)),
				at.ToolUse("toolu_hold", map[string]any{"action": "hold_key", "text": "Right", "duration": 1}))
		case 2:
			res := r.ToolResults()
			if len(res) != 1 || res[0].ToolUseID != "toolu_hold" || res[0].IsError {
				return at.Answer("end_turn", at.TextBlock(fmt.Sprintf("FAILED: tool results %+v", res)))
			}
			if txt := at.Text(res[0].Content); !strings.Contains(txt, `<untrusted source="application output">`) || !strings.Contains(txt, "mover: key Right down") {
				t.Errorf("the tool_result lacks the app's output, marked untrusted:\n%s", txt)
			}
			if len(r.Images()) != 2 {
				t.Errorf("second request: %d images, want 2", len(r.Images()))
			}
			moved := sq.CX - start.CX
			if sq.N == 0 || moved < 100 {
				return at.Answer("end_turn", at.TextBlock(fmt.Sprintf("FAILED: the square moved %+.0f px", moved)))
			}
			return at.Answer("end_turn", at.TextBlock(fmt.Sprintf("The square moved %+.0f px to the right.", moved)))
		}
		return at.APIError(400, "invalid_request_error", "unexpected request")
	})
	r := anthropicRun(t, srv, moverApp(t, ""), "--task", task)
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	tr := openTrace(t, r.dir)
	if tr.Run.Outcome != trace.Success || !strings.Contains(tr.Run.Message, "moved +") {
		t.Errorf("outcome %s: %s", tr.Run.Outcome, tr.Run.Message)
	}
	var acts []string
	for _, s := range tr.Steps {
		acts = append(acts, s.Action.String())
	}
	if got := strings.Join(acts, ", "); got != "key_down Right, wait 1000ms, key_up Right, done" {
		t.Errorf("steps: %s", got)
	}
	if len(srv.Requests()) != 2 {
		t.Errorf("%d requests, want 2", len(srv.Requests()))
	}
	// The raw exchanges are in the trace with screenshots as references to
	// files that exist.
	for _, i := range []int{0, 3} {
		p := tr.Steps[i].Decision.Files["exchange.json"]
		data, err := os.ReadFile(filepath.Join(r.dir, p))
		if err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		ref := "<screenshot " + tr.Steps[i].Observation.Screenshot + ">"
		if !strings.Contains(string(data), ref) || !json.Valid(data) {
			t.Errorf("step %d: %s lacks %s", i+1, p, ref)
		}
		if _, err := os.Stat(filepath.Join(r.dir, tr.Steps[i].Observation.Screenshot)); err != nil {
			t.Error(err)
		}
		if m := tr.Steps[i].Decision.Meta; m["model"] != "claude-haiku-4-5" || m["attempts"] != float64(1) {
			t.Errorf("step %d: meta %v", i+1, m)
		}
	}
	stdout, _ := os.ReadFile(filepath.Join(r.dir, trace.StdoutFile))
	if !strings.Contains(string(stdout), "mover: key Right down") || !strings.Contains(string(stdout), "mover: key Right up") {
		t.Errorf("stdout.log:\n%s", stdout)
	}
	anthropicNoKey(t, r)
	assertNoContainers(t, tr.Run.ID)
}

// anthropicToScreen is the exact mapping, computed here independently:
// the screen pixel at the centre of the area a model pixel shows.
func anthropicToScreen(mx, my, sw, sh, mw, mh int) (int, int) {
	return (2*mx + 1) * sw / (2 * mw), (2*my + 1) * sh / (2 * mh)
}

// TestAnthropicScaling: at --screen 1920x1080 the model is shown 1366x768.
// Its coordinates for a target it sees must land on that target on the
// real screen, at exactly the view's mapping.
func TestAnthropicScaling(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))

	// The mover's square: the fake model clicks where it sees it; the
	// click's position (the pointer after it, from X) must be inside the
	// square in the full-resolution screenshot of that step.
	t.Run("mover", func(t *testing.T) {
		var mx, my int
		srv := at.New(t, func(r *at.Request) at.Reply {
			anthropicCheckSent(t, r, 1366, 768, "Click the square.")
			if r.N > 1 {
				return at.Answer("end_turn", at.TextBlock("Clicked it."))
			}
			sq := at.Find(r.LastImage(), at.Green)
			if sq.N == 0 {
				return at.Answer("end_turn", at.TextBlock("FAILED: no square"))
			}
			mx, my = int(sq.CX+0.5), int(sq.CY+0.5)
			return at.Answer("tool_use", at.ToolUse("toolu_click", map[string]any{"action": "left_click", "coordinate": []int{mx, my}}))
		})
		r := anthropicRun(t, srv, moverApp(t, ""), "--screen", "1920x1080", "--task", "Click the square.")
		if r.code != 0 {
			t.Fatalf("want exit 0:\n%s", r)
		}
		tr := openTrace(t, r.dir)
		s := tr.Steps[0]
		a := s.Action
		if a.Kind != "click" || a.X == nil {
			t.Fatalf("step 1: %v", a)
		}
		wx, wy := anthropicToScreen(mx, my, 1920, 1080, 1366, 768)
		if *a.X != wx || *a.Y != wy {
			t.Errorf("model (%d,%d) → click at (%d,%d), want exactly (%d,%d)", mx, my, *a.X, *a.Y, wx, wy)
		}
		if c := s.Result.Result.Cursor; c == nil || c.X != wx || c.Y != wy {
			t.Errorf("pointer after the click %v, want (%d,%d)", c, wx, wy)
		}
		full := readPNG(t, filepath.Join(r.dir, s.Observation.Screenshot))
		if b := full.Bounds(); b.Dx() != 1920 || b.Dy() != 1080 {
			t.Fatalf("screenshot is %dx%d", b.Dx(), b.Dy())
		}
		sq := at.Find(full, at.Green)
		if wx < sq.X0 || wx >= sq.X1 || wy < sq.Y0 || wy >= sq.Y1 {
			t.Errorf("click at (%d,%d) missed the square at x %d..%d, y %d..%d", wx, wy, sq.X0, sq.X1-1, sq.Y0, sq.Y1-1)
		}
		t.Logf("model (%d,%d) of 1366x768 → screen (%d,%d); the square is at x %d..%d, y %d..%d of 1920x1080", mx, my, wx, wy, sq.X0, sq.X1-1, sq.Y0, sq.Y1-1)
		anthropicNoKey(t, r)
	})

	// xev as the app: the fake model clicks the middle of the white xev
	// window, placed far from the origin where a scaling error shows most;
	// xev reports the press at exactly the mapped root position, and the
	// model reads that report from the app's output in its tool_result.
	t.Run("xev", func(t *testing.T) {
		testenv.Require(t, testenv.Image(testenv.TestImage))
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command":"xev","args":["-geometry","300x200+1500+800","-event","button"],"window_title":"Event Tester"}`), 0o644)
		var mx, my int
		srv := at.New(t, func(r *at.Request) at.Reply {
			anthropicCheckSent(t, r, 1366, 768, "Click the window.")
			if r.N == 1 {
				white := at.Find(r.LastImage(), func(r, g, b uint8) bool { return r > 250 && g > 250 && b > 250 })
				if white.N < 1000 {
					return at.Answer("end_turn", at.TextBlock("FAILED: no white window"))
				}
				mx, my = (white.X0+white.X1)/2, (white.Y0+white.Y1)/2
				return at.Answer("tool_use", at.ToolUse("toolu_click", map[string]any{"action": "left_click", "coordinate": []int{mx, my}}))
			}
			var out string
			for _, res := range r.ToolResults() {
				out += at.Text(res.Content)
			}
			if !strings.Contains(out, "ButtonRelease") && r.N < 8 {
				return at.Answer("tool_use", at.ToolUse(fmt.Sprintf("toolu_wait%d", r.N), map[string]any{"action": "wait", "duration": 0.3}))
			}
			return at.Answer("end_turn", at.TextBlock("xev saw the click."))
		})
		r := anthropicRun(t, srv, dir, "--image", testenv.TestImage, "--screen", "1920x1080", "--task", "Click the window.")
		if r.code != 0 {
			t.Fatalf("want exit 0:\n%s", r)
		}
		out, err := os.ReadFile(filepath.Join(r.dir, trace.StdoutFile))
		if err != nil {
			t.Fatal(err)
		}
		presses := xevents.Filter(xevents.Parse(string(out)), "ButtonPress")
		if len(presses) != 1 {
			t.Fatalf("%d ButtonPress events in:\n%s", len(presses), out)
		}
		e := presses[0]
		wx, wy := anthropicToScreen(mx, my, 1920, 1080, 1366, 768)
		if e.Button != 1 || e.RootX != wx || e.RootY != wy {
			t.Errorf("xev: button %d at root (%d,%d), want button 1 at (%d,%d) for model (%d,%d)", e.Button, e.RootX, e.RootY, wx, wy, mx, my)
		}
		if e.X < 0 || e.X >= 300 || e.Y < 0 || e.Y >= 200 {
			t.Errorf("the press is at (%d,%d) in the window, outside its 300x200", e.X, e.Y)
		}
		t.Logf("model (%d,%d) → xev ButtonPress at root (%d,%d), window (%d,%d)", mx, my, e.RootX, e.RootY, e.X, e.Y)
		anthropicNoKey(t, r)
	})
}

// TestAnthropicMalformed: a model that keeps sending coordinates off its
// display is told so, then the run ends with outcome error, reason
// malformed_answer, exit 3.
func TestAnthropicMalformed(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	srv := at.New(t, func(r *at.Request) at.Reply {
		if r.N > 1 {
			res := r.ToolResults()
			if len(res) != 1 || !res[0].IsError || !strings.Contains(at.Text(res[0].Content), "outside the 640x480 display") {
				t.Errorf("request %d: not told what was wrong: %+v", r.N, res)
			}
		}
		return at.Answer("tool_use", at.ToolUse(fmt.Sprintf("toolu_%d", r.N), map[string]any{"action": "left_click", "coordinate": []int{800, 100}}))
	})
	r := anthropicRun(t, srv, moverApp(t, ""), "--agent-opt", "max_malformed=2")
	if r.code != 3 {
		t.Fatalf("want exit 3:\n%s", r)
	}
	tr := openTrace(t, r.dir)
	if tr.Run.Outcome != trace.Error || tr.Run.Reason != trace.ReasonMalformed || !strings.Contains(tr.Run.Message, "outside the 640x480 display") {
		t.Errorf("outcome %s, reason %s: %s", tr.Run.Outcome, tr.Run.Reason, tr.Run.Message)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	anthropicNoKey(t, r)
	assertNoContainers(t, tr.Run.ID)
}

// TestAnthropicServerError: a server that keeps failing ends the run with
// outcome error, reason agent_error, and the status in the message.
func TestAnthropicServerError(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	srv := at.New(t, func(r *at.Request) at.Reply {
		rep := at.APIError(529, "overloaded_error", "Overloaded")
		rep.Header = map[string]string{"Retry-After-Ms": "10"}
		return rep
	})
	r := anthropicRun(t, srv, moverApp(t, ""), "--agent-opt", "max_retries=2")
	if r.code != 3 {
		t.Fatalf("want exit 3:\n%s", r)
	}
	tr := openTrace(t, r.dir)
	if tr.Run.Outcome != trace.Error || tr.Run.Reason != trace.ReasonAgent || !strings.Contains(tr.Run.Message, "HTTP 529") || !strings.Contains(tr.Run.Message, "overloaded_error") {
		t.Errorf("outcome %s, reason %s: %s", tr.Run.Outcome, tr.Run.Reason, tr.Run.Message)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3 (max_retries 2)", n)
	}
	anthropicNoKey(t, r)
	assertNoContainers(t, tr.Run.ID)
}

// TestAnthropicOverhead measures the per-step overhead agentbox adds around
// a model call when the server answers at once: each step's decision
// latency (from the trace) minus the server's handling time of its
// request, p50 over 60 steps. The screen is static for the mover (the
// pointer is not drawn) and changes every step for xeyes.
func TestAnthropicOverhead(t *testing.T) {
	testenv.Require(t, testenv.Slow("a measurement"), testenv.Image(testenv.RuntimeImage))
	const steps = 60
	for _, tc := range []struct {
		name, screen string
		xeyes        bool
	}{
		{"mover-640x480", "640x480", false},
		{"mover-1920x1080", "1920x1080", false},
		{"xeyes-1920x1080", "1920x1080", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target, args := moverApp(t, ""), []string{}
			if tc.xeyes {
				testenv.Require(t, testenv.Image(testenv.TestImage))
				target = t.TempDir()
				os.WriteFile(filepath.Join(target, "agentbox.json"), []byte(`{"command":"xeyes","args":["-geometry","600x400+100+100"],"window_title":"xeyes"}`), 0o644)
				args = []string{"--image", testenv.TestImage}
			}
			srv := at.New(t, func(r *at.Request) at.Reply {
				if r.N > steps {
					return at.Answer("end_turn", at.TextBlock("measured"))
				}
				x, y := 100+(r.N%2)*300, 100+(r.N%3)*150 // on every display; xeyes follows the pointer
				return at.Answer("tool_use", at.ToolUse(fmt.Sprintf("toolu_%d", r.N), map[string]any{"action": "mouse_move", "coordinate": []int{x, y}}))
			})
			r := anthropicRun(t, srv, target, append(args, "--screen", tc.screen, "--max-steps", "200")...)
			if r.code != 0 {
				t.Fatalf("want exit 0:\n%s", r)
			}
			tr := openTrace(t, r.dir)
			reqs := srv.Requests()
			if len(tr.Steps) != steps+1 || len(reqs) != steps+1 {
				t.Fatalf("%d steps, %d requests", len(tr.Steps), len(reqs))
			}
			var over, lat []time.Duration
			frames := map[string]bool{}
			for i, s := range tr.Steps {
				l := time.Duration(s.Decision.LatencyMS * float64(time.Millisecond))
				lat = append(lat, l)
				over = append(over, l-reqs[i].Handling)
				frames[s.Observation.FrameHash] = true
			}
			p := func(d []time.Duration, q float64) time.Duration {
				s := append([]time.Duration(nil), d...)
				sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
				return s[int(q*float64(len(s)-1))].Round(10 * time.Microsecond)
			}
			t.Logf("%s, %d steps, %d distinct frames: overhead p50 %v p90 %v (decision latency p50 %v)",
				tc.name, len(over), len(frames), p(over, 0.5), p(over, 0.9), p(lat, 0.5))
			if p(over, 0.5) > 2*time.Second {
				t.Errorf("overhead p50 %v", p(over, 0.5))
			}
		})
	}
}
