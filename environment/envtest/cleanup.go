package envtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
)

// testDeadlines: a request whose context ends returns at once with the
// context's error, the guest abandons it, and the environment goes on.
func (s *suite) testDeadlines(t *testing.T) {
	b := s.newBox(t)
	if _, err := b.staged(s.moverDir(t, ""), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.env.Act(ctx, action.Action{Kind: action.Wait, MS: 10000})
	if d := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || d > 3*time.Second {
		t.Errorf("a 10 s wait under a 300 ms deadline: %v after %v, want context.DeadlineExceeded at once", err, d)
	}
	// The guest dropped the wait: the next action is answered promptly.
	start = time.Now()
	b.do(action.Action{Kind: action.Wait, MS: 50})
	b.observe()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the next action took %v: the guest kept waiting", d)
	}
	// An ended context returns at once (with its error, or with the
	// answer if it raced the cancellation), and the environment goes on.
	done, cancel2 := context.WithCancel(b.ctx)
	cancel2()
	start = time.Now()
	if _, _, err := b.env.Observe(done); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Observe with a cancelled context: %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Observe with a cancelled context took %v", d)
	}
	b.observe()
}

// testCleanup: Close aborts a launch in flight and leaves nothing; a Create
// cut short by its deadline at any point leaves nothing either.
func (s *suite) testCleanup(t *testing.T) {
	t.Run("CloseDuringLaunch", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cfg := s.config(t)
		env, err := s.o.Backend.Create(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		b := &box{t: t, env: env, sink: cfg.Events.(*sink), ctx: ctx, cfg: cfg}
		dir := s.moverDir(t, `"-no-window"`)
		errc := make(chan error, 1)
		go func() {
			_, err := b.staged(dir, time.Minute)
			errc <- err
		}()
		time.Sleep(500 * time.Millisecond)
		start := time.Now()
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		info := env.Info()
		if err := env.Close(cctx); err != nil {
			// What matters is that the launch ends and nothing is left.
			t.Logf("Close during Launch said: %v", err)
		}
		select {
		case err := <-errc:
			if err == nil {
				t.Error("Launch succeeded although Close aborted it")
			}
		case <-time.After(15 * time.Second):
			t.Fatal("Launch did not return within 15 s of Close")
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("Close during Launch took %v", d)
		}
		if s.o.Gone != nil {
			if gone, err := s.o.Gone(cctx, info); err != nil || !gone {
				t.Errorf("the sandbox %s still exists after Close (%v)", info.ID, err)
			}
		}
	})
	t.Run("CreateDeadline", func(t *testing.T) {
		if s.o.Leftovers == nil {
			t.Skip("Options.Leftovers is not set")
		}
		for _, d := range []time.Duration{time.Millisecond, 10 * time.Millisecond, 40 * time.Millisecond, 120 * time.Millisecond, 300 * time.Millisecond} {
			cfg := s.config(t)
			ctx, cancel := context.WithTimeout(context.Background(), d)
			env, err := s.o.Backend.Create(ctx, cfg)
			cancel()
			if err == nil {
				t.Logf("Create finished within %v", d)
				cctx, c := context.WithTimeout(context.Background(), 30*time.Second)
				if err := env.Close(cctx); err != nil {
					t.Errorf("Close: %v", err)
				}
				c()
			} else {
				t.Logf("Create under a %v deadline: %v", d, err)
			}
			var left []string
			deadline := time.Now().Add(10 * time.Second)
			for {
				left, err = s.o.Leftovers(context.Background(), cfg.RunID)
				if err != nil {
					t.Fatal(err)
				}
				if len(left) == 0 || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if len(left) > 0 {
				t.Errorf("Create under a %v deadline left %q behind", d, left)
			}
		}
	})
}
