package e2e

// The accessibility tree on real toolkit apps from Debian, on both
// backends: a GTK3 dialog (zenity), a Qt5 app (speedcrunch) and an app
// without accessibility (xcalc, Xaw).

import (
	"encoding/json"
	"image"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// a11yImage is the image of the Docker runs: the test image, which has
// zenity and speedcrunch (AGENTBOX_TEST_IMAGE names another, e.g. one
// built under a temporary tag).
func a11yImage() string {
	if v := os.Getenv("AGENTBOX_TEST_IMAGE"); v != "" {
		return v
	}
	return testenv.TestImage
}

// a11yBackends are the backends the tests run on, with the flags that
// choose each and what it needs.
func a11yBackends(t *testing.T) map[string]func(t *testing.T) []string {
	return map[string]func(t *testing.T) []string{
		"docker": func(t *testing.T) []string {
			testenv.Require(t, testenv.Image(a11yImage()))
			return []string{"--backend", "docker", "--image", a11yImage()}
		},
		"local": func(t *testing.T) []string {
			requireLocal(t)
			testenv.Require(t, testenv.Programs("dbus-daemon", "zenity", "speedcrunch", "xcalc"))
			return []string{"--backend", "local"}
		},
	}
}

// appDir is an app directory whose manifest starts a program of the
// image (or the host, on the local backend).
func appDir(t *testing.T, manifest string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// stepTree reads the tree recorded with a step's observation.
func stepTree(t *testing.T, tr *trace.Trace, o *trace.Observation) *observe.Tree {
	t.Helper()
	if o == nil || o.Tree == nil || o.Tree.File == "" {
		t.Fatalf("the observation has no tree: %+v", o)
	}
	data, err := trace.ReadFile(tr.Dir, o.Tree.File, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	var tree observe.Tree
	if err := json.Unmarshal(data, &tree); err != nil {
		t.Fatal(err)
	}
	return &tree
}

const zenityManifest = `{"command": "zenity", "args": ["--entry", "--title=Name please", "--text=Your name:"],
 "window_title": "Name please", "ready_timeout": "60s"}`

// zenityScript fills the entry and presses OK by selector; zenity prints
// what was entered on OK, which proves both landed.
const zenityScript = `task: fill the dialog by its elements
steps:
  - wait_for: element
    target: {role: push button, name: OK}
    timeout_ms: 30000
  - action: wait              # the tree can be ahead of GTK's first paint
    until: stable
    ms: 10000
  - expect: element
    target: {role: text, ancestor: {role: dialog, name: "Name*"}}
    state: [editable, enabled, "!checked"]
  - expect: element
    target: {role: label, name: "Your name:"}
  - action: type
    target: {role: text}
    text: "Ada Lovelace"
  - expect: element
    target: {role: text}
    text: "Ada Lovelace"
    state: focused
  - action: click
    target: {role: push button, name: OK}
  - wait_for: exited
    code: 0
    timeout_ms: 20000
  - expect: log
    stream: stdout
    contains: "Ada Lovelace"
`

func TestA11yZenity(t *testing.T) {
	for name, flags := range a11yBackends(t) {
		t.Run(name, func(t *testing.T) {
			testenv.Require(t, testenv.Slow("a GTK3 app in a sandbox"))
			args := append([]string{"run", appDir(t, zenityManifest), "--script", writeScript(t, zenityScript), "--marks", "--timeout", "2m", "--screen", "800x600"}, flags(t)...)
			r := agentbox(t, args...)
			if r.code != 0 {
				t.Fatalf("want exit 0:\n%s", r)
			}
			tr := openTrace(t, r.dir)
			if !tr.Run.Settings.A11y || !tr.Run.Settings.Marks {
				t.Errorf("settings: %+v", tr.Run.Settings)
			}
			// The first observation after the screen came to rest whose
			// tree has the dialog's buttons: the tree is there as soon as
			// GTK made the widgets, the pixels once it painted them.
			var obs *trace.Observation
			var tree *observe.Tree
			rested := false
			for _, s := range tr.Steps {
				if a := s.Record.Action; a != nil && a.Kind == action.Wait {
					rested = true
					continue
				}
				o := s.Record.Observation
				if !rested || o == nil || o.Tree == nil || o.Tree.Elements == 0 {
					continue
				}
				tree = stepTree(t, tr, o)
				if _, err := tree.Find(action.Selector{Role: "push button", Name: "OK"}); err == nil {
					obs = o
					break
				}
			}
			if obs == nil {
				t.Fatal("no recorded tree has the OK button")
			}
			checkZenityTree(t, tr, obs, tree)
			checkMarks(t, tr, obs, tree)
			// The type and the click were resolved in the live tree and
			// recorded with what they found.
			var typed, clicked *action.Resolved
			for _, s := range tr.Steps {
				if s.Record.Action == nil || s.Result == nil || s.Result.Result == nil {
					continue
				}
				switch s.Record.Action.Kind {
				case action.Type:
					typed = s.Result.Result.Target
				case action.Click:
					clicked = s.Result.Result.Target
				}
			}
			if typed == nil || typed.Role != "text" || typed.Focus == "" {
				t.Errorf("type's target: %+v", typed)
			}
			if clicked == nil || clicked.Name != "OK" || clicked.Point == nil {
				t.Fatalf("click's target: %+v", clicked)
			}
			ok, _ := tree.Find(action.Selector{Role: "push button", Name: "OK"})
			if c, _ := ok.Center(); *clicked.Point != c {
				t.Errorf("the click went to %v, the OK button's centre is %v", *clicked.Point, c)
			}
		})
	}
}

// checkZenityTree holds the dialog's tree to the X server's and the
// screenshot's view of the same window.
func checkZenityTree(t *testing.T, tr *trace.Trace, o *trace.Observation, tree *observe.Tree) {
	t.Helper()
	dlg, err := tree.Find(action.Selector{Role: "dialog", Name: "Name please"})
	if err != nil {
		t.Fatalf("%v", err)
	}
	var win *observe.Window
	for i := range o.Windows {
		if o.Windows[i].Title == "Name please" {
			win = &o.Windows[i]
		}
	}
	if win == nil {
		t.Fatalf("no X window titled Name please: %+v", o.Windows)
	}
	// The dialog's bounds are its X window's as the window manager
	// placed it, with the frame the manager drew around it (GTK gives a
	// toplevel's frame extents): they hold the client area and are at
	// most a title bar larger.
	want := action.Rect{win.X, win.Y, win.X + win.Width, win.Y + win.Height}
	checkFrame(t, dlg, want)
	shot := readPNG(t, filepath.Join(tr.Dir, o.Screenshot))
	inside := func(e *observe.Element) {
		b := *e.Bounds
		if b[0] < want[0] || b[1] < want[1] || b[2] > want[2] || b[3] > want[3] || b.Dx() < 10 || b.Dy() < 10 {
			t.Errorf("%s is not inside the dialog %v", e.Describe(), want)
		}
	}
	for _, sel := range []action.Selector{{Role: "push button", Name: "OK"}, {Role: "push button", Name: "Cancel"}, {Role: "text"}, {Role: "label", Name: "Your name:"}} {
		e, err := tree.Find(sel)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		inside(e)
		if sel.Role == "push button" && !e.Has("focusable") {
			t.Errorf("%s: states %v", e.Describe(), e.States)
		}
	}
	// On the screenshot: the entry's inside is the entry's white, the
	// dialog's background around it is not; each button's label is drawn
	// inside its bounds (dark pixels among the button's light ones).
	entry, _ := tree.Find(action.Selector{Role: "text"})
	if c := pixelAt(shot, entry.Bounds[0]+entry.Bounds.Dx()/2, entry.Bounds[1]+entry.Bounds.Dy()/2); c != [3]uint8{255, 255, 255} {
		t.Errorf("the entry's centre on the screenshot is %v, want white", c)
	}
	if c := pixelAt(shot, entry.Bounds[0]+entry.Bounds.Dx()/2, entry.Bounds[1]-3); c == [3]uint8{255, 255, 255} {
		t.Errorf("above the entry is white too: its bounds are not where the screenshot shows it")
	}
	for _, name := range []string{"OK", "Cancel"} {
		b, _ := tree.Find(action.Selector{Role: "push button", Name: name})
		if dark(shot, *b.Bounds) == 0 {
			t.Errorf("no label drawn inside %s", b.Describe())
		}
	}
}

// checkMarks: the agent's copy of the screenshot has numbered boxes on
// the entry and the buttons, the trace's raw screenshot has none.
func checkMarks(t *testing.T, tr *trace.Trace, o *trace.Observation, tree *observe.Tree) {
	t.Helper()
	if o.MarkedScreenshot == "" || len(o.Marks) == 0 {
		t.Fatalf("no marks recorded: %+v", o)
	}
	byName := map[string]observe.Mark{}
	for _, m := range o.Marks {
		byName[m.Role+" "+m.Name] = m
	}
	for _, want := range []string{"push button OK", "push button Cancel", "text "} {
		m, ok := byName[want]
		if !ok {
			t.Errorf("no mark on %s: %+v", want, o.Marks)
			continue
		}
		e, _ := tree.Find(action.Selector{ID: m.ID})
		if e == nil || *e.Bounds != m.Bounds {
			t.Errorf("mark %d (%s) is at %v, the element at %v", m.N, want, m.Bounds, e)
		}
	}
	raw := readPNG(t, filepath.Join(tr.Dir, o.Screenshot))
	marked := readPNG(t, filepath.Join(tr.Dir, o.MarkedScreenshot))
	ok := byName["push button OK"].Bounds
	edge := func(img image.Image) [3]uint8 { return pixelAt(img, ok[0], ok[1]+ok.Dy()/2) }
	if edge(raw) == edge(marked) {
		t.Errorf("the OK button's left edge is %v on both the raw and the marked screenshot", edge(raw))
	}
	// Away from every mark the two are the same.
	if pixelAt(raw, 2, 2) != pixelAt(marked, 2, 2) {
		t.Errorf("the marked screenshot differs from the raw one away from the marks")
	}
}

// checkFrame holds a toplevel's bounds to its X window's client area:
// equal, or that area with a window manager's frame around it.
func checkFrame(t *testing.T, e *observe.Element, client action.Rect) {
	t.Helper()
	b := *e.Bounds
	if b[0] > client[0] || b[1] > client[1] || b[2] < client[2] || b[3] < client[3] ||
		client[0]-b[0] > 8 || b[2]-client[2] > 8 || client[1]-b[1] > 32 || b[3]-client[3] > 8 {
		t.Errorf("%s: its X window's client area is %v", e.Describe(), client)
	}
}

func pixelAt(img image.Image, x, y int) [3]uint8 {
	r, g, b, _ := img.At(x, y).RGBA()
	return [3]uint8{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8)}
}

// dark counts the pixels of r darker than mid-grey.
func dark(img image.Image, r action.Rect) int {
	n := 0
	for y := r[1]; y < r[3]; y++ {
		for x := r[0]; x < r[2]; x++ {
			c := pixelAt(img, x, y)
			if int(c[0])+int(c[1])+int(c[2]) < 3*100 {
				n++
			}
		}
	}
	return n
}

// speedcrunchScript types an expression into the Qt app's editor by
// selector and reads the result from its display in the tree.
const speedcrunchScript = `task: compute by elements
steps:
  - wait_for: element
    target: {role: menu item, name: Session}
    timeout_ms: 30000
  - action: type
    target: {role: text, index: 1}
    text: "6*7\n"
  - wait_for: element
    target: {role: text, index: 0}
    text: "/= ?42/"
    timeout_ms: 10000
`

func TestA11yQt(t *testing.T) {
	for name, flags := range a11yBackends(t) {
		t.Run(name, func(t *testing.T) {
			testenv.Require(t, testenv.Slow("a Qt5 app in a sandbox"))
			manifest := `{"command": "speedcrunch", "window_title": "SpeedCrunch", "ready_timeout": "60s"}`
			args := append([]string{"run", appDir(t, manifest), "--script", writeScript(t, speedcrunchScript), "--a11y-tree", "--timeout", "2m", "--screen", "800x600"}, flags(t)...)
			r := agentbox(t, args...)
			if r.code != 0 {
				t.Fatalf("want exit 0:\n%s", r)
			}
			tr := openTrace(t, r.dir)
			o := tr.Steps[0].Record.Observation
			tree := stepTree(t, tr, o)
			frame, err := tree.Find(action.Selector{Role: "frame", Name: "SpeedCrunch"})
			if err != nil {
				t.Fatal(err)
			}
			var win *observe.Window
			for i := range o.Windows {
				if o.Windows[i].Title == "SpeedCrunch" {
					win = &o.Windows[i]
				}
			}
			if win == nil {
				t.Fatalf("no X window titled SpeedCrunch: %+v", o.Windows)
			}
			checkFrame(t, frame, action.Rect{win.X, win.Y, win.X + win.Width, win.Y + win.Height})
			for _, m := range []string{"Session", "Edit", "View", "Settings", "Help"} {
				e, err := tree.Find(action.Selector{Role: "menu item", Name: m, Ancestor: &action.Selector{Role: "menu bar"}})
				if err != nil {
					t.Errorf("%v", err)
				} else if b := *e.Bounds; b[1] < frame.Bounds[1] || b[3] > frame.Bounds[1]+40 {
					t.Errorf("%s is not along the top of the window %v", e.Describe(), *frame.Bounds)
				}
			}
		})
	}
}

// xcalcScript: Xaw has no accessibility; the tree is empty, with a note,
// and that is no error.
const xcalcScript = `task: look for elements where there are none
steps:
  - action: wait
    until: stable
    stable_ms: 300
  - expect: element
    target: {role: push button}
    absent: true
`

func TestA11yNoAccessibility(t *testing.T) {
	for name, flags := range a11yBackends(t) {
		t.Run(name, func(t *testing.T) {
			testenv.Require(t, testenv.Slow("xcalc in a sandbox"))
			manifest := `{"command": "xcalc", "window_title": "Calculator", "ready_timeout": "60s"}`
			args := append([]string{"run", appDir(t, manifest), "--script", writeScript(t, xcalcScript), "--a11y-tree", "--timeout", "1m"}, flags(t)...)
			r := agentbox(t, args...)
			if r.code != 0 {
				t.Fatalf("want exit 0:\n%s", r)
			}
			tr := openTrace(t, r.dir)
			o := tr.Steps[len(tr.Steps)-1].Record.Observation
			if o.Tree == nil || o.Tree.Error != "" || o.Tree.Elements != 0 || !strings.Contains(o.Tree.Note, "no application exposes") {
				t.Fatalf("tree info: %+v", o.Tree)
			}
			if tree := stepTree(t, tr, o); len(tree.Elements) != 0 || tree.Apps != 0 {
				t.Errorf("tree: %+v", tree)
			}
		})
	}
}
