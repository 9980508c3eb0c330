package guest

import (
	"path/filepath"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

// BenchmarkGuestStep is the guest's side of a step of an unchanged screen
// (a mouse move, then the screenshot with the state, answered "unchanged"),
// served on in-process pipes by a real Xvfb, beside an empty round trip
// (ping, answered by the read loop) and the step's primitives alone (the
// floor request's motion and damage check): what the guest adds to its
// floor, and its allocations (-benchmem; the host's end of the pipes is in
// the same process and counted too).
func BenchmarkGuestStep(b *testing.B) {
	testenv.Require(b, testenv.Programs("Xvfb"))
	h := startGuest(b)
	dir := b.TempDir()
	h.must(wire.MethodStart, wire.StartRequest{Screen: observe.Screen{Width: 640, Height: 480, Depth: 24}, NoWM: true,
		Home: filepath.Join(dir, "home"), AppDir: filepath.Join(dir, "app"), TimeoutMS: 60000}, nil, nil)
	var first wire.ScreenshotResponse
	h.must(wire.MethodScreenshot, wire.ScreenshotRequest{WithState: true}, &first, nil)
	b.Run("ping", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			h.must(wire.MethodPing, nil, nil, nil)
		}
	})
	b.Run("step", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			x, y := 10+i%600, 10+i%400
			i++
			var st wire.StepResponse
			h.must(wire.MethodStep, wire.StepRequest{Action: action.Action{Kind: action.MouseMove, X: &x, Y: &y},
				Screenshot: wire.ScreenshotRequest{WithState: true, IfNot: first.Hash}}, &st, nil)
			if st.Shot == nil || !st.Shot.Unchanged || st.Shot.State.Cursor != (action.Point{X: x, Y: y}) {
				b.Fatalf("step: %+v", st)
			}
		}
	})
	b.Run("floor", func(b *testing.B) {
		// Per floor request: 20 samples, a capture, the hash, s2 and
		// PNG encodes; what counts is the samples' means.
		var motion, damage int64
		n := 0
		for b.Loop() {
			var fl wire.FloorResponse
			h.must(wire.MethodFloor, wire.FloorRequest{Samples: 20}, &fl, nil)
			for i := range min(len(fl.Motion), len(fl.Damage)) {
				motion += fl.Motion[i]
				damage += fl.Damage[i]
				n++
			}
		}
		if n > 0 {
			b.ReportMetric(float64(motion)/float64(n), "motion-µs")
			b.ReportMetric(float64(damage)/float64(n), "damage-µs")
		}
	})
}
