package script

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/observe"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"unknown action", "steps:\n  - action: jump\n", `play.yaml:2: step 1: field "action": unknown action "jump"`},
		{"unknown action field", "steps:\n  - action: key\n    keys: a\n    kyes: b\n", `play.yaml:4: step 1: key: field "kyes": unknown field`},
		{"bad key name", "steps:\n  - {action: key_down, key: Rihgt}\n", `play.yaml:2: step 1: key_down: field "key": unknown key "Rihgt"`},
		{"off screen", "screen: 320x240\nsteps:\n  - {action: click, x: 400, y: 10}\n", `play.yaml:3: step 1: click: (400,10) is outside the 320x240 screen`},
		{"unknown check", "steps:\n  - expect: colour\n", `play.yaml:2: step 1: unknown check "colour"`},
		{"unknown check field", "steps:\n  - expect: window\n    title: x\n    titel: y\n", `play.yaml:4: step 1: unknown field "titel": expect window takes title`},
		{"missing field", "steps:\n  - expect: pixel\n    x: 1\n    color: \"#ffffff\"\n", `step 1: expect pixel needs field "y"`},
		{"unquoted color", "steps:\n  - expect: pixel\n    x: 1\n    y: 1\n    color: #ffffff\n", `field "color": must be text, got null`},
		{"bad color", "steps:\n  - {expect: pixel, x: 1, y: 1, color: \"green\"}\n", `want #rrggbb`},
		{"timeout only for wait_for", "steps:\n  - {expect: running, timeout_ms: 5}\n", `unknown field "timeout_ms"`},
		{"since unknown", "steps:\n  - {expect: changed, since: start}\n", `no earlier step remembers a screenshot named "start"`},
		{"moved needs bound", "steps:\n  - {expect: moved, color: \"#00ff00\"}\n", `needs min_dx or min_dy`},
		{"log needs one", "steps:\n  - {expect: log, contains: a, regex: b}\n", `exactly one of contains or regex`},
		{"bad regex", "steps:\n  - {expect: log, regex: \"(\"}\n", `field "regex"`},
		{"image missing", "steps:\n  - {expect: image, file: nope.png}\n", `nope.png`},
		{"image region size", "steps:\n  - {expect: image, file: testdata/red4x2.png, region: [0, 0, 5, 2]}\n", `is 5x2 but testdata/red4x2.png is 4x2`},
		{"two kinds", "steps:\n  - {action: key, keys: a, expect: running}\n", `exactly one of action, expect, wait_for or screenshot`},
		{"input to leaves the home", "task: x\ninputs:\n  - {from: a, to: ~/a}\n  - {from: b, to: ~/../b}\nsteps:\n  - {expect: running}\n", `play.yaml:4: field "inputs"[1].to: "~/../b" leaves the home (..)`},
		{"collect outside the home", "collect: [/etc/passwd]\nsteps:\n  - {expect: running}\n", `play.yaml:1: field "collect"[0]: "/etc/passwd" is not below the home`},
		{"before_collect alone", "before_collect:\n  - {action: key, keys: ctrl+s}\nsteps:\n  - {expect: running}\n", `play.yaml:1: field "before_collect" without "collect"`},
		{"unknown top field", "taks: x\nsteps:\n  - {expect: running}\n", `play.yaml:1: unknown field "taks" (did you mean task?) (a script has task, screen, steps, grade, inputs, collect, collect_limits, before_collect)`},
		{"top field twice", "task: x\nsteps:\n  - {expect: running}\ntask: y\n", `play.yaml:4: field "task" appears twice`},
		{"step field twice", "steps:\n  - action: key\n    keys: a\n    keys: b\n", `play.yaml:4: field "keys" appears twice`},
		{"task not text", "task: [x]\nsteps:\n  - {expect: running}\n", `play.yaml:1: field "task": must be text`},
		{"bad screen", "screen: big\nsteps:\n  - {expect: running}\n", `play.yaml:1: field "screen": `},
		{"empty", "", `play.yaml:1: the file is empty (a script is a mapping with task, screen and steps)`},
		{"a list", "- a\n", `play.yaml:1: a script is a mapping with task, screen and steps`},
		{"no steps", "task: x\n", `steps: a non-empty list`},
		{"not yaml", "steps: [\n", `play.yaml`},
		{"step not a map", "steps:\n  - key Return\n", `step 1: want a mapping`},
		{"key and keys", "steps:\n  - action: key\n    keys: a\n    key: b\n", `play.yaml:4: step 1: key: field "key": give keys (a key or chord) or key (one key), not both`},
		{"screenshot extra", "steps:\n  - {screenshot: a, region: [0,0,1,1]}\n", `screenshot: NAME takes no other fields`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("play.yaml", []byte(tt.in), observe.DefaultScreen)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant containing %q", err, tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("does not wrap ErrInvalid")
			}
		})
	}
}

// TestKeyTakesKey: the key action takes its key as key too, the name
// key_down and key_up use.
func TestKeyTakesKey(t *testing.T) {
	s, err := Parse("play.yaml", []byte("steps:\n  - {action: key, key: Return}\n  - {action: key, key: ctrl+s, repeat: 2}\n"), observe.DefaultScreen)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, st := range s.Steps {
		got = append(got, st.Action.Keys)
	}
	if strings.Join(got, " ") != "Return ctrl+s" {
		t.Errorf("keys %q, want Return ctrl+s", got)
	}
}

func TestParseJSONAndAllKinds(t *testing.T) {
	dir := t.TempDir()
	data, _ := os.ReadFile("testdata/red4x2.png")
	os.WriteFile(filepath.Join(dir, "ref.png"), data, 0o644)
	js := `{"task": "t", "screen": "320x240", "steps": [
	  {"screenshot": "start"},
	  {"action": "key", "keys": "ctrl+s"},
	  {"expect": "pixel", "x": 1, "y": 2, "color": "#00ff00", "tolerance": 3},
	  {"expect": "moved", "color": "#00ff00", "min_dx": -10, "since": "start"},
	  {"expect": "changed", "region": [0, 0, 10, 10], "min_pixels": 5},
	  {"wait_for": "unchanged", "timeout_ms": 500},
	  {"expect": "image", "file": "ref.png", "region": [10, 10, 14, 12], "max_diff": 0.1},
	  {"wait_for": "window", "title": "/^Calc/"},
	  {"expect": "log", "stream": "stderr", "regex": "^err"},
	  {"expect": "running"},
	  {"wait_for": "exited", "code": 0}
	]}`
	s, err := Parse(filepath.Join(dir, "s.json"), []byte(js), observe.DefaultScreen)
	if err != nil {
		t.Fatal(err)
	}
	if s.Screen != (observe.Screen{Width: 320, Height: 240, Depth: 24}) || len(s.Steps) != 11 || s.Task != "t" {
		t.Fatalf("script = %+v", s)
	}
	if c := s.Steps[5].Check; !c.Wait || c.TimeoutMS != 500 || c.Kind != CheckUnchanged {
		t.Errorf("step 6 = %+v", c)
	}
	if c := s.Steps[10].Check; c.Code == nil || *c.Code != 0 || c.TimeoutMS != DefaultWaitMS {
		t.Errorf("step 11 = %+v", c)
	}
}

// frame paints a w×h frame black with a green 4×4 square at (x, y).
func frame(x, y int) *observe.Frame {
	w, h := 64, 48
	pix := make([]byte, 4*w*h)
	for i := 3; i < len(pix); i += 4 {
		pix[i] = 255
	}
	for yy := y; yy < y+4; yy++ {
		for xx := x; xx < x+4; xx++ {
			pix[4*(yy*w+xx)+1] = 255
		}
	}
	return &observe.Frame{Width: w, Height: h, Pix: pix, Hash: uint64(x*1000 + y)}
}

func play(t *testing.T, src string, obs ...*observe.Observation) []agent.Decision {
	t.Helper()
	s, err := Parse("t.yaml", []byte(src), observe.Screen{Width: 64, Height: 48, Depth: 24})
	if err != nil {
		t.Fatal(err)
	}
	a := New(s)
	var ds []agent.Decision
	for _, o := range obs {
		d, err := a.Decide(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	return ds
}

func obs(f *observe.Frame, out ...string) *observe.Observation {
	o := &observe.Observation{Screen: f, Running: true, Windows: []observe.Window{{Title: "Calculator"}}}
	for _, l := range out {
		o.Output = append(o.Output, observe.LogLine{Stream: observe.Stdout, Text: l})
	}
	return o
}

func TestChecksPassAndFail(t *testing.T) {
	tests := []struct {
		name   string
		steps  string
		frames []*observe.Observation
		ok     bool
		seen   string
	}{
		{"pixel", `{expect: pixel, x: 11, y: 11, color: "#00ff00"}`, []*observe.Observation{obs(frame(10, 10))}, true, "#00ff00"},
		{"pixel fails", `{expect: pixel, x: 0, y: 0, color: "#00ff00", tolerance: 10}`, []*observe.Observation{obs(frame(10, 10))}, false, "#000000"},
		{"moved", "{screenshot: a}\n  - {action: wait, ms: 1}\n  - {expect: moved, color: \"#00ff00\", min_dx: 20, since: a}", []*observe.Observation{obs(frame(5, 10)), obs(frame(30, 10))}, true, "dx +25.0"},
		{"moved fails", "{screenshot: a}\n  - {action: wait, ms: 1}\n  - {expect: moved, color: \"#00ff00\", min_dx: 20, since: a}", []*observe.Observation{obs(frame(5, 10)), obs(frame(10, 10))}, false, "dx +5.0"},
		{"moved left", "{screenshot: a}\n  - {action: wait, ms: 1}\n  - {expect: moved, color: \"#00ff00\", min_dx: -3, since: a}", []*observe.Observation{obs(frame(10, 10)), obs(frame(5, 10))}, true, "dx -5.0"},
		{"changed", "{action: wait, ms: 1}\n  - {expect: changed, min_pixels: 16}", []*observe.Observation{obs(frame(5, 5)), obs(frame(20, 20))}, true, "32 changed"},
		{"changed fails in region", "{action: wait, ms: 1}\n  - {expect: changed, region: [40, 40, 60, 48]}", []*observe.Observation{obs(frame(5, 5)), obs(frame(20, 20))}, false, "0 changed"},
		{"unchanged", "{action: wait, ms: 1}\n  - {expect: unchanged}", []*observe.Observation{obs(frame(5, 5)), obs(frame(5, 5))}, true, "0 changed"},
		{"unchanged fails", "{action: wait, ms: 1}\n  - {expect: unchanged, max_pixels: 3}", []*observe.Observation{obs(frame(5, 5)), obs(frame(6, 5))}, false, "8 changed"},
		{"window", `{expect: window, title: "Calc*"}`, []*observe.Observation{obs(frame(0, 0))}, true, `"Calculator"`},
		{"window fails", `{expect: window, title: xterm}`, []*observe.Observation{obs(frame(0, 0))}, false, `windows: ["Calculator"]`},
		{"log", `{expect: log, contains: ready}`, []*observe.Observation{obs(frame(0, 0), "mover: ready 640x480")}, true, "ready"},
		{"log regex on stderr fails", `{expect: log, stream: stderr, regex: "^ready"}`, []*observe.Observation{obs(frame(0, 0), "ready")}, false, "0 lines"},
		{"running", `{expect: running}`, []*observe.Observation{obs(frame(0, 0))}, true, "running"},
		{"exited fails", `{expect: exited, code: 0}`, []*observe.Observation{obs(frame(0, 0))}, false, "it is running"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := play(t, "steps:\n  - "+tt.steps+"\n", tt.frames...)
			last := ds[len(ds)-1]
			if last.Action.Kind != action.Done {
				t.Fatalf("last decision = %v", last.Action)
			}
			if last.Action.Succeeded() != tt.ok {
				t.Fatalf("success = %v: %s", last.Action.Succeeded(), last.Message)
			}
			if !tt.ok && last.Reason != agent.ReasonCheckFailed {
				t.Errorf("reason = %q", last.Reason)
			}
			checks, _ := last.Meta["checks"].([]CheckRecord)
			if len(checks) == 0 || !strings.Contains(checks[len(checks)-1].Seen, tt.seen) {
				t.Errorf("checks = %+v, want seen containing %q (message %s)", checks, tt.seen, last.Message)
			}
		})
	}
}

func TestImageCheck(t *testing.T) {
	f := frame(0, 0)
	for x := 10; x < 14; x++ {
		for y := 10; y < 12; y++ {
			i := 4 * (y*f.Width + x)
			f.Pix[i], f.Pix[i+1] = 255, 0
		}
	}
	pass := play(t, "steps:\n  - {expect: image, file: testdata/red4x2.png, region: [10, 10, 14, 12]}\n", obs(f))
	if !pass[0].Action.Succeeded() {
		t.Errorf("image check failed: %s", pass[0].Message)
	}
	fail := play(t, "steps:\n  - {expect: image, file: testdata/red4x2.png, region: [11, 10, 15, 12], max_diff: 0.2}\n", obs(f))
	if fail[0].Action.Succeeded() || !strings.Contains(fail[0].Message, "2 of 8 pixels differ (25.00%)") {
		t.Errorf("shifted image: %s", fail[0].Message)
	}
}

func TestWaitFor(t *testing.T) {
	src := "steps:\n  - {wait_for: log, contains: ready, timeout_ms: 200}\n  - {action: key, keys: a}\n"
	ds := play(t, src, obs(frame(0, 0)), obs(frame(0, 0), "ready"))
	if ds[0].Action.Kind != action.Wait || ds[0].Action.MS <= 0 || ds[0].Action.MS > 100 {
		t.Errorf("first decision polls with %v", ds[0].Action)
	}
	if ds[1].Action.Kind != action.Key {
		t.Errorf("after the log line the script goes on; got %v", ds[1].Action)
	}
	// Timing out ends the run cleanly with what was expected and seen.
	s, _ := Parse("t.yaml", []byte("steps:\n  - {wait_for: window, title: Nope, timeout_ms: 30}\n"), observe.Screen{Width: 64, Height: 48, Depth: 24})
	a := New(s)
	d, _ := a.Decide(t.Context(), obs(frame(0, 0)))
	if d.Action.Kind != action.Wait || d.Action.Until != action.UntilWindow || d.Action.Title != "Nope" {
		t.Errorf("wait_for window polls with %+v", d.Action)
	}
	for d.Action.Kind != action.Done {
		d, _ = a.Decide(t.Context(), obs(frame(0, 0)))
	}
	if d.Action.Succeeded() || !strings.Contains(d.Message, "timed out after 30ms") || !strings.Contains(d.Message, `windows: ["Calculator"]`) {
		t.Errorf("timeout: %s", d.Message)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("task: t\nsteps:\n  - {action: key, keys: Return}\n  - {expect: window, title: x}\n"))
	f.Add([]byte(`{"steps":[{"screenshot":"a"},{"wait_for":"moved","color":"#00ff00","min_dx":1,"since":"a"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("f.yaml", data, observe.DefaultScreen)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		if len(s.Steps) == 0 {
			t.Fatal("accepted a script without steps")
		}
	})
}

// TestFailedActionFailsTheRun: an action that failed (a wait until a
// window that never came: ok false, met false) ends the run as a failure
// naming the step, unless the step is optional; an action that worked
// goes on (the control).
func TestFailedActionFailsTheRun(t *testing.T) {
	no := false
	failed := &action.Result{OK: false, Met: &no, Error: "wait until window: not met within 50ms"}
	after := func(last *action.Result) *observe.Observation {
		o := obs(frame(0, 0))
		o.Last = last
		return o
	}
	const wait = "  - {action: wait, until: window, title: Nope, ms: 50"
	for _, c := range []struct {
		name   string
		src    string
		last   *action.Result
		ok     bool
		reason string
		want   string
	}{
		{"failed", "steps:\n" + wait + "}\n  - {expect: running}\n", failed, false, agent.ReasonActionFailed,
			"t.yaml:2: step 1 (wait, line 2) failed: wait until window: not met within 50ms"},
		{"optional", "steps:\n" + wait + ", optional: true}\n  - {expect: running}\n", failed, true, "",
			"all 2 steps of t.yaml passed (1 check; 1 optional action failed)"},
		{"worked", "steps:\n" + wait + "}\n  - {expect: running}\n", &action.Result{OK: true}, true, "",
			"all 2 steps of t.yaml passed (1 check)"},
		{"the last step", "steps:\n" + wait + "}\n", failed, false, agent.ReasonActionFailed, "step 1 (wait, line 2) failed"},
		{"the one step worked", "steps:\n" + wait + "}\n", &action.Result{OK: true}, true, "", "the one step of t.yaml passed (0 checks)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ds := play(t, c.src, obs(frame(0, 0)), after(c.last))
			d := ds[1]
			if d.Action.Kind != action.Done || d.Action.Succeeded() != c.ok || d.Reason != c.reason || !strings.Contains(d.Message, c.want) {
				t.Errorf("decision %v (success %v, reason %q): %s; want success %v, reason %q, containing %q",
					d.Action.Kind, d.Action.Succeeded(), d.Reason, d.Message, c.ok, c.reason, c.want)
			}
			if c.name == "failed" {
				if rec, ok := d.Meta["failed_action"].(ActionRecord); !ok || rec.Step != 1 || rec.Line != 2 || rec.Action != "wait" {
					t.Errorf("meta %+v: want the failed step recorded", d.Meta)
				}
			}
			if c.name == "optional" {
				if _, ok := d.Meta["optional_failed"].(ActionRecord); !ok {
					t.Errorf("meta %+v: want the optional failure recorded", d.Meta)
				}
			}
		})
	}
}

// TestCheckPollsAreNotActions: a wait_for window that polls with waits of
// its own is judged by its check, not by the polls' results.
func TestCheckPollsAreNotActions(t *testing.T) {
	no := false
	s, err := Parse("t.yaml", []byte("steps:\n  - {wait_for: window, title: Calc*, timeout_ms: 5000}\n"), observe.Screen{Width: 64, Height: 48, Depth: 24})
	if err != nil {
		t.Fatal(err)
	}
	a := New(s)
	first := obs(frame(0, 0))
	first.Windows = nil
	d, _ := a.Decide(t.Context(), first)
	if d.Action.Kind != action.Wait {
		t.Fatalf("first decision %v, want a poll", d.Action)
	}
	o := obs(frame(0, 0))
	o.Last = &action.Result{OK: false, Met: &no, Error: "wait until window: not met"}
	d, _ = a.Decide(t.Context(), o)
	if !d.Action.Succeeded() || d.Action.Kind != action.Done {
		t.Errorf("after the window came: %v %s", d.Action, d.Message)
	}
}

func TestOptionalParse(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"steps:\n  - {expect: running, optional: true}\n", "step 1: optional applies to actions only"},
		{"steps:\n  - {action: key, keys: a, optional: yes please}\n", "step 1: optional must be true or false"},
	} {
		if _, err := Parse("play.yaml", []byte(c.in), observe.DefaultScreen); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.in, err, c.want)
		}
	}
	s, err := Parse("play.yaml", []byte("steps:\n  - {action: key, keys: a, optional: true}\n"), observe.DefaultScreen)
	if err != nil || !s.Steps[0].Optional || s.Steps[0].Action.Kind != action.Key {
		t.Errorf("optional action: %+v, %v", s, err)
	}
}
