package guest

import (
	"path/filepath"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

// TestFloorRequest: a floor request times what it is asked for: its
// samples' motions go to the points from From on (one-sample requests
// move the pointer as one request of many), PNG sets the PNG encodes (by
// default min(Samples, 50)), and a bad count is refused.
func TestFloorRequest(t *testing.T) {
	testenv.Require(t, testenv.Programs("Xvfb"))
	h := startGuest(t)
	dir := t.TempDir()
	const w, hgt = 320, 200
	h.must(wire.MethodStart, wire.StartRequest{Screen: observe.Screen{Width: w, Height: hgt, Depth: 24}, NoWM: true,
		Home: filepath.Join(dir, "home"), AppDir: filepath.Join(dir, "app"), TimeoutMS: 60000}, nil, nil)
	ints := func(n int) *int { return &n }
	for _, tt := range []struct {
		req           wire.FloorRequest
		samples, pngs int
		cursorAfter   int // the index of the point the last motion went to
	}{
		{wire.FloorRequest{Samples: 1, From: 7, PNG: ints(0)}, 1, 0, 7},
		{wire.FloorRequest{Samples: 3, From: 2, PNG: ints(0)}, 3, 0, 4},
		{wire.FloorRequest{Samples: 0, PNG: ints(2)}, 0, 2, -1},
		{wire.FloorRequest{Samples: 2}, 2, 2, 1},
	} {
		var fl wire.FloorResponse
		h.must(wire.MethodFloor, tt.req, &fl, nil)
		if len(fl.Motion) != tt.samples || len(fl.Capture) != tt.samples || len(fl.Hash) != tt.samples || len(fl.Encode) != tt.samples || len(fl.PNG) != tt.pngs {
			t.Errorf("%+v: %d motions, %d captures, %d hashes, %d compressions, %d PNG encodes; want %d samples, %d PNG encodes",
				tt.req, len(fl.Motion), len(fl.Capture), len(fl.Hash), len(fl.Encode), len(fl.PNG), tt.samples, tt.pngs)
		}
		for _, us := range fl.PNG {
			if us <= 0 {
				t.Errorf("%+v: a PNG encode of %d µs (a frame's kept PNG?)", tt.req, us)
			}
		}
		if tt.cursorAfter < 0 {
			continue
		}
		var shot wire.ScreenshotResponse
		h.must(wire.MethodScreenshot, wire.ScreenshotRequest{WithState: true}, &shot, nil)
		x, y := floorPoint(tt.cursorAfter, w, hgt)
		if shot.State == nil || shot.State.Cursor != (action.Point{X: x, Y: y}) {
			t.Errorf("%+v: the pointer at %+v, want (%d,%d)", tt.req, shot.State, x, y)
		}
	}
	// An unchanged screen's samples: the motion and the damage check
	// (Xvfb offers DAMAGE), nothing captured, hashed or compressed.
	var fl wire.FloorResponse
	h.must(wire.MethodFloor, wire.FloorRequest{Samples: 2, From: 3, PNG: ints(0), Unchanged: true}, &fl, nil)
	if len(fl.Motion) != 2 || len(fl.Damage) != 2 || len(fl.Capture)+len(fl.Hash)+len(fl.Encode)+len(fl.PNG) != 0 {
		t.Errorf("unchanged: %+v", fl)
	}
	for _, req := range []wire.FloorRequest{{Samples: 1, PNG: ints(-1)}, {Samples: 1, From: -1}, {Samples: -1}} {
		if _, err := h.call(wire.MethodFloor, req, nil, nil); !wire.IsCode(err, wire.CodeInvalid) {
			t.Errorf("%+v: %v, want invalid", req, err)
		}
	}
}
