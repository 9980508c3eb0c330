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
// list fails (the server too slow to answer on a loaded machine; here the
// read's time limit is made a nanosecond) appears in the guest's list once
// reads succeed again, with no further X notification to ask for it. A
// failed read used to be dropped, and the window stayed missing: a launch
// then waited its whole ready timeout for a window that was up.
func TestWindowListAfterFailedRead(t *testing.T) {
	testenv.Require(t, testenv.Programs("Xvfb"))
	h, g := startGuestWith(t, Options{})
	xc := h.startBare(t)
	scr := xproto.Setup(xc).DefaultScreen(xc)

	g.refreshLimit.Store(1) // every read of the window list fails
	win, err := xproto.NewWindowId(xc)
	if err != nil {
		t.Fatal(err)
	}
	xproto.CreateWindow(xc, scr.RootDepth, win, scr.Root, 10, 10, 100, 80, 0, xproto.WindowClassInputOutput, scr.RootVisual, 0, nil)
	title := "stalled"
	xproto.ChangeProperty(xc, xproto.PropModeReplace, win, xproto.AtomWmName, xproto.AtomString, 8, uint32(len(title)), []byte(title))
	xproto.MapWindow(xc, win)
	if _, err := xproto.GetInputFocus(xc).Reply(); err != nil {
		t.Fatal(err)
	}
	// The map's notification has come and its read failed.
	h.waitFor("a failed read logged", func([]*wire.Message, string) bool {
		return strings.Contains(h.log.String(), "reading the window list")
	})
	time.Sleep(200 * time.Millisecond) // the notifications of the map are all taken
	if hasWindow(g.windowList(), uint32(win)) {
		t.Fatal("the window is listed while every read fails")
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
