package guest

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

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
	b.Run("paired", func(b *testing.B) {
		// As agentbox bench takes it: a one-sample floor of an unchanged
		// screen's step (the round trip of a ping, the motion and the
		// damage check) in turn with a step; the medians of both and
		// their gap, the guest's own work beyond its floor.
		var steps, floors, pings, motions, damages []float64
		i := 0
		for b.Loop() {
			var fl wire.FloorResponse
			h.must(wire.MethodFloor, wire.FloorRequest{Samples: 1, From: i + 1, PNG: new(int), Unchanged: true}, &fl, nil)
			t := time.Now()
			h.must(wire.MethodPing, nil, nil, nil)
			f := float64(time.Since(t).Nanoseconds()) / 1e3
			pings = append(pings, f)
			motions = append(motions, float64(fl.Motion[0]))
			damages = append(damages, float64(fl.Damage[0]))
			for _, v := range append(fl.Motion, fl.Damage...) {
				f += float64(v)
			}
			floors = append(floors, f)
			x, y := 10+(i*37)%600, 10+(i*53)%440
			i++
			var st wire.StepResponse
			t = time.Now()
			h.must(wire.MethodStep, wire.StepRequest{Action: action.Action{Kind: action.MouseMove, X: &x, Y: &y},
				Screenshot: wire.ScreenshotRequest{WithState: true, IfNot: first.Hash}}, &st, nil)
			steps = append(steps, float64(time.Since(t).Nanoseconds())/1e3)
			if st.Shot == nil || !st.Shot.Unchanged {
				b.Fatalf("step: %+v", st)
			}
		}
		s, f := median(steps), median(floors)
		b.ReportMetric(s, "step-µs")
		b.ReportMetric(f, "floor-µs")
		b.ReportMetric(s-f, "gap-µs")
		b.ReportMetric(median(pings), "ping-µs")
		b.ReportMetric(median(motions), "motion-µs")
		b.ReportMetric(median(damages), "damage-µs")
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

// median is the middle of v (the mean of the two middle values of an
// even count); 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}
