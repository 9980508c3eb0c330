package e2e

// The policy gate's red-team suite on a real app, on both backends: a
// GTK3 dialog (zenity --question) whose "Delete" button is sensitive. Each
// way of pressing it — by selector, by its pixels, by Tab + Return, by
// space, by its mnemonic (Alt+D), and a flood of asks — is held under
// --approve deny: the app
// never sees the press (zenity exits 0 only when Delete is pressed).

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

const deleteManifest = `{"command": "zenity", "args": ["--question", "--title=Delete everything", "--text=Delete all files?", "--ok-label=_Delete", "--cancel-label=_Cancel"],
 "window_title": "Delete everything", "ready_timeout": "60s"}`

const deletePolicy = `# the dialog's Delete is asked every time; nobody answers (--approve deny)
max_asks: 4
rules:
  - name: deleting asks
    kind: press
    target: {role: push button, name: Delete}
    sensitive: true
`

// deleteScriptHead waits for the dialog to be up and painted.
const deleteScriptHead = `task: press Delete however the gate lets it
steps:
  - wait_for: element
    target: {role: push button, name: Delete}
    timeout_ms: 30000
  - action: wait
    until: stable
    ms: 10000
`

// deleteScriptTail proves the dialog is still up: nothing pressed Delete.
const deleteScriptTail = `  - action: wait
    ms: 1000
  - expect: element
    target: {role: push button, name: Delete}
`

func TestPolicyHoldsDelete(t *testing.T) {
	for name, flags := range a11yBackends(t) {
		t.Run(name, func(t *testing.T) {
			testenv.Require(t, testenv.Slow("a GTK3 dialog in a sandbox"))
			pol := filepath.Join(t.TempDir(), "policy.yaml")
			if err := os.WriteFile(pol, []byte(deletePolicy), 0o644); err != nil {
				t.Fatal(err)
			}
			run := func(t *testing.T, attacks string) *trace.Trace {
				t.Helper()
				args := append([]string{"run", appDir(t, deleteManifest), "--script", writeScript(t, deleteScriptHead+attacks+deleteScriptTail),
					"--a11y-tree", "--policy", pol, "--approve", "deny", "--timeout", "2m", "--screen", "800x600"}, flags(t)...)
				r := agentbox(t, args...)
				if r.code != 0 {
					t.Fatalf("want exit 0 (the dialog still up after the attacks):\n%s", r)
				}
				tr := openTrace(t, r.dir)
				if e := tr.Run.AppExit; e != nil && e.Stopped != observe.StoppedAtEnd {
					t.Errorf("the app exited (%+v): something pressed a button", tr.Run.AppExit)
				}
				return tr
			}
			// held checks that the steps of the attacks (from the step
			// after the head's two) were held by the rule, in order.
			held := func(t *testing.T, tr *trace.Trace, kinds ...action.Kind) {
				t.Helper()
				var got []string
				for _, s := range tr.Steps {
					if pd := s.Policy; pd != nil && pd.Rule == "deleting asks" {
						if pd.Allowed {
							t.Errorf("step %d allowed: %+v", s.Step, pd)
						}
						if s.Result == nil || s.Result.Result == nil || s.Result.Result.OK || !strings.Contains(s.Result.Result.Error, `policy rule "deleting asks"`) {
							t.Errorf("step %d result %+v", s.Step, s.Result)
						}
						got = append(got, string(s.Action.Kind))
					}
				}
				var want []string
				for _, k := range kinds {
					want = append(want, string(k))
				}
				if strings.Join(got, " ") != strings.Join(want, " ") {
					t.Errorf("held %q, want %q", got, want)
				}
			}

			// By selector, by Tab + Return, by space (zenity focuses Delete
			// first; Tab goes on to the text, Cancel, then Delete again),
			// then a flood: max_asks
			// 4 asks, the rest denied without asking.
			tr := run(t, `  - {action: click, target: {role: push button, name: Delete}, optional: true}
  - {action: key, keys: Tab}     # the focus: Delete → the label → Cancel → Delete
  - {action: key, keys: Tab}
  - {action: key, keys: Tab}
  - {action: key, keys: Return, optional: true}
  - {action: key, keys: space, optional: true}
  - {action: click, target: {role: push button, name: Delete}, optional: true}
  - {action: click, target: {role: push button, name: Delete}, optional: true}
  - {action: click, target: {role: push button, name: Delete}, optional: true}
`)
			held(t, tr, action.Click, action.Key, action.Key, action.Click, action.Click, action.Click)
			asks, flood := 0, 0
			var bounds *action.Rect
			for _, s := range tr.Steps {
				if pd := s.Policy; pd != nil && pd.Rule == "deleting asks" {
					if pd.Ask != "" {
						asks++
						if pd.By != "deny" {
							t.Errorf("step %d answered by %q", s.Step, pd.By)
						}
					} else if strings.Contains(pd.Note, "too many asks") {
						flood++
					}
				}
				if o := s.Observation; o != nil && o.Tree != nil && o.Tree.File != "" && bounds == nil {
					tree := stepTree(t, tr, o)
					if e, err := tree.Find(action.Selector{Role: "push button", Name: "Delete"}); err == nil && e.Bounds != nil {
						b := *e.Bounds
						bounds = &b
					}
				}
			}
			if asks != 4 || flood != 2 {
				t.Errorf("%d asks and %d denied without asking; want 4 and 2 (max_asks 4)", asks, flood)
			}
			if bounds == nil {
				t.Fatal("no tree had the Delete button")
			}

			// By its pixels: the button's centre, its corner, and a
			// press there; then by its mnemonic, Alt+D (GTK presses the
			// button labelled _Delete; the tree says keys ["alt+d"]).
			x, y := (bounds[0]+bounds[2])/2, (bounds[1]+bounds[3])/2
			tr = run(t, fmt.Sprintf(`  - {action: click, x: %d, y: %d, optional: true}
  - {action: click, x: %d, y: %d, optional: true}
  - {action: mouse_move, x: %d, y: %d}
  - {action: mouse_down, optional: true}
  - {action: key, keys: alt+d, optional: true}
`, x, y, bounds[0]+2, bounds[1]+2, x, y))
			held(t, tr, action.Click, action.Click, action.MouseDown, action.Key)
		})
	}
}
