package guestenv_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/observe"
)

// stepEnv is an environment on the scripted guest (pipes, no sandbox):
// what a step costs the host alone.
func stepEnv(tb testing.TB) environment.Environment {
	tb.Helper()
	ctx := context.Background()
	b := &guestenvtest.Backend{New: func() *guestenvtest.Guest { return &guestenvtest.Guest{} }}
	env, err := b.Create(ctx, environment.Config{Screen: observe.DefaultScreen})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { env.Close(ctx) })
	if _, err := env.Launch(ctx, environment.LaunchSpec{App: &app.Bundle{Manifest: app.Manifest{Command: "app"}}, LogCap: 1 << 20}); err != nil {
		tb.Fatal(err)
	}
	if _, _, err := env.Observe(ctx); err != nil {
		tb.Fatal(err)
	}
	return env
}

// BenchmarkStepHost is a step of an unchanged screen on the host's side
// (its allocations, -benchmem): a mouse move and the screenshot after it
// as an act and a screenshot request, and as one step request.
func BenchmarkStepHost(b *testing.B) {
	ctx := context.Background()
	x, y := 10, 20
	a := action.Action{Kind: action.MouseMove, X: &x, Y: &y}
	b.Run("act+observe", func(b *testing.B) {
		env := stepEnv(b)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := env.Act(ctx, a); err != nil {
				b.Fatal(err)
			}
			if _, _, err := env.Observe(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("step", func(b *testing.B) {
		env := stepEnv(b)
		sp := env.(environment.Stepper)
		b.ReportAllocs()
		for b.Loop() {
			if _, got, err := sp.Step(ctx, a, nil); err != nil || got == nil {
				b.Fatal(got, err)
			}
		}
	})
}

// desktop is a w×h BGRX screen that compresses about as a desktop's does:
// flat areas, gradients and a band of text-like noise.
func desktop(w, h int) []byte {
	pix := make([]byte, 4*w*h)
	r := rand.New(rand.NewPCG(3, 4))
	for y := range h {
		for x := range w {
			i := 4 * (y*w + x)
			switch {
			case y%97 < 12 && x%211 < 150: // windows' text
				v := byte(r.IntN(4) * 80)
				pix[i], pix[i+1], pix[i+2] = v, v, v
			case x < w/3:
				pix[i], pix[i+1], pix[i+2] = byte(y), byte(x/8), 0x40
			default:
				pix[i], pix[i+1], pix[i+2] = 0xee, 0xee, 0xee
			}
			pix[i+3] = byte(r.IntN(2)) // X's padding byte, not always 0
		}
	}
	return pix
}

// BenchmarkStepHostFull is a full-frame step on the host's side (the
// guest sends the whole frame every step, as `agentbox bench`'s "full
// frame" step): the frame's read, decompression and conversion and their
// allocations (-benchmem).
func BenchmarkStepHostFull(b *testing.B) {
	ctx := context.Background()
	x, y := 10, 20
	a := action.Action{Kind: action.MouseMove, X: &x, Y: &y}
	for _, s := range []observe.Screen{{Width: 640, Height: 480, Depth: 24}, {Width: 1920, Height: 1080, Depth: 24}} {
		b.Run(fmt.Sprintf("%dx%d", s.Width, s.Height), func(b *testing.B) {
			be := &guestenvtest.Backend{New: func() *guestenvtest.Guest { return &guestenvtest.Guest{Pixels: desktop} }}
			env, err := be.Create(ctx, environment.Config{Screen: s, FullFrames: true})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { env.Close(ctx) })
			if _, err := env.Launch(ctx, environment.LaunchSpec{App: &app.Bundle{Manifest: app.Manifest{Command: "app"}}, LogCap: 1 << 20}); err != nil {
				b.Fatal(err)
			}
			sp := env.(environment.Stepper)
			b.SetBytes(int64(4 * s.Width * s.Height))
			b.ReportAllocs()
			for b.Loop() {
				if _, got, err := sp.Step(ctx, a, nil); err != nil || got == nil || got.Frame == nil {
					b.Fatal(got, err)
				}
			}
		})
	}
}
