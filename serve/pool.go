package serve

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/pool"
	"github.com/codegirl-games/agentbox/serve/api"
	"github.com/codegirl-games/agentbox/session"
)

// startPool makes the warm pool (Options.Pool) and warms the default key
// of every registered app: the default backend, image, screen and limits,
// with what the app's manifest adds (its accessibility bus).
func (s *Server) startPool() error {
	runID := "serve-pool-" + randomID(3)
	p, err := pool.New(pool.Options{
		Size: s.o.Pool, Max: s.o.PoolMax, RunID: runID, Launch: s.o.PoolLaunch, RefillDelay: s.o.PoolRefillDelay,
		// A pooled sandbox's removal runs in the background and may
		// wait out its backend's outage (a Kubernetes API server
		// restarting breaks every Pod's stream at once, and the Pods can
		// be deleted only once it is back): a removal given up is a
		// sandbox left behind.
		CloseTimeout: poolCloseTimeout,
		Log:          func(format string, args ...any) { s.logf(format, args...) },
	})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	names := make([]string, 0, len(s.o.Apps))
	for name := range s.o.Apps {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		// The launch an episode makes (its log cap, its ready timeout),
		// so that the pool's own launch ahead is the same.
		err := p.Warm(session.Config{Backend: s.o.Backends[0], Env: s.o.Env, App: s.o.Apps[name], LogCap: s.o.LogCap, ReadyTimeout: s.o.ReadyTimeout})
		if err != nil {
			s.logf("pool: not warming %s: %v", name, err)
		}
	}
	s.pool = p
	st := p.Stats()
	launch := ""
	if s.o.PoolLaunch {
		launch = ", each app launched ahead"
	}
	s.logf("warm pool: %d sandboxes per key, at most %d over all keys%s; their run IDs are %s-N", st.Size, st.Max, launch, runID)
	return nil
}

// poolCloseTimeout bounds the removal of one pooled sandbox.
const poolCloseTimeout = 3 * time.Minute

// closePool stops the pool's refill and starts removing its idle
// sandboxes at once (a shutdown); the function it returns waits for
// that.
func (s *Server) closePool() (wait func(context.Context) error) {
	if s.pool == nil {
		return func(context.Context) error { return nil }
	}
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- s.pool.Close(ctx) }()
	return func(wctx context.Context) error {
		defer cancel()
		select {
		case err := <-done:
			return err
		case <-wctx.Done():
			cancel()
			return <-done
		}
	}
}

// PoolStats are the warm pool's counts (zero without a pool).
func (s *Server) PoolStats() pool.Stats {
	if s.pool == nil {
		return pool.Stats{}
	}
	return s.pool.Stats()
}

// poolInfo is the pool as GET /v1/server shows it; nil without one.
func (s *Server) poolInfo() *api.Pool {
	if s.pool == nil {
		return nil
	}
	st := s.pool.Stats()
	return &api.Pool{Size: st.Size, Max: st.Max, Keys: len(st.Keys), Idle: st.Idle, Creating: st.Creating,
		Warm: st.Warm, Cold: st.Cold, Launched: st.Launched, Replaced: st.Replaced, Failed: st.Failed, HitRate: st.HitRate,
		RefillP50MS: msOf(st.RefillP50), RefillP95MS: msOf(st.RefillP95), CreateP50MS: msOf(st.CreateP50),
		Released: st.Released, Deferred: st.Deferred}
}

// msOf is d in milliseconds.
func msOf(d time.Duration) float64 {
	return float64(d) / float64(time.Millisecond)
}

// WaitPool waits until the warm pool is full (every key at its size, or
// the pool at its most), or ctx ends. For benchmarks and tests.
func (s *Server) WaitPool(ctx context.Context) error {
	if s.pool == nil {
		return nil
	}
	return s.pool.Wait(ctx)
}

// PoolIdle describes the idle pooled sandboxes (nil without a pool).
func (s *Server) PoolIdle() []environment.Info {
	if s.pool == nil {
		return nil
	}
	return s.pool.Idle()
}
