package guest

import (
	"strings"
	"testing"
	"time"

	"github.com/jezek/xgb/xproto"

	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/wire"
)

// TestWindowListAfterFailedRead: a window mapped while reading the window
// list fails (the server too slow to answer on a loaded machine; here each
// read's deadline has passed before it starts) appears in the guest's list
// once reads succeed again, with no further X notification to ask for it.
// A failed read used to be dropped, and the window stayed missing: a launch
// then waited its whole ready timeout for a window that was up.
//
// A deadline in the past fails every read whatever the machine's load (a
// 1 ns one did not: under load its timer fired after a local round trip
// had answered, CI 2026-12-05). A decoy window mapped first proves that
// reads fail before the tested window maps, so no read begun under the
// old limit can list it (such a read may list the decoy).
func TestWindowListAfterFailedRead(t *testing.T) {
	testenv.Require(t, testenv.Programs("Xvfb"))
	h, g := startGuestWith(t, Options{})
	xc := h.startBare(t)
	scr := xproto.Setup(xc).DefaultScreen(xc)
	mapWindow := func(title string) xproto.Window {
		t.Helper()
		win, err := xproto.NewWindowId(xc)
		if err != nil {
			t.Fatal(err)
		}
		xproto.CreateWindow(xc, scr.RootDepth, win, scr.Root, 10, 10, 100, 80, 0, xproto.WindowClassInputOutput, scr.RootVisual, 0, nil)
		xproto.ChangeProperty(xc, xproto.PropModeReplace, win, xproto.AtomWmName, xproto.AtomString, 8, uint32(len(title)), []byte(title))
		xproto.MapWindow(xc, win)
		if _, err := xproto.GetInputFocus(xc).Reply(); err != nil {
			t.Fatal(err)
		}
		return win
	}

	g.refreshLimit.Store(-1) // every read of the window list fails
	mapWindow("decoy")
	// Reads are made one after another: a failure logged after the store
	// means any read begun before it has ended.
	h.waitFor("a failed read logged", func([]*wire.Message, string) bool {
		return strings.Contains(h.log.String(), "reading the window list")
	})
	win := mapWindow("stalled")
	time.Sleep(200 * time.Millisecond) // the map's notification is taken, its read failed
	if ws := g.windowList(); hasWindow(ws, uint32(win)) {
		t.Fatalf("the window is listed while every read fails: %+v", ws)
	}

	g.refreshLimit.Store(0)
	deadline := time.Now().Add(10 * time.Second)
	for !hasWindow(g.windowList(), uint32(win)) {
		if time.Now().After(deadline) {
			t.Fatalf("the window is not listed 10s after reads work again: %+v", g.windowList())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
