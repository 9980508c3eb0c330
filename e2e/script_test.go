package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/internal/xevents"
	"github.com/codegirl-games/agentbox/trace"
)

// writeScript writes a script next to a copy of the reference image.
func writeScript(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	ref, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "e2e", "testdata", "green40.png"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "green40.png"), ref, 0o644)
	p := filepath.Join(dir, "play.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The mover window sits at (1,20) under Openbox: the square's 40×40 pixels
// start at screen (41,240).
const moverPasses = `task: every check kind, passing
steps:
  - wait_for: window
    title: "mov*"
  - action: wait
    until: stable
    stable_ms: 200
  - expect: window
    title: "/^mover$/"
  - expect: log
    stream: stdout
    contains: "mover: ready"
  - expect: running
  - expect: pixel
    x: 60
    y: 260
    color: "#00ff00"
  - expect: image
    file: green40.png
    region: [41, 240, 81, 280]
  - screenshot: start
  - action: wait
    ms: 100
  - expect: unchanged
  - action: key_down
    key: Right
  - action: wait
    ms: 600
  - expect: changed
    since: start
    min_pixels: 1000
  - wait_for: moved
    color: "#00ff00"
    min_dx: 100
    since: start
  - action: key_up
    key: Right
  - wait_for: log
    regex: "at x=\\d+ y=220"
  - action: key
    keys: q
  - wait_for: exited
    code: 0
`

func TestScriptPasses(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	r := agentbox(t, "run", moverApp(t, ""), "--script", writeScript(t, moverPasses))
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	tr := openTrace(t, r.dir)
	if tr.Run.Agent.Name != "script" || tr.Run.Task != "every check kind, passing" {
		t.Errorf("run = %+v", tr.Run.Agent)
	}
	// Every check is recorded with what was expected and seen.
	n := 0
	for _, s := range tr.Steps {
		if s.Decision == nil {
			continue
		}
		checks, _ := s.Decision.Meta["checks"].([]any)
		n += len(checks)
	}
	if n != 11 {
		t.Errorf("%d checks recorded, want 11", n)
	}
	assertNoContainers(t, tr.Run.ID)
}

func TestScriptCheckFailures(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	app := moverApp(t, "")
	prefix := "steps:\n  - {wait_for: window, title: mover}\n  - {action: wait, until: stable, stable_ms: 200}\n  - {screenshot: start}\n  - {action: wait, ms: 50}\n"
	tests := []struct {
		kind, step, seen string
	}{
		{"pixel", `{expect: pixel, x: 5, y: 300, color: "#00ff00"}`, "#202020"},
		{"moved", `{expect: moved, color: "#00ff00", min_dx: 10, since: start}`, "moved dx +0.0"},
		{"changed", `{expect: changed, since: start}`, "0 changed"},
		{"unchanged", `{expect: unchanged, region: [41, 240, 81, 280], max_pixels: 0}` + "\n  - {action: key_down, key: Right}\n  - {action: wait, ms: 300}\n  - {expect: unchanged, since: start}", "changed"},
		{"image", `{expect: image, file: green40.png, region: [0, 0, 40, 40]}`, "1600 of 1600 pixels differ"},
		{"window", `{expect: window, title: xcalc}`, `windows: ["mover"]`},
		{"log", `{expect: log, contains: "no such line"}`, "none matching"},
		{"running", "{action: key, keys: q}\n  - {wait_for: exited}\n  - {expect: running}", "it exited (exit code 0)"},
		{"exited", `{expect: exited, code: 0}`, "it is running"},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			r := agentbox(t, "run", app, "--script", writeScript(t, prefix+"  - "+tt.step+"\n"))
			if r.code != 1 {
				t.Fatalf("want exit 1:\n%s", r)
			}
			tr := openTrace(t, r.dir)
			if tr.Run.Reason != trace.ReasonCheckFailed || !strings.Contains(tr.Run.Message, "expect "+tt.kind) || !strings.Contains(tr.Run.Message, tt.seen) {
				t.Errorf("reason %q, message %q; want check_failed naming %q and %q", tr.Run.Reason, tr.Run.Message, tt.kind, tt.seen)
			}
			last := tr.Steps[len(tr.Steps)-1]
			failed, _ := last.Decision.Meta["failed"].(map[string]any)
			if failed == nil || failed["expected"] == "" || failed["seen"] == "" {
				t.Errorf("the trace does not say what was expected and seen: %+v", last.Decision.Meta)
			}
			if _, err := os.Stat(filepath.Join(r.dir, last.Observation.Screenshot)); err != nil {
				t.Errorf("the screenshot the check looked at is missing: %v", err)
			}
			assertNoContainers(t, tr.Run.ID)
		})
	}
}

func TestScriptWaitForTimesOut(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	r := agentbox(t, "run", moverApp(t, ""), "--script", writeScript(t, "steps:\n  - {wait_for: window, title: Nope, timeout_ms: 1500}\n"))
	if r.code != 1 {
		t.Fatalf("want exit 1:\n%s", r)
	}
	tr := openTrace(t, r.dir)
	if tr.Run.Reason != trace.ReasonCheckFailed || !strings.Contains(tr.Run.Message, "timed out after 1.5s") {
		t.Errorf("reason %q, message %q", tr.Run.Reason, tr.Run.Message)
	}
	if loop := tr.Run.Timings["loop"]; loop < 1500 || loop > 6000 {
		t.Errorf("the 1.5 s wait_for took %.0f ms", loop)
	}
	assertNoContainers(t, tr.Run.ID)
}

// TestScriptActionFails: a script whose action fails — a wait until a
// window that never comes, with the real guest answering ok false, met
// false — ends as a failure naming the step (action_failed, exit 1), not
// as a success; marked optional: true, the same step is let pass (the
// control).
func TestScriptActionFails(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	app := moverApp(t, "")
	const body = "steps:\n  - {wait_for: window, title: mover}\n  - {action: wait, until: window, title: Nope, ms: 300%s}\n  - {expect: running}\n"
	r := agentbox(t, "run", app, "--script", writeScript(t, fmt.Sprintf(body, "")))
	if r.code != 1 || !strings.Contains(r.stdout, "failure: ") || !strings.Contains(r.stdout, "[action_failed]") {
		t.Fatalf("want exit 1, failure [action_failed]:\n%s", r)
	}
	tr := openTrace(t, r.dir)
	if tr.Run.Reason != trace.ReasonActionFailed || !strings.Contains(tr.Run.Message, "play.yaml:3: step 2 (wait, line 3) failed: wait until window: not met within 300ms") {
		t.Errorf("reason %q, message %q; want action_failed naming step 2", tr.Run.Reason, tr.Run.Message)
	}
	assertNoContainers(t, tr.Run.ID)

	r = agentbox(t, "run", app, "--script", writeScript(t, fmt.Sprintf(body, ", optional: true")))
	if r.code != 0 || !strings.Contains(r.stdout, "1 optional action failed") {
		t.Fatalf("optional: want exit 0 saying the optional action failed:\n%s", r)
	}
}

// TestScriptScreenContradicted: --screen that differs from the script's
// own screen is a usage error before anything starts (the script's
// coordinates were written for its screen); the same screen, or none on
// the command line, is not (the controls, stopped by an unknown backend).
func TestScriptScreenContradicted(t *testing.T) {
	play := writeScript(t, "screen: 1024x768\nsteps:\n  - {action: click, x: 900, y: 700}\n")
	r := cliMain(t, "run", stubApp(t, ""), "--script", play, "--screen", "800x600", "--backend", "none-such")
	if r.code != 2 || !strings.Contains(r.stderr, "--screen 800x600x24 contradicts the screen of "+play+" (1024x768x24)") {
		t.Errorf("want exit 2 naming both screens:\n%s", r)
	}
	for _, extra := range [][]string{{"--screen", "1024x768"}, nil} {
		r := cliMain(t, append([]string{"run", stubApp(t, ""), "--script", play, "--backend", "none-such"}, extra...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "unknown backend") {
			t.Errorf("%v: want to get as far as the backend:\n%s", extra, r)
		}
	}
}

// TestScriptRejectedBeforeStart: a bad script is a usage error naming its
// line before anything starts (in-process, as TestStagingRejects).
func TestScriptRejectedBeforeStart(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"unknown action", "steps:\n  - {action: jump}\n", `play.yaml:2: step 1: field "action": unknown action "jump"`},
		{"unknown field", "steps:\n  - action: key\n    keys: a\n    kyes: b\n", `play.yaml:4: step 1: key: field "kyes": unknown field`},
		{"unknown check field", "steps:\n  - {expect: pixel, x: 1, y: 1, colour: \"#000000\"}\n", `step 1: unknown field "colour"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := cliMain(t, "run", stubApp(t, ""), "--backend", "docker", "--script", writeScript(t, tt.body))
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("want exit 2 with %q:\n%s", tt.want, r)
			}
			if _, err := os.Stat(r.dir); err == nil {
				t.Error("a trace was started for a rejected script")
			}
		})
	}
}

// TestScriptXterm drives a real terminal from a script; TestScriptXev checks
// that what a script sends arrives exactly, parsing xev's output from the
// trace's stdout.log.
func TestScriptXterm(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.TestImage))
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command":"xterm","args":["-l","-lf","/dev/stdout","-T","term","-e","bash","--norc","--noprofile","-i"],"window_title":"term"}`), 0o644)
	body := `steps:
  - {wait_for: log, contains: "$ "}
  - {action: type, text: "echo $((6*7)) > /tmp/x; cat /tmp/x\n"}
  - {wait_for: log, regex: "(^|\\r)42\\r?$"}  # bash may start the line with an escape sequence and \\r
  - {action: type, text: "exit\n"}
  - {wait_for: exited}
`
	r := agentbox(t, "run", dir, "--image", testenv.TestImage, "--script", writeScript(t, body))
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
}

func TestScriptXev(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.TestImage))
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command":"xev","args":["-geometry","600x400+0+0"],"window_title":"Event Tester"}`), 0o644)
	text := `<>?|~"' aZ é€日`
	js, _ := json.Marshal(text)
	body := `steps:
  - {action: mouse_move, x: 300, y: 200}
  - {action: type, text: ` + string(js) + `}
  - {action: key, keys: "ctrl+shift+t"}
  - {action: click, x: 100, y: 150, button: right}
  - {action: scroll, x: 120, y: 160, dy: -2}
  - {wait_for: log, contains: "button 4"}
  - {action: wait, ms: 200}
`
	r := agentbox(t, "run", dir, "--image", testenv.TestImage, "--script", writeScript(t, body))
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	out, err := os.ReadFile(filepath.Join(r.dir, trace.StdoutFile))
	if err != nil {
		t.Fatal(err)
	}
	evs := xevents.Parse(string(out))
	var typed strings.Builder
	for _, e := range xevents.Filter(evs, "KeyPress") {
		if len(e.Lookup) > 0 && e.State&0x4 == 0 {
			typed.WriteString(e.Lookup)
		}
	}
	if typed.String() != text {
		t.Errorf("xev received %q, want %q", typed.String(), text)
	}
	var buttons []string
	for _, e := range xevents.Filter(evs, "ButtonPress") {
		buttons = append(buttons, fmtButton(e))
	}
	if got := strings.Join(buttons, " "); got != "3@100,150 4@120,160 4@120,160" {
		t.Errorf("buttons = %q", got)
	}
}

func fmtButton(e xevents.Event) string {
	return itoa(e.Button) + "@" + itoa(e.RootX) + "," + itoa(e.RootY)
}
