package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/codegirl-games/agentbox/eval"
	"github.com/codegirl-games/agentbox/internal/cpuload"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/internal/xevents"
	"github.com/codegirl-games/agentbox/trace"
)

// xevScript sends clicks with three buttons at three places, a double
// click, a drag through three points, scrolls, a chord, Shift held across a
// click and Unicode text into xev, then F12 as an end marker.
const xevScript = `steps:
  - {action: click, x: 50, y: 60}
  - {action: click, x: 300, y: 200, button: right}
  - {action: click, x: 550, y: 380, button: middle}
  - {action: click, x: 400, y: 90, count: 2}
  - {action: drag, path: [[60, 330], [200, 270], [420, 360]]}
  - {action: scroll, x: 300, y: 250, dy: 2, dx: -1}
  - {action: key, keys: "ctrl+shift+t"}
  - {action: key_down, key: shift}
  - {action: click, x: 100, y: 130}
  - {action: key_up, key: shift}
  - {action: type, text: "Hé€✓日本 ok"}
  - {action: key, keys: F12}
  - {wait_for: log, contains: "F12"}
`

// The events xev must print for xevScript, before the F12 marker.
var (
	xevButtons = []string{
		"ButtonPress 1 (50,60)", "ButtonRelease 1 (50,60)",
		"ButtonPress 3 (300,200)", "ButtonRelease 3 (300,200)",
		"ButtonPress 2 (550,380)", "ButtonRelease 2 (550,380)",
		"ButtonPress 1 (400,90)", "ButtonRelease 1 (400,90)", "ButtonPress 1 (400,90)", "ButtonRelease 1 (400,90)",
		"ButtonPress 1 (60,330)", "ButtonRelease 1 (420,360)",
		"ButtonPress 5 (300,250)", "ButtonRelease 5 (300,250)", "ButtonPress 5 (300,250)", "ButtonRelease 5 (300,250)",
		"ButtonPress 6 (300,250)", "ButtonRelease 6 (300,250)",
		"ButtonPress 1 (100,130)", "ButtonRelease 1 (100,130)",
	}
	xevKeys = []string{
		"+Control_L", "+Shift_L", "+T", "-T", "-Shift_L", "-Control_L",
		"+Shift_L", "-Shift_L",
		"+Shift_L", "+H", "-H", "-Shift_L", "+eacute", "-eacute", "+U20AC", "-U20AC",
		"+U2713", "-U2713", "+U65E5", "-U65E5", "+U672C", "-U672C", "+space", "-space",
		"+o", "-o", "+k", "-k", "+F12",
	}
)

// TestEvalParallelXevExact runs eight xev episodes at --parallel 4 on a
// machine whose CPUs are saturated besides, and checks in every episode's
// stdout.log that xev received exactly what the script sent.
func TestEvalParallelXevExact(t *testing.T) {
	testenv.Require(t, testenv.Slow("saturates the CPUs"), testenv.Image(testenv.TestImage))
	dir := t.TempDir()
	app := filepath.Join(dir, "xev")
	os.Mkdir(app, 0o755)
	os.WriteFile(filepath.Join(app, "agentbox.json"), []byte(`{"command":"xev","args":["-geometry","600x400+0+0","-event","keyboard","-event","button","-event","mouse"],"window_title":"Event Tester"}`), 0o644)
	os.WriteFile(filepath.Join(dir, "xev.yaml"), []byte(xevScript), 0o644)
	suite := filepath.Join(dir, "suite.yaml")
	os.WriteFile(suite, []byte("name: xev\ntasks:\n  - name: xev\n    target: xev\n    script: xev.yaml\n    image: "+testenv.TestImage+"\n    episodes: 8\n    timeout: 120s\n"), 0o644)
	cpuload.Start(t, 2)
	out := filepath.Join(t.TempDir(), "out")
	r := agentbox(t, "eval", suite, "--parallel", "4", "--out", out)
	if r.code != 0 {
		t.Fatalf("want every episode to pass:\n%s", r)
	}
	data, err := os.ReadFile(filepath.Join(out, eval.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	var sum eval.Summary
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatal(err)
	}
	if len(sum.Episodes) != 8 {
		t.Fatalf("%d episodes, want 8", len(sum.Episodes))
	}
	for _, ep := range sum.Episodes {
		log, err := os.ReadFile(filepath.Join(out, ep.Trace, trace.StdoutFile))
		if err != nil {
			t.Fatal(err)
		}
		evs := xevents.Parse(string(log))
		var buttons, keys []string
		for _, e := range xevents.Filter(evs, "ButtonPress", "ButtonRelease") {
			buttons = append(buttons, fmt.Sprintf("%s %d (%d,%d)", e.Type, e.Button, e.RootX, e.RootY))
		}
		for _, e := range xevents.Filter(evs, "KeyPress", "KeyRelease") {
			sign := "+"
			if e.Type == "KeyRelease" {
				sign = "-"
			}
			keys = append(keys, sign+e.KeysymName)
		}
		if i := slices.Index(keys, "+F12"); i >= 0 {
			keys = keys[:i+1]
		}
		if !slices.Equal(buttons, xevButtons) {
			t.Errorf("episode %d: buttons\n got %v\nwant %v", ep.N, buttons, xevButtons)
		}
		if !slices.Equal(keys, xevKeys) {
			t.Errorf("episode %d: keys\n got %v\nwant %v", ep.N, keys, xevKeys)
		}
	}
	t.Logf("8 xev episodes exact at --parallel 4 under load in %.1f s", sum.DurationMS/1000)
}
