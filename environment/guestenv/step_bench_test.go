package guestenv_test

import (
	"context"
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
