package guest

import (
	"testing"

	"github.com/jezek/xgb/xproto"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/wire"
)

// TestWatchOverPipe: with watch on, the guest sends a screen event when
// another client draws and after an action (a pointer move damages
// nothing), at most one until a screenshot has been answered; with watch
// off, none.
func TestWatchOverPipe(t *testing.T) {
	testenv.Require(t, testenv.Programs("Xvfb"))
	h := startGuest(t)
	xc := h.startBare(t)
	scr := xproto.Setup(xc).DefaultScreen(xc)
	draw := func(col uint32) {
		t.Helper()
		gc, err := xproto.NewGcontextId(xc)
		if err != nil {
			t.Fatal(err)
		}
		xproto.CreateGC(xc, gc, xproto.Drawable(scr.Root), xproto.GcForeground|xproto.GcSubwindowMode,
			[]uint32{col, xproto.SubwindowModeIncludeInferiors})
		xproto.PolyFillRectangle(xc, xproto.Drawable(scr.Root), gc, []xproto.Rectangle{{X: 10, Y: 10, Width: 20, Height: 20}})
		xproto.FreeGC(xc, gc)
		if _, err := xproto.GetInputFocus(xc).Reply(); err != nil {
			t.Fatal(err)
		}
	}
	count := func(events []*wire.Message) int {
		n := 0
		for _, m := range events {
			if m.Method == wire.EventScreen {
				n++
			}
		}
		return n
	}
	screens := func() int { h.mu.Lock(); defer h.mu.Unlock(); return count(h.events) }
	waitScreens := func(what string, n int) {
		t.Helper()
		h.waitFor(what, func(events []*wire.Message, _ string) bool { return count(events) >= n })
		if got := screens(); got != n {
			t.Fatalf("%s: %d screen events, want %d", what, got, n)
		}
	}
	look := func() { h.must(wire.MethodScreenshot, wire.ScreenshotRequest{}, nil, nil) }
	move := func(x int) {
		y := 50
		h.must(wire.MethodAct, wire.ActRequest{Action: action.Action{Kind: action.MouseMove, X: &x, Y: &y}}, nil, nil)
	}

	var resp wire.WatchResponse
	h.must(wire.MethodWatch, wire.WatchRequest{On: true}, &resp, nil)
	if !resp.Damage {
		t.Fatal("watch on Xvfb: no DAMAGE")
	}
	look()
	draw(0xff0000)
	waitScreens("the event of a drawing", 1)
	// Outstanding: neither a second drawing nor an action sends another
	// (the action's would come before its answer).
	draw(0x00ff00)
	move(100)
	if got := screens(); got != 1 {
		t.Errorf("%d screen events before a look, want 1", got)
	}
	look()
	move(120)
	waitScreens("the event of a pointer move", 2)
	look()
	draw(0x0000ff)
	waitScreens("the event of a drawing after a look", 3)

	h.must(wire.MethodWatch, wire.WatchRequest{On: false}, &resp, nil)
	look()
	move(140)
	if got := screens(); got != 3 {
		t.Errorf("%d screen events after watch off, want 3", got)
	}
}
