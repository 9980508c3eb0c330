package session

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/trace"
)

// lookBackend makes environments whose launch brings the first
// screenshot when asked (as the guest's does).
type lookBackend struct {
	fakeBackend
	env *lookEnv
}

func (b *lookBackend) Create(ctx context.Context, cfg environment.Config) (environment.Environment, error) {
	e, err := b.fakeBackend.Create(ctx, cfg)
	if err != nil {
		return nil, err
	}
	b.env = &lookEnv{fakeEnv: e.(*fakeEnv)}
	return b.env, nil
}

type lookEnv struct {
	*fakeEnv
	asked    bool // the launch was asked for the first screenshot
	launched int  // observations the environment had made when the launch returned
}

func (e *lookEnv) Launch(ctx context.Context, spec environment.LaunchSpec) (environment.LaunchResult, error) {
	r, err := e.fakeEnv.Launch(ctx, spec)
	e.asked = spec.Observe
	if err == nil && spec.Observe {
		f, st, _ := e.fakeEnv.Observe(ctx)
		r.Frame, r.State = f, &st
	}
	e.launched = e.observed
	return r, err
}

// TestLookAtLaunch: with Config.LookAtLaunch the first observation is
// the screenshot the launch brought, and the environment is not asked
// again; the next one is asked. Without it, or with a first settle,
// the launch brings none.
func TestLookAtLaunch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		look   bool
		settle Settle
		ready  string // the manifest's ready_output (the fake app prints "mover: ready" as it launches)
		want   bool
	}{
		{"asked", true, Settle{}, "", true},
		{"asked, ready output printed", true, Settle{}, "mover: ready", true},
		{"off", false, Settle{}, "", false},
		{"settle first", true, Settle{Mode: SettleFixed, Duration: time.Millisecond}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &lookBackend{}
			s, err := Open(t.Context(), Config{
				RunID: "look", Backend: b, TraceDir: filepath.Join(t.TempDir(), "trace"),
				App:          &app.Bundle{Target: "mover", Manifest: app.Manifest{Command: "mover", ReadyOutput: tc.ready}},
				LookAtLaunch: tc.look, FirstSettle: tc.settle,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(t.Context(), End{Outcome: trace.Interrupted, Reason: trace.ReasonClosed})
			if b.env.asked != tc.want {
				t.Fatalf("launch asked for the screenshot: %v, want %v", b.env.asked, tc.want)
			}
			obs, err := s.Observe(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if obs.Screen == nil || !obs.Running {
				t.Fatalf("first observation %+v", obs)
			}
			asked := b.env.observed - b.env.launched
			if want := map[bool]int{true: 0, false: 1}[tc.want]; asked != want {
				t.Errorf("the first observation asked the environment %d times, want %d", asked, want)
			}
			if _, err := s.Observe(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := b.env.observed - b.env.launched; got != asked+1 {
				t.Errorf("the second observation did not ask the environment (%d, then %d)", asked, got)
			}
		})
	}
}
