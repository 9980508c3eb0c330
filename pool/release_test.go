package pool

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/session"
)

// holdingEnv is a fakeEnv whose app can be stopped (environment.AppHolder).
type holdingEnv struct {
	*fakeEnv
	held    bool
	holdErr error
}

func (e *holdingEnv) HoldApp(_ context.Context, hold bool) (environment.AppHold, error) {
	if e.holdErr != nil {
		return environment.AppHold{}, e.holdErr
	}
	e.held = hold
	return environment.AppHold{Processes: 1}, nil
}

// holdingBackend creates holdingEnvs.
type holdingBackend struct {
	*fakeBackend
	holdErr error
}

func (b *holdingBackend) Create(ctx context.Context, cfg environment.Config) (environment.Environment, error) {
	env, err := b.fakeBackend.Create(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &holdingEnv{fakeEnv: env.(*fakeEnv), holdErr: b.holdErr}, nil
}

// TestRelease: a sandbox whose episode ends inside a loop of takes from
// idle sandboxes has its app stopped and waits, until the loop pauses, to
// be removed; outside a loop, with the key drained, without a way to stop
// the app, or with Max of them waiting already, it is removed at once.
func TestRelease(t *testing.T) {
	for _, c := range []struct {
		name     string
		takes    int   // back to back; the last one's sandbox is released
		noHold   bool  // the environment cannot stop its app
		holdErr  error // stopping the app fails
		max      int
		released int // released and waiting already (of the earlier takes)
		want     bool
	}{
		{name: "one take", takes: 1, want: false},
		{name: "a loop", takes: 2, want: true},
		{name: "the key drained", takes: 4, want: false},
		{name: "no way to stop the app", takes: 2, noHold: true, want: false},
		{name: "stopping the app fails", takes: 2, holdErr: errors.New("no guest"), want: false},
		{name: "max waiting: the oldest goes", takes: 3, max: 4, released: 4, want: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			fb := newFake()
			var b environment.Backend = &holdingBackend{fakeBackend: fb, holdErr: c.holdErr}
			if c.noHold {
				b = fb
			}
			// No refill while the test runs: the loop never pauses.
			p := newPool(t, Options{Size: 4, Max: max(c.max, 4), Parallel: 4, RefillDelay: time.Hour})
			if err := p.Warm(cfgOf(b, 640, 480)); err != nil {
				t.Fatal(err)
			}
			waitFull(t, p)
			// No create ends from here on: the key's idle sandboxes are
			// what the takes leave (a refill landing between them made
			// "drained" a race).
			fb.mu.Lock()
			fb.block = make(chan struct{})
			fb.mu.Unlock()
			var waiting []string
			p.mu.Lock()
			for i := range c.released {
				e := &fakeEnv{b: fb, id: fmt.Sprintf("waiting-%d", i), done: make(chan struct{})}
				fb.mu.Lock()
				fb.live[e.id] = e
				fb.mu.Unlock()
				p.released = append(p.released, releasedEnv{&holdingEnv{fakeEnv: e}, time.Now()})
				waiting = append(waiting, e.id)
			}
			p.mu.Unlock()
			taken := takeN(t, p, b, c.takes)
			last, rel := taken[len(taken)-1].Env, taken[len(taken)-1].Release
			if rel == nil {
				t.Fatal("a pooled sandbox came without its Release")
			}
			deferred, err := rel(t.Context(), last)
			if err != nil {
				t.Fatal(err)
			}
			fe, _ := last.(*holdingEnv)
			closed := fb.env(last.Info().ID) == nil
			if deferred != c.want || closed == c.want {
				t.Errorf("deferred %v, removed %v; want deferred %v", deferred, closed, c.want)
			}
			if c.want && (fe == nil || !fe.held) {
				t.Error("deferred with its app running")
			}
			if st := p.Stats(); st.Released != min(c.released+btoi(c.want), p.o.Max) || st.Deferred != int64(btoi(c.want)) {
				t.Errorf("stats: released %d deferred %d", st.Released, st.Deferred)
			}
			if c.released >= p.o.Max {
				waitFor(t, "the oldest waiting removed", func() bool { return fb.env(waiting[0]) == nil })
				if fb.env(waiting[1]) == nil {
					t.Error("more than the oldest removed")
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := p.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if fb.env(last.Info().ID) != nil {
				t.Error("Close left a released sandbox")
			}
			if st := p.Stats(); st.Released != 0 {
				t.Errorf("after Close %d still waiting", st.Released)
			}
		})
	}
}

// takeN takes n sandboxes of b's 640×480 key back to back.
func takeN(t *testing.T, p *Pool, b environment.Backend, n int) []*session.Prepared {
	t.Helper()
	var out []*session.Prepared
	for range n {
		cfg := cfgOf(b, 640, 480)
		if !p.Take(&cfg) {
			t.Fatalf("no warm sandbox: %+v", p.Stats())
		}
		out = append(out, cfg.Prepared)
	}
	return out
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestReleasedRemovedAtPause: the released sandboxes are removed once no
// take came for RefillDelay, and a release after Close removes at once.
func TestReleasedRemovedAtPause(t *testing.T) {
	fb := newFake()
	b := &holdingBackend{fakeBackend: fb}
	p := newPool(t, Options{Size: 4, Parallel: 2, RefillDelay: 200 * time.Millisecond})
	if err := p.Warm(cfgOf(b, 640, 480)); err != nil {
		t.Fatal(err)
	}
	waitFull(t, p)
	var ids []string
	for range 3 {
		pr := takeN(t, p, b, 1)[0]
		ids = append(ids, pr.Env.Info().ID)
		if _, err := pr.Release(t.Context(), pr.Env); err != nil {
			t.Fatal(err)
		}
	}
	if st := p.Stats(); st.Deferred == 0 {
		t.Fatalf("no removal deferred in a loop of three takes: %+v", st)
	}
	waitFor(t, "the released sandboxes removed after the pause", func() bool {
		for _, id := range ids {
			if fb.env(id) != nil {
				return false
			}
		}
		return p.Stats().Released == 0
	})
	pr := takeN(t, p, b, 1)[0]
	if err := p.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if deferred, err := pr.Release(t.Context(), pr.Env); deferred || err != nil || fb.env(pr.Env.Info().ID) != nil {
		t.Errorf("release after Close: deferred %v, err %v, still live %v", deferred, err, fb.env(pr.Env.Info().ID) != nil)
	}
}

// TestReleasedWaitBounded: in a loop that does not pause, a released
// sandbox is removed once it has waited ReleasedWait.
func TestReleasedWaitBounded(t *testing.T) {
	fb := newFake()
	b := &holdingBackend{fakeBackend: fb}
	p := newPool(t, Options{Size: 4, Parallel: 2, RefillDelay: time.Hour, ReleasedWait: 50 * time.Millisecond})
	if err := p.Warm(cfgOf(b, 640, 480)); err != nil {
		t.Fatal(err)
	}
	waitFull(t, p)
	last := takeN(t, p, b, 2)[1]
	if deferred, err := last.Release(t.Context(), last.Env); !deferred || err != nil {
		t.Fatalf("release in a loop: deferred %v, %v", deferred, err)
	}
	waitFor(t, "the released sandbox removed after ReleasedWait", func() bool { return fb.env(last.Env.Info().ID) == nil })
}
