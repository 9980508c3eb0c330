package session

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// resettingBackend is the fake backend whose sandboxes reset in place:
// the app's exit is told before Reset returns, as the guest does.
type resettingBackend struct {
	fakeBackend
	resetErr error
	resets   int
}

type resettingEnv struct {
	*fakeEnv
	b *resettingBackend
}

func (b *resettingBackend) Create(ctx context.Context, cfg environment.Config) (environment.Environment, error) {
	e, err := b.fakeBackend.Create(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &resettingEnv{fakeEnv: e.(*fakeEnv), b: b}, nil
}

func (e *resettingEnv) Reset(context.Context) error {
	e.b.mu.Lock()
	e.b.resets++
	e.b.mu.Unlock()
	if e.b.resetErr != nil {
		return e.b.resetErr
	}
	e.cfg.Events.Exited(observe.Exit{Code: -1, Signal: "SIGKILL"})
	return nil
}

// TestRelaunch: a relaunch ends the episode (its trace finalised, the
// app's exit its own) and hands the same sandbox, reset, to the next
// session, which launches the app again with a new trace and receives
// the new app's events; the sandbox is removed once, at the end.
func TestRelaunch(t *testing.T) {
	b := &resettingBackend{}
	var mu sync.Mutex
	events := map[string][]string{}
	listen := func(name string) func(Event) {
		return func(e Event) {
			mu.Lock()
			events[name] = append(events[name], e.Kind)
			mu.Unlock()
		}
	}
	s1, dir1 := openFake(t, b, func(c *Config) { c.Listener = listen("one") })
	if _, err := s1.Act(t.Context(), Step{Action: action.Action{Kind: action.KeyDown, Key: "Right"}}); err != nil {
		t.Fatal(err)
	}
	r1, p, err := s1.Relaunch(t.Context(), End{Outcome: trace.Interrupted, Reason: trace.ReasonClosed, Message: "relaunched"})
	if err != nil || p == nil {
		t.Fatalf("relaunch: %v (prepared %v)", err, p)
	}
	if r1.Outcome != trace.Interrupted || r1.AppExit == nil || r1.AppExit.Stopped != observe.StoppedAtEnd {
		t.Fatalf("first episode's result %+v (exit %+v): want interrupted, the app stopped at its end", r1, r1.AppExit)
	}
	b.mu.Lock()
	closed, resets, created := b.closed, b.resets, len(b.envs)
	b.mu.Unlock()
	if closed != 0 || resets != 1 {
		t.Fatalf("after the relaunch: %d closes, %d resets; want 0 and 1", closed, resets)
	}
	if _, err := s1.Observe(t.Context()); !errors.Is(err, ErrEnded) {
		t.Fatalf("the relaunched session still observes: %v", err)
	}

	s2, dir2 := openFake(t, b, func(c *Config) { c.Prepared = p; c.Listener = listen("two") })
	b.mu.Lock()
	if len(b.envs) != created {
		t.Errorf("the second episode created a sandbox (%d, want %d)", len(b.envs), created)
	}
	b.mu.Unlock()
	if dir1 == dir2 {
		t.Fatal("one trace for two episodes")
	}
	obs, err := s2.Observe(t.Context())
	if err != nil || !obs.Running || len(obs.Output) == 0 || obs.Output[0].Text != "mover: ready" {
		t.Fatalf("the relaunched app's first observation: %+v, %v", obs, err)
	}
	s2.Close(t.Context(), End{Outcome: trace.Interrupted, Reason: trace.ReasonClosed})
	b.mu.Lock()
	closed = b.closed
	b.mu.Unlock()
	if closed != 1 {
		t.Errorf("%d closes after the second episode, want 1", closed)
	}
	tr := openTraceDir(t, dir2)
	if tr.Run.Outcome != trace.Interrupted {
		t.Errorf("second trace's outcome %q", tr.Run.Outcome)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range events["two"] {
		if k == EventExit {
			t.Errorf("the first app's exit reached the second session: %v", events["two"])
		}
	}
}

// TestRelaunchRefused: a relaunch while a step is in flight is refused
// and changes nothing; a backend without reset in place, or a failed
// reset, ends the episode and removes the sandbox with ErrNoRelaunch or
// the reset's error.
func TestRelaunchRefused(t *testing.T) {
	end := End{Outcome: trace.Interrupted, Reason: trace.ReasonClosed}
	t.Run("step in flight", func(t *testing.T) {
		b := &resettingBackend{}
		s, _ := openFake(t, b, nil)
		defer s.Close(context.WithoutCancel(t.Context()), end)
		started := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			close(started)
			_, err := s.Act(t.Context(), Step{Action: action.Action{Kind: action.Wait, MS: 1500}})
			done <- err
		}()
		<-started
		deadline := time.Now().Add(10 * time.Second)
		for busy, _ := s.Activity(); !busy && time.Now().Before(deadline); busy, _ = s.Activity() {
			time.Sleep(time.Millisecond)
		}
		if _, _, err := s.Relaunch(t.Context(), end); !errors.Is(err, ErrStepInFlight) {
			t.Fatalf("relaunch during a step: %v, want ErrStepInFlight", err)
		}
		if err := <-done; err != nil {
			t.Fatalf("the step a refused relaunch met: %v", err)
		}
		if _, err := s.Observe(t.Context()); err != nil {
			t.Fatalf("the session after a refused relaunch: %v", err)
		}
		if b.resets != 0 {
			t.Errorf("%d resets", b.resets)
		}
	})
	// A relaunch being decided (its flag set under cmu, the calls in
	// flight not read yet) must not fail a step that reads the flag then:
	// the step waits for the decision, and a refused relaunch changes
	// nothing. Before relaunchDecided the step failed with ErrRelaunching
	// (TestRelaunchRefused/step_in_flight, once, under the race detector).
	t.Run("step meets a relaunch being decided", func(t *testing.T) {
		b := &resettingBackend{}
		s, _ := openFake(t, b, nil)
		defer s.Close(context.WithoutCancel(t.Context()), end)
		s.cmu.Lock()
		s.relaunching.Store(true)
		done := make(chan error, 1)
		go func() {
			_, err := s.Act(t.Context(), Step{Action: action.Action{Kind: action.Wait, MS: 1}})
			done <- err
		}()
		select {
		case err := <-done:
			s.relaunching.Store(false)
			s.cmu.Unlock()
			t.Fatalf("the step did not wait for the relaunch's decision: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		s.relaunching.Store(false) // refused: a call was in flight
		s.cmu.Unlock()
		if err := <-done; err != nil {
			t.Fatalf("the step beside a refused relaunch: %v", err)
		}
		if b.resets != 0 {
			t.Errorf("%d resets", b.resets)
		}
	})
	t.Run("no reset in place", func(t *testing.T) {
		b := &fakeBackend{}
		s, _ := openFake(t, b, nil)
		r, p, err := s.Relaunch(t.Context(), end)
		if !errors.Is(err, ErrNoRelaunch) || p != nil || r.Outcome != trace.Interrupted {
			t.Fatalf("relaunch on a backend without reset: %v, %v, %+v", err, p, r)
		}
		if b.closed != 1 {
			t.Errorf("%d closes, want 1", b.closed)
		}
	})
	t.Run("reset fails", func(t *testing.T) {
		b := &resettingBackend{resetErr: errors.New("guest failure: reset: boom")}
		s, _ := openFake(t, b, nil)
		_, p, err := s.Relaunch(t.Context(), end)
		if err == nil || p != nil || b.closed != 1 {
			t.Fatalf("a failed reset: %v, %v, %d closes", err, p, b.closed)
		}
	})
}

func openTraceDir(t *testing.T, dir string) *trace.Trace {
	t.Helper()
	tr, err := trace.Open(filepath.Clean(dir))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}
