package guest

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/s2"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

// TestFirstScreenshotSettled: the screenshot a launch answers with shows
// the window as the window manager leaves it — its frame painted active —
// not a frame half-way. Openbox focuses a new window itself, and the focus
// is in the window before Openbox has painted the frame for it; a first
// screenshot taken then had an inactive title (two movers' first screens
// differed in one pixel of the title beside a busy test suite). Each
// launch's first screenshot must equal the screen once it holds still.
func TestFirstScreenshotSettled(t *testing.T) {
	testenv.Require(t, testenv.Programs("Xvfb", "openbox", "xev"))
	const w, ht = 320, 240
	decode := func(what string, payload []byte) []byte {
		t.Helper()
		raw, err := s2.Decode(nil, payload)
		if err != nil || len(raw) != 4*w*ht {
			t.Fatalf("%s: %d bytes (%v)", what, len(raw), err)
		}
		return raw
	}
	// A display each time: a relaunch in place needs a sandboxed guest.
	for i := range 8 {
		h := startGuest(t)
		dir := t.TempDir()
		var started wire.StartResponse
		h.must(wire.MethodStart, wire.StartRequest{Screen: observe.Screen{Width: w, Height: ht, Depth: 24},
			Home: filepath.Join(dir, "home"), AppDir: filepath.Join(dir, "app"), TimeoutMS: 60000}, &started, nil)
		if !started.WM {
			t.Fatalf("start: %+v: want a window manager", started)
		}
		var launched wire.LaunchResponse
		payload := h.must(wire.MethodLaunch, wire.LaunchRequest{Command: "xev", InImage: true, Args: []string{"-geometry", "200x150+40+40"},
			WindowTitle: "Event Tester", ReadyMS: 60000, Screenshot: &wire.ScreenshotRequest{}}, &launched, nil)
		if launched.Screenshot == nil || launched.Window == nil {
			t.Fatalf("launch %d: %+v: want a window and the first screenshot", i, launched)
		}
		if !launched.Window.Focused {
			t.Errorf("launch %d: the window is not focused", i)
		}
		first := decode("first screenshot", payload)
		// The screen once it holds still: the same frame twice, 100 ms apart.
		var settled []byte
		for try := 0; settled == nil; try++ {
			if try == 50 {
				t.Fatalf("launch %d: the screen never held still", i)
			}
			var a, b wire.ScreenshotResponse
			pa := h.must(wire.MethodScreenshot, wire.ScreenshotRequest{}, &a, nil)
			h.must(wire.MethodAct, wire.ActRequest{Action: action.Action{Kind: action.Wait, MS: 100}}, nil, nil)
			h.must(wire.MethodScreenshot, wire.ScreenshotRequest{IfNot: a.Hash}, &b, nil)
			if b.Unchanged {
				settled = decode("settled screenshot", pa)
			}
		}
		if !bytes.Equal(first, settled) {
			t.Errorf("launch %d: the first screenshot differs from the settled screen: %s", i, firstDiff(first, settled, w))
		}
	}
}

// firstDiff names the first pixel at which two BGRX frames differ.
func firstDiff(a, b []byte, width int) string {
	n := 0
	at := -1
	for i := 0; i+3 < len(a); i += 4 {
		if !bytes.Equal(a[i:i+3], b[i:i+3]) {
			if at < 0 {
				at = i
			}
			n++
		}
	}
	if at < 0 {
		return "no pixel differs"
	}
	px := at / 4
	return fmt.Sprintf("%d pixels, the first at (%d,%d): %x, settled %x", n, px%width, px/width, a[at:at+3], b[at:at+3])
}
