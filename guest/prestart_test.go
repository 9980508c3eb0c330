package guest

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/guest/xserver/xservertest"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

// TestEarlyDisplay: a guest told its screen (Options.Display) brings the
// display up before its hello, and a start asking for that screen gets
// that display (the same Xvfb, with Openbox); a start asking for another
// screen stops the early one and gets a display of its own at its size;
// so does a start that asks for the X server with GLX (or without) when
// the early one was brought up the other way.
func TestEarlyDisplay(t *testing.T) {
	testenv.Require(t, testenv.Programs("Xvfb", "openbox"))
	early := observe.Screen{Width: 640, Height: 480, Depth: 24}
	for _, tc := range []struct {
		name                 string
		ask                  observe.Screen
		earlyNoGLX, askNoGLX bool
		same                 bool
	}{
		{"same screen", early, false, false, true},
		{"another screen", observe.Screen{Width: 800, Height: 600, Depth: 24}, false, false, false},
		{"without GLX, as early", early, true, true, true},
		{"without GLX, early with it", early, false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			t.Setenv("HOME", home)
			h, g := startGuestWith(t, Options{Display: &early, DisplayWM: true, DisplayNoGLX: tc.earlyNoGLX})
			e := g.early.Load()
			if e == nil {
				t.Fatal("no early display")
			}
			select {
			case <-e.done:
			case <-time.After(60 * time.Second):
				t.Fatal("the early display did not come up within 60s")
			}
			if e.err != nil {
				t.Fatalf("early display: %v", e.err)
			}
			var resp wire.StartResponse
			h.must(wire.MethodStart, wire.StartRequest{Screen: tc.ask, NoGLX: tc.askNoGLX, Home: home, AppDir: filepath.Join(t.TempDir(), "app"), TimeoutMS: 60000}, &resp, nil)
			if !resp.WM {
				t.Errorf("start: no window manager")
			}
			if got := g.server == e.server; got != tc.same {
				t.Errorf("start used the early Xvfb: %v, want %v", got, tc.same)
			}
			if !tc.same {
				select {
				case <-e.server.Done():
				case <-time.After(10 * time.Second):
					t.Errorf("the early Xvfb still runs after a start asked for another screen")
				}
			}
			var shot wire.ScreenshotResponse
			h.must(wire.MethodScreenshot, wire.ScreenshotRequest{}, &shot, nil)
			if shot.Width != tc.ask.Width || shot.Height != tc.ask.Height {
				t.Errorf("screenshot %dx%d, want %v", shot.Width, shot.Height, tc.ask)
			}
			assertKeyboardClaimed(t, g)
		})
	}
}

// assertKeyboardClaimed: the display the guest brought up has the XTEST
// keyboard as its core keyboard's source already (x11.ClaimKeyboard), so
// the first key typed into an app tells no client the keyboard changed.
func assertKeyboardClaimed(t *testing.T, g *Guest) {
	t.Helper()
	w := xservertest.WatchKeyboard(t, g.server.Display())
	w.Changes(t)
	if err := g.x.TypeText(t.Context(), "Ada", 0); err != nil {
		t.Fatal(err)
	}
	if n := w.Changes(t); n > 0 {
		t.Errorf("the first keys typed on the guest's display changed the core keyboard (%d MappingNotify): it was not claimed", n)
	}
}
