package script

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/observe"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// checkCorpus is one check step per line: every kind, with its fields right
// and wrong. A screenshot named "start" is remembered before each.
var checkCorpus = []string{
	// pixel
	`{expect: pixel, x: 1, y: 2, color: "#ff0000"}`,
	`{expect: pixel, x: 1, y: 2, color: "#ff0000", tolerance: 9}`,
	`{wait_for: pixel, x: 1, y: 2, color: "#ff0000", timeout_ms: 500}`,
	`{expect: pixel, x: 1, color: "#ff0000"}`,
	`{expect: pixel, y: 1, color: "#ff0000"}`,
	`{expect: pixel, x: 1, y: 1}`,
	`{expect: pixel, x: 640, y: 1, color: "#ff0000"}`,
	`{expect: pixel, x: -1, y: 1, color: "#ff0000"}`,
	`{expect: pixel, x: 1.5, y: 1, color: "#ff0000"}`,
	`{expect: pixel, x: "a", y: 1, color: "#ff0000"}`,
	`{expect: pixel, x: 1, y: 1, color: "#ff00"}`,
	`{expect: pixel, x: 1, y: 1, color: 7}`,
	`{expect: pixel, x: 1, y: 1, color: "#ff0000", tolerance: 256}`,
	`{expect: pixel, x: 1, y: 1, color: "#ff0000", tolerance: -1}`,
	`{expect: pixel, x: 1, y: 1, color: "#ff0000", since: start}`,
	`{expect: pixel, x: 1, y: 1, color: "#ff0000", timeout_ms: 5}`,
	// moved
	`{expect: moved, color: "#00ff00", min_dx: 100}`,
	`{expect: moved, color: "#00ff00", min_dy: -3, since: start}`,
	`{expect: moved, color: "#00ff00", min_dx: 1, min_dy: 2, tolerance: 3}`,
	`{expect: moved, color: "#00ff00"}`,
	`{expect: moved, min_dx: 1}`,
	`{expect: moved, color: "#00ff00", min_dx: x}`,
	`{expect: moved, color: "#00ff00", min_dx: 1, since: later}`,
	`{expect: moved, color: "#00ff00", min_dx: 1, region: [0, 0, 1, 1]}`,
	// changed, unchanged
	`{expect: changed}`,
	`{expect: changed, region: [0, 0, 10, 10], min_pixels: 5, since: start, tolerance: 2}`,
	`{expect: changed, min_pixels: 0}`,
	`{expect: changed, region: [0, 0, 700, 10]}`,
	`{expect: changed, region: [10, 10, 10, 20]}`,
	`{expect: changed, region: [0, 0, 1]}`,
	`{expect: changed, region: "all"}`,
	`{wait_for: unchanged, max_pixels: 3, timeout_ms: 600000}`,
	`{wait_for: unchanged, timeout_ms: 600001}`,
	`{wait_for: unchanged, timeout_ms: 0}`,
	`{expect: unchanged, max_pixels: -1}`,
	`{expect: unchanged, min_pixels: 1}`,
	// image
	`{expect: image, file: testdata/red4x2.png}`,
	`{expect: image, file: testdata/red4x2.png, region: [10, 10, 14, 12], max_diff: 0.5, tolerance: 4}`,
	`{expect: image, file: testdata/red4x2.png, max_diff: 2}`,
	`{expect: image, file: testdata/red4x2.png, max_diff: "x"}`,
	`{expect: image, file: testdata/red4x2.png, region: [0, 0, 5, 2]}`,
	`{expect: image, file: testdata/red4x2.png, region: [637, 0, 641, 2]}`,
	`{expect: image, file: nope.png}`,
	`{expect: image, file: checks_test.go}`,
	`{expect: image}`,
	`{expect: image, file: 3}`,
	// window
	`{expect: window, title: "mover*"}`,
	`{wait_for: window, title: "/^mo.er$/"}`,
	`{expect: window, title: "/(/"}`,
	`{expect: window, title: ""}`,
	`{expect: window}`,
	`{expect: window, title: x, color: "#000000"}`,
	// log
	`{expect: log, contains: ready}`,
	`{expect: log, stream: stderr, regex: "at x=\\d+"}`,
	`{wait_for: log, stream: stdout, contains: ready, timeout_ms: 100}`,
	`{expect: log, stream: both, contains: x}`,
	`{expect: log}`,
	`{expect: log, contains: a, regex: b}`,
	`{expect: log, regex: "("}`,
	`{expect: log, contains: 5}`,
	`{expect: log, contains: ~}`,
	// running, exited
	`{expect: running}`,
	`{wait_for: running, timeout_ms: 1}`,
	`{expect: running, code: 0}`,
	`{expect: exited}`,
	`{wait_for: exited, code: 3}`,
	`{expect: exited, code: -1}`,
	`{expect: exited, code: 1.5}`,
	// element
	`{expect: element, target: {role: push button, name: OK}}`,
	`{wait_for: element, target: {role: text, index: 0, ancestor: {role: dialog, name: "Add*"}}, text: Ada, timeout_ms: 500}`,
	`{expect: element, target: {name: "/^O.$/"}, state: [focused, "!checked"]}`,
	`{expect: element, target: {id: "1.7/12"}, name: OK, state: enabled}`,
	`{expect: element, target: {role: push button}, absent: true}`,
	`{expect: element}`,
	`{expect: element, target: {}}`,
	`{expect: element, target: {role: push button, colour: red}}`,
	`{expect: element, target: {name: "/(/"}}`,
	`{expect: element, target: {id: "x"}}`,
	`{expect: element, target: {role: label, index: -1}}`,
	`{expect: element, target: "OK"}`,
	`{expect: element, target: {role: label}, absent: yes please}`,
	`{expect: element, target: {role: label}, absent: true, name: OK}`,
	`{expect: element, target: {role: label}, state: 7}`,
	`{expect: element, target: {role: label}, state: "!"}`,
	`{expect: element, target: {role: label}, value: 3}`,
	// network
	`{expect: network, denied: evil.test}`,
	`{wait_for: network, allowed: "*.example.com:443", timeout_ms: 5000}`,
	`{expect: network}`,
	`{expect: network, denied: a, allowed: b}`,
	`{expect: network, denied: ""}`,
	`{expect: network, denied: "[bad"}`,
	`{expect: network, denied: x, stream: stdout}`,
	// file_written
	`{expect: file_written, path: "~/out/*.txt"}`,
	`{wait_for: file_written, path: "~/**/report.ods", timeout_ms: 5000}`,
	`{expect: file_written}`,
	`{expect: file_written, path: "out.txt"}`,
	`{expect: file_written, path: "~/../etc/passwd"}`,
	`{expect: file_written, path: "~/[bad"}`,
	`{expect: file_written, path: 3}`,
	`{expect: file_written, path: "~/a", exit: 0}`,
	// process
	`{expect: process, argv: "sh -c *"}`,
	`{expect: process, argv: "/^convert .*pdf$/", exit: 0}`,
	`{wait_for: process, argv: "sleep 1", exit: 3, timeout_ms: 2000}`,
	`{expect: process}`,
	`{expect: process, argv: ""}`,
	`{expect: process, argv: "/(/"}`,
	`{expect: process, argv: x, exit: 256}`,
	`{expect: process, argv: x, exit: "zero"}`,
	`{expect: process, argv: x, path: "~/a"}`,
	// the verb
	`{expect: colour}`,
	`{expect: 5}`,
	`{expect: [pixel]}`,
	`{wait_for: ~}`,
}

// TestCheckParseGolden: what the parser makes of each check, or the
// error it gives, is as recorded in testdata/checks.golden.
func TestCheckParseGolden(t *testing.T) {
	var out strings.Builder
	for _, step := range checkCorpus {
		src := "steps:\n  - screenshot: start\n  - " + step + "\n"
		s, err := Parse("play.yaml", []byte(src), observe.DefaultScreen)
		fmt.Fprintf(&out, "%s\n", step)
		if err != nil {
			fmt.Fprintf(&out, "  error: %v\n", err)
			continue
		}
		fmt.Fprintf(&out, "  %s\n", describeCheck(s.Steps[1].Check))
	}
	got := []byte(out.String())
	path := filepath.Join("testdata", "checks.golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("checks.golden differs (go test -update rewrites it):\ngot:\n%s", got)
	}
}

// describeCheck prints a parsed check's fields (not its compiled matchers
// or pixels, only whether they are there).
func describeCheck(c *Check) string {
	var b strings.Builder
	fmt.Fprintf(&b, "kind=%s wait=%v timeout_ms=%d tolerance=%d", c.Kind, c.Wait, c.TimeoutMS, c.Tolerance)
	if c.X != 0 || c.Y != 0 {
		fmt.Fprintf(&b, " x=%d y=%d", c.X, c.Y)
	}
	if c.ColorText != "" {
		fmt.Fprintf(&b, " color=%s%v", c.ColorText, c.Color)
	}
	if c.MinDX != nil {
		fmt.Fprintf(&b, " min_dx=%d", *c.MinDX)
	}
	if c.MinDY != nil {
		fmt.Fprintf(&b, " min_dy=%d", *c.MinDY)
	}
	if c.Since != "" {
		fmt.Fprintf(&b, " since=%s", c.Since)
	}
	if c.Region != nil {
		fmt.Fprintf(&b, " region=%v", *c.Region)
	}
	if c.MinPixels != 0 || c.MaxPixels != 0 {
		fmt.Fprintf(&b, " min_pixels=%d max_pixels=%d", c.MinPixels, c.MaxPixels)
	}
	if c.File != "" {
		fmt.Fprintf(&b, " file=%s image=%v max_diff=%g", c.File, c.Image != nil, c.MaxDiff)
	}
	if c.Title != "" {
		fmt.Fprintf(&b, " title=%q match=%v", c.Title, c.match != nil)
	}
	if c.Stream != "" || c.Contains != "" || c.Regex != nil {
		fmt.Fprintf(&b, " stream=%q contains=%q regex=%v", c.Stream, c.Contains, c.Regex)
	}
	if c.Code != nil {
		fmt.Fprintf(&b, " code=%d", *c.Code)
	}
	if c.NetDest != "" {
		fmt.Fprintf(&b, " net_dest=%q denied=%v", c.NetDest, c.NetDenied)
	}
	if c.Path != "" {
		fmt.Fprintf(&b, " path=%q", c.Path)
	}
	if c.Argv != "" {
		fmt.Fprintf(&b, " argv=%q match=%v", c.Argv, c.argvMatch != nil)
	}
	if c.Exit != nil {
		fmt.Fprintf(&b, " exit=%d", *c.Exit)
	}
	return b.String()
}
