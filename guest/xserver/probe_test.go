package xserver_test

import (
	"testing"

	"github.com/jezek/xgb/xproto"

	"github.com/codegirl-games/agentbox/guest/xserver"
	"github.com/codegirl-games/agentbox/guest/xserver/xservertest"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

// TestWMProbeIDNotReused: the window StartWM probed Openbox's readiness
// with keeps its ID until the WM stops, so no client started after
// StartWM (the app) gets it. Openbox may still be handling repeats of
// the probe's request that queued up while it was busy, and it acts on
// whatever window has the ID by then: with the probe's connection closed
// at once, the app's first window had the probe's ID, and Openbox placed
// the mover's 640×480 window as a 1×1 one, centred at (318, 229), in
// about 1 of 180 starts under four busy loops and once in a CI run (a
// replay diverged at its first screen).
func TestWMProbeIDNotReused(t *testing.T) {
	testenv.Require(t, testenv.Programs("openbox"))
	s := xservertest.Start(t, xserver.Config{Width: 640, Height: 480})
	keep := connect(t, s.Display()) // the guest's own connection, opened first
	root := xproto.Setup(keep).DefaultScreen(keep).Root
	wm := xservertest.StartWM(t, s.Display())
	probe := xserver.ProbeWindow(wm)
	if probe == 0 {
		t.Fatal("StartWM kept no probe window")
	}
	for i := range 3 {
		app := connect(t, s.Display())
		win, err := xproto.NewWindowId(app)
		if err != nil {
			t.Fatal(err)
		}
		if err := xproto.CreateWindowChecked(app, 0, win, root, 0, 0, 64, 48, 0, xproto.WindowClassInputOutput, 0, 0, nil).Check(); err != nil {
			t.Fatal(err)
		}
		if uint32(win) == probe {
			t.Fatalf("client %d after StartWM got the probe window's ID %#x", i, probe)
		}
		app.Close()
	}
}
