package pool

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/session"
)

// launchingEnv is a fakeEnv that records the launches made in it and
// says so through its events: the app prints a line when launched.
type launchingEnv struct {
	*fakeEnv
	launches atomic.Int32
	spec     atomic.Pointer[environment.LaunchSpec]
}

func (e *launchingEnv) Launch(_ context.Context, spec environment.LaunchSpec) (environment.LaunchResult, error) {
	e.launches.Add(1)
	e.spec.Store(&spec)
	e.cfg.Events.Output(observe.Stdout, []byte("app: ready\n"), 0)
	return environment.LaunchResult{PID: 42, Ready: time.Millisecond}, nil
}

// crash is the app ending on its own, as the sandbox's events tell it.
func (e *launchingEnv) crash() { e.cfg.Events.Exited(observe.Exit{Code: 2}) }

// launchingBackend makes launchingEnvs; envs maps their IDs to them
// (under the fake backend's lock).
type launchingBackend struct {
	*fakeBackend
	envs map[string]*launchingEnv
}

func newLaunching() launchingBackend {
	return launchingBackend{newFake(), map[string]*launchingEnv{}}
}

func (b launchingBackend) Create(ctx context.Context, cfg environment.Config) (environment.Environment, error) {
	env, err := b.fakeBackend.Create(ctx, cfg)
	if err != nil {
		return nil, err
	}
	le := &launchingEnv{fakeEnv: env.(*fakeEnv)}
	b.mu.Lock()
	b.envs[le.id] = le
	b.mu.Unlock()
	return le, nil
}

func launchingEnvOf(b launchingBackend, id string) *launchingEnv {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.envs[id]
}

// launchCfg is an episode of the mover on b, as the pool's Warm and an
// episode's claim name it.
func launchCfg(b environment.Backend, mover *app.Bundle) session.Config {
	cfg := cfgOf(b, 640, 480)
	cfg.App = mover
	return cfg
}

func idleLaunched(p *Pool) (n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ks := range p.keys {
		for _, m := range ks.idle {
			if m.launched != nil {
				n++
			}
		}
	}
	return n
}

// TestLaunchedAhead: with Launch, a key one app asks for has that app
// launched in its sandboxes as they are made, once each, with the
// episode's launch (its app, its log cap); a claim of the same launch (a
// per-episode copy of the bundle, as eval makes) is handed the sandbox
// with the launch's result, and the app's output while it waited is held
// for the episode. Without Launch nothing is launched ahead.
func TestLaunchedAhead(t *testing.T) {
	b := newLaunching()
	p := newPool(t, Options{Size: 2, Launch: true})
	mover := bundleOf("/apps/mover")
	if err := p.Warm(launchCfg(b, mover)); err != nil {
		t.Fatal(err)
	}
	waitFull(t, p)
	same := *mover
	cfg := launchCfg(b, &same)
	if !p.Take(&cfg) {
		t.Fatalf("no warm sandbox: %+v", p.Stats())
	}
	pr := cfg.Prepared
	if pr.Launched == nil {
		t.Fatalf("the sandbox was handed out without its app launched ahead (%q)", cfg.NotLaunchedAhead)
	}
	le := launchingEnvOf(b, pr.Env.Info().ID)
	if n := le.launches.Load(); n != 1 {
		t.Fatalf("the app was launched %d times in the sandbox, want once", n)
	}
	if sp := le.spec.Load(); sp.App != mover || sp.LogCap <= 0 || sp.Observe {
		t.Errorf("launched with %+v, want the mover with the default log cap and no look at launch", *sp)
	}
	if pr.Launched.Result.PID != 42 || pr.Launched.Started.IsZero() {
		t.Errorf("Launched %+v: want the launch's result and start", pr.Launched)
	}
	if cfg.NotLaunchedAhead != "" {
		t.Errorf("NotLaunchedAhead %q for a sandbox launched ahead", cfg.NotLaunchedAhead)
	}
	if st := p.Stats(); st.Launched != 1 {
		t.Errorf("Stats.Launched %d, want 1", st.Launched)
	}
	pr.Env.Close(context.Background())

	plain := newLaunching()
	q := newPool(t, Options{Size: 1})
	if err := q.Warm(launchCfg(plain, mover)); err != nil {
		t.Fatal(err)
	}
	waitFull(t, q)
	c2 := launchCfg(plain, mover)
	if !q.Take(&c2) || c2.Prepared.Launched != nil || launchingEnvOf(plain, c2.Prepared.Env.Info().ID).launches.Load() != 0 {
		t.Errorf("a pool without Launch launched the app ahead")
	}
	c2.Prepared.Env.Close(context.Background())
}

// TestLaunchedAheadAppEnded: an app launched ahead that ends while its
// sandbox is idle has the sandbox replaced, never handed out.
func TestLaunchedAheadAppEnded(t *testing.T) {
	b := newLaunching()
	p := newPool(t, Options{Size: 1, Launch: true})
	mover := bundleOf("/apps/mover")
	if err := p.Warm(launchCfg(b, mover)); err != nil {
		t.Fatal(err)
	}
	waitFull(t, p)
	ids := p.Idle()
	if len(ids) != 1 {
		t.Fatalf("%d idle, want 1", len(ids))
	}
	crashed := ids[0].ID
	le := launchingEnvOf(b, crashed)
	le.crash()
	waitFor(t, "the sandbox whose app ended to be replaced", func() bool { return p.Stats().Replaced >= 1 })
	waitFor(t, "its sandbox removed", func() bool { return le.closed.Load() })
	waitFull(t, p)
	cfg := launchCfg(b, mover)
	if !p.TakeWait(t.Context(), &cfg) {
		t.Fatalf("no warm sandbox after the replacement: %+v", p.Stats())
	}
	if id := cfg.Prepared.Env.Info().ID; id == crashed {
		t.Fatalf("the sandbox whose app ended while idle was handed out")
	}
	if cfg.Prepared.Launched == nil {
		t.Errorf("the replacement was not launched ahead")
	}
	cfg.Prepared.Env.Close(context.Background())

	// An exit that comes before the member is seen idle (during the
	// launch's answer) is caught at the take too.
	waitFull(t, p)
	p.mu.Lock()
	var m *member
	for _, ks := range p.keys {
		m = ks.idle[0]
	}
	p.mu.Unlock()
	m.relay.Exited(observe.Exit{Code: 1})
	c2 := launchCfg(b, mover)
	if p.Take(&c2) && c2.Prepared.Env == m.env {
		t.Fatalf("a sandbox whose app had ended was handed out")
	}
	if c2.Prepared != nil {
		c2.Prepared.Env.Close(context.Background())
	}
}

// TestLaunchedAheadOtherLaunch: a claim whose episode would launch
// otherwise — a virtual clock, other task inputs, another log cap, other
// arguments — is never handed a sandbox with the app launched ahead: it
// takes a plain one or goes cold, says why (NotLaunchedAhead), and the
// key launches nothing ahead from then on.
func TestLaunchedAheadOtherLaunch(t *testing.T) {
	mover := bundleOf("/apps/mover")
	cases := map[string]func(c *session.Config){
		"virtual clock": func(c *session.Config) { c.Clock = session.Clock{Virtual: true} },
		"task inputs":   func(c *session.Config) { c.Inputs = &app.Inputs{} },
		"log cap":       func(c *session.Config) { c.LogCap = 12345 },
		"arguments": func(c *session.Config) {
			other := *mover
			other.Manifest.Args = []string{"--hard"}
			c.App = &other
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			b := newLaunching()
			p := newPool(t, Options{Size: 2, Launch: true})
			if err := p.Warm(launchCfg(b, mover)); err != nil {
				t.Fatal(err)
			}
			waitFull(t, p)
			if n := idleLaunched(p); n != 2 {
				t.Fatalf("%d idle sandboxes with the app launched, want 2", n)
			}
			cfg := launchCfg(b, mover)
			change(&cfg)
			if p.TakeWait(t.Context(), &cfg) {
				if cfg.Prepared.Launched != nil {
					t.Fatalf("handed a sandbox with the app launched for another launch")
				}
				if n := launchingEnvOf(b, cfg.Prepared.Env.Info().ID).launches.Load(); n != 0 {
					t.Fatalf("the sandbox handed out had its app launched %d times", n)
				}
				cfg.Prepared.Env.Close(context.Background())
			}
			if !strings.Contains(cfg.NotLaunchedAhead, "differs") {
				t.Errorf("NotLaunchedAhead %q, want why the launch differs", cfg.NotLaunchedAhead)
			}
			// The key now makes plain sandboxes; the ones launched ahead
			// still serve the launch they were made for.
			same := launchCfg(b, mover)
			if !p.Take(&same) || same.Prepared.Launched == nil {
				t.Fatalf("the first launch's claim was not handed an app launched ahead: %+v", same.Prepared)
			}
			same.Prepared.Env.Close(context.Background())
			waitFor(t, "a plain sandbox for the key", func() bool {
				p.mu.Lock()
				defer p.mu.Unlock()
				for _, ks := range p.keys {
					for _, m := range ks.idle {
						if m.launched == nil {
							return true
						}
					}
				}
				return false
			})
			again := launchCfg(b, mover)
			change(&again)
			if !p.TakeWait(t.Context(), &again) || again.Prepared.Launched != nil {
				t.Fatalf("the other launch's claim was not handed a plain sandbox: %+v %+v", again.Prepared, p.Stats())
			}
			again.Prepared.Env.Close(context.Background())
		})
	}
}
