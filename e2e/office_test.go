package e2e

// The office image's real applications: LibreOffice Calc started as a
// program of agentbox/office:bookworm, driven by its accessibility tree.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/environment/docker"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/observe"
)

// calcScript waits for Calc's first cell in the tree (Calc up, its GTK3
// plugin and accessibility on, no first-start dialog in the way), types a
// number into it and waits for the cell to hold it; then reads the tree
// twice more, a second apart, with Calc idle.
const calcScript = `task: put 4242 into A1
steps:
  - wait_for: element
    target: {role: table cell, name: A1}
    timeout_ms: 150000
  - expect: element
    target: {role: menu, name: File}
  - action: type
    text: "4242"
  - action: key
    key: Return
  - wait_for: element
    target: {role: table cell, name: A1}
    text: "4242"
    timeout_ms: 30000
  - expect: element
    target: {role: table cell, name: A2}
    state: focused
  - action: wait
    ms: 1000
  - expect: element
    target: {role: table cell, name: A1}
    text: "4242"
  - action: wait
    ms: 1000
  - expect: element
    target: {role: table cell, name: A1}
    text: "4242"
`

// TestOfficeCalc: `agentbox run localc --image agentbox/office:bookworm`
// starts Calc in a clean profile on a read-only root with HOME on a tmpfs,
// the image lists its apps, and the tree names Calc's cells (the visible
// ones; the sheet's 2^31 are never listed) and its menus.
func TestOfficeCalc(t *testing.T) {
	requireCurrentImage(t, testenv.OfficeImage)
	testenv.Require(t, testenv.Slow("LibreOffice Calc in a sandbox"))

	r := agentbox(t, "image", "inspect", "--json", testenv.OfficeImage)
	if r.code != 0 {
		t.Fatalf("%s", r)
	}
	var info docker.ImageInfo
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
		t.Fatalf("image inspect --json: %v\n%s", err, r.stdout)
	}
	for _, app := range []string{"localc", "lowriter", "loimpress", "mousepad", "gimp", "chromium"} {
		if !slices.Contains(info.Apps, app) {
			t.Errorf("%s carries %q: want %s among them", testenv.OfficeImage, info.Apps, app)
		}
	}

	r = agentbox(t, "run", "localc", "--image", testenv.OfficeImage, "--a11y-tree", "--script", writeScript(t, calcScript),
		"--screen", "1280x800", "--memory", "2g", "--timeout", "4m", "--start-timeout", "3m", "--ready-timeout", "3m")
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	tr := openTrace(t, r.dir)
	if !tr.Run.App.InImage || tr.Run.App.Command != "localc" {
		t.Errorf("app %+v: want the image's localc", tr.Run.App)
	}
	// The last tree read in full: A1 holds the number, the visible cells
	// are there and no more. A read is bounded in time (a second for each
	// call an application does not answer, Calc's main loop among them),
	// so on a busy machine a tree may be cut for time — said in its Cut,
	// and allowed here — but never for size, depth or count, and Calc is
	// read in full at least once after the edit (four reads, the last two
	// with Calc idle for a second).
	var tree *observe.Tree
	var timeCuts []string
	for i := len(tr.Steps) - 1; i >= 0; i-- {
		o := tr.Steps[i].Record.Observation
		if o == nil || o.Tree == nil || o.Tree.File == "" {
			continue
		}
		read := stepTree(t, tr, o)
		for _, c := range read.Cut {
			if strings.Contains(c, "did not answer") || strings.HasPrefix(c, "time:") {
				timeCuts = append(timeCuts, fmt.Sprintf("step %d: %s", i+1, c))
			} else {
				t.Errorf("step %d: the read was cut: %q", i+1, c)
			}
		}
		if tree == nil && len(read.Cut) == 0 {
			tree = read
		}
	}
	if len(timeCuts) > 0 {
		t.Logf("reads cut for time on this machine: %q", timeCuts)
	}
	if tree == nil {
		t.Fatal("no tree was read in full")
	}
	a1, err := tree.Find(action.Selector{Role: "table cell", Name: "A1"})
	if err != nil {
		t.Fatal(err)
	}
	if a1.Text != "4242" || a1.Bounds == nil {
		t.Errorf("A1: text %q, bounds %v", a1.Text, a1.Bounds)
	}
	cells := 0
	for _, e := range tree.Elements {
		if e.Role == "table cell" {
			cells++
		}
	}
	if cells < 20 || cells > 4096 {
		t.Errorf("%d cells in the tree: want the visible ones", cells)
	}
	t.Logf("%d elements, %d cells, read in %dms with %d calls", len(tree.Elements), cells, tree.ElapsedUS/1000, tree.Calls)
}
