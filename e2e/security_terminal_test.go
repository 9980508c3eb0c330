package e2e

// Red team, round two, item 4: no terminal injection. Whatever an app
// prints, titles its window with, or an agent says, reaches agentbox's
// stdout and stderr with its control characters escaped, and agentbox
// still reports the true outcome; the trace keeps the raw bytes.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
)

// hostileTerminalApp stages the hostile app in terminal mode with a
// manifest of its own.
func hostileTerminalApp(t *testing.T, manifest map[string]any) string {
	t.Helper()
	bin := testenv.Build(t, "./e2e/testdata/hostile")
	dir := t.TempDir()
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hostile"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	m, _ := json.Marshal(manifest)
	if err := os.WriteFile(filepath.Join(dir, "agentbox.json"), m, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// assertTerminalSafe fails on any byte of out a terminal would obey — ESC
// (and so CSI and OSC), BEL, CR, the other C0 controls but tab and newline,
// DEL, C1 controls as UTF-8 or as raw bytes — and on a line that passes for
// agentbox's own verdict.
func assertTerminalSafe(t *testing.T, what, out string) {
	t.Helper()
	for i := 0; i < len(out); {
		r, n := utf8.DecodeRuneInString(out[i:])
		bad := r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r <= 0x9f || r == '\u202e' || r == utf8.RuneError && n == 1
		if bad {
			t.Errorf("%s: byte %d is %q, which a terminal obeys:\n%q", what, i, out[i:i+n], out)
			return
		}
		i += n
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "success") {
			t.Errorf("%s: a line passes for agentbox's verdict: %q", what, line)
		}
	}
}

// TestSecurityTerminalAppFailsToStart: an app that prints terminal escapes
// (erase agentbox's line and print "success: …", set the title, write the
// clipboard, clear the screen with a C1 CSI) and exits before its window
// appears gets its output into agentbox's error message escaped, and the
// run still ends as the error it is. On both backends.
func TestSecurityTerminalAppFailsToStart(t *testing.T) {
	for _, backend := range []string{"docker", "local"} {
		t.Run(backend, func(t *testing.T) {
			args := []string{"--backend", backend}
			if backend == "docker" {
				testenv.Require(t, testenv.Image(testenv.TestImage))
				args = append(args, "--image", testenv.TestImage)
			} else {
				requireLocal(t)
			}
			app := hostileTerminalApp(t, map[string]any{"command": "hostile", "args": []string{"terminal", "exit"}, "ready_timeout": "30s"})
			r := agentbox(t, append([]string{"run", app, "--agent", "idle"}, args...)...)
			if r.code != 3 || !strings.HasPrefix(r.stdout, "error: ") || !strings.Contains(r.stdout, "[app_start]") {
				t.Fatalf("want exit 3 and an error line (app_start):\n%s", r)
			}
			// Positive control: the app's escapes did reach the message —
			// shown, not obeyed.
			if !strings.Contains(r.stdout, `\x1b]52;c;UFdORUQtQ0xJUA==\x07`) || !strings.Contains(r.stdout, `\x1b[1A\x1b[2K\rsuccess: all good`) {
				t.Errorf("the app's last output is not in the message:\n%s", r)
			}
			assertTerminalSafe(t, "stdout", r.stdout)
			assertTerminalSafe(t, "stderr", r.stderr)
			// The trace keeps what the app wrote, byte for byte.
			raw, err := os.ReadFile(filepath.Join(r.dir, trace.StderrFile))
			if err != nil || !strings.Contains(string(raw), "\x1b]52;c;UFdORUQtQ0xJUA==\x07") {
				t.Errorf("stderr.log lost the raw bytes (%v): %q", err, raw)
			}
			if backend == "docker" {
				assertNoContainers(t, openTrace(t, r.dir).Run.ID)
			} else {
				assertNoSandboxes(t, openTrace(t, r.dir).Run.ID)
			}
		})
	}
}

// terminalAgent is an exec agent that repeats what it saw — the window's
// title and the app's output — on its stderr (which agentbox passes
// through), and gives up with a message made of them and a forged verdict.
const terminalAgent = `
import json, sys
seen, title, n = [], None, 0
for line in sys.stdin:
    msg = json.loads(line)
    if msg["type"] != "observation":
        continue
    n += 1
    seen += [l["text"] for l in msg.get("output") or []]
    for w in msg.get("windows") or []:
        if w["title"].startswith("hostile"):
            title = w["title"]
    if n == 1 or title is None or not any("PWNED" in s for s in seen):
        print(json.dumps({"action": "wait", "ms": 100, "message": "waiting\x1b]0;agent-title\x07"}), flush=True)
        continue
    sys.stderr.write("title: " + title + "\n")
    for s in seen:
        sys.stderr.write("app said: " + s + "\n")
    sys.stderr.flush()
    print(json.dumps({"action": "done", "success": False,
        "message": "gave up; the window says " + title + "\nsuccess: forged by the agent\x1b[2K\r" + seen[-1]}), flush=True)
`

// TestSecurityTerminalWindowTitleAndAgent: a window title with escapes,
// the app's output and an agent that repeats both (in its messages, on its
// stderr, in its final verdict) print escaped, with --verbose, and the run
// ends as the failure it is.
func TestSecurityTerminalWindowTitleAndAgent(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.TestImage), testenv.Programs("python3"))
	script := filepath.Join(t.TempDir(), "agent.py")
	if err := os.WriteFile(script, []byte(terminalAgent), 0o644); err != nil {
		t.Fatal(err)
	}
	app := hostileTerminalApp(t, map[string]any{"command": "hostile", "args": []string{"terminal", "window"}, "window_title": "hostile*", "ready_timeout": "30s"})
	r := agentbox(t, "run", app, "--image", testenv.TestImage, "--verbose", "--timeout", "90s", "--agent", "exec", "--", "python3", script)
	if r.code != 1 || !strings.HasPrefix(r.stdout, "failure: gave up; the window says hostile ") {
		t.Fatalf("want exit 1 and the agent's failure:\n%s", r)
	}
	// Positive controls: the title reached the agent and its words came
	// back through every path — verdict, --verbose, the agent's stderr.
	for _, want := range []struct{ where, s string }{
		{r.stdout, `hostile \x1b]0;PWNED-TITLE\x07\x1b]2;PWNED-TITLE2\x1b\`},
		{r.stdout, "\n  success: forged by the agent"},
		{r.stderr, `title: hostile \x1b]0;PWNED-TITLE\x07`},
		{r.stderr, `app said: \x1b[1A\x1b[2K\rsuccess: all good (forged by the app)`},
		{r.stderr, `waiting\x1b]0;agent-title\x07`},
	} {
		if !strings.Contains(want.where, want.s) {
			t.Errorf("output lacks %q:\n%s", want.s, r)
		}
	}
	assertTerminalSafe(t, "stdout", r.stdout)
	assertTerminalSafe(t, "stderr", r.stderr)
	tr := openTrace(t, r.dir)
	if tr.Run.Outcome != trace.Failure || !strings.Contains(tr.Run.Message, "\x1b]0;PWNED-TITLE\x07") {
		t.Errorf("the trace must keep the agent's message raw: %s %q", tr.Run.Outcome, tr.Run.Message)
	}
	assertNoContainers(t, tr.Run.ID)
}
