package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/trace"
)

// Errors of Relaunch.
var (
	// ErrStepInFlight: a controller's call (Observe, Act) is in flight;
	// a relaunch waits for no step and aborts none.
	ErrStepInFlight = errors.New("a step is in flight")
	// ErrRelaunching: the session is being relaunched; it takes no more
	// steps.
	ErrRelaunching = errors.New("the episode is being relaunched")
	// ErrNoRelaunch: the sandbox cannot be reset in place (its backend
	// lacks environment.Resetter, or it has ended).
	ErrNoRelaunch = errors.New("the sandbox cannot be reset in place")
)

// relaunchDecided says whether the session is being relaunched. Relaunch
// sets the flag under cmu before it reads the calls in flight and, when a
// call is in flight, clears it again under cmu: a call in flight that
// reads the flag in between must not take a refused relaunch for a
// decided one (its step failed with ErrRelaunching while the relaunch
// was refused, under the race detector in CI). So a flag seen set is read
// again under cmu, once the decision is made.
func (s *Session) relaunchDecided() bool {
	if !s.relaunching.Load() {
		return false
	}
	s.cmu.Lock()
	defer s.cmu.Unlock()
	return s.relaunching.Load()
}

// Relaunch ends the episode as Close does (end, unless it has ended
// already; the task's files collected, the grade, the trace finalised)
// but keeps the sandbox: it is reset in place (environment.Resetter: the
// app and everything it started killed, the display's state and the
// writable directories back to their state before the first launch, the
// window manager kept) and returned as a Prepared for the next episode's
// Open, which stages and launches the app again. When the sandbox cannot
// be reset (ErrNoRelaunch, a failed reset) it is torn down, the Result
// still stands, and the error says why: start the next episode in a
// fresh sandbox. A call in flight refuses the relaunch with
// ErrStepInFlight and nothing happens; a session closed already answers
// with its Result and ErrNoRelaunch.
func (s *Session) Relaunch(ctx context.Context, end End) (Result, *Prepared, error) {
	s.cmu.Lock()
	if s.closing != nil {
		s.cmu.Unlock()
		<-s.closed
		return s.result, nil, fmt.Errorf("%w: the session was closed already", ErrNoRelaunch)
	}
	// Set before the count is read: a call that counts itself after
	// this meets relaunching under the step lock and is refused.
	s.relaunching.Store(true)
	if s.inFlight.Load() > 0 {
		s.relaunching.Store(false)
		s.cmu.Unlock()
		return Result{}, nil, ErrStepInFlight
	}
	s.cmu.Unlock()
	r := s.Close(ctx, end)
	return r, s.kept, s.keptErr
}

// RelaunchBehind is Relaunch that returns as soon as the sandbox is
// reset in place (or could not be: the error says why, as Relaunch's),
// without waiting for the rest of the close: the agent's end, the grade
// and the trace's finish go on behind, and Close (or Done) waits for
// them — call Close before the trace is read or the process ends. So the
// next episode starts while this one's trace is finalised.
func (s *Session) RelaunchBehind(ctx context.Context, end End) (*Prepared, error) {
	s.cmu.Lock()
	if s.closing != nil {
		s.cmu.Unlock()
		<-s.closed
		return nil, fmt.Errorf("%w: the session was closed already", ErrNoRelaunch)
	}
	s.relaunching.Store(true)
	if s.inFlight.Load() > 0 {
		s.relaunching.Store(false)
		s.cmu.Unlock()
		return nil, ErrStepInFlight
	}
	ready := make(chan struct{})
	s.keptReady = ready
	s.cmu.Unlock()
	go s.Close(ctx, end)
	<-ready
	return s.kept, s.keptErr
}

// resetInPlace resets the session's sandbox for the next episode instead
// of tearing it down (Relaunch); on failure it tears it down.
func (s *Session) resetInPlace(ctx context.Context) {
	s.emu.Lock()
	env := s.env
	s.env = nil
	s.emu.Unlock()
	if env == nil {
		s.keptErr = fmt.Errorf("%w: no sandbox", ErrNoRelaunch)
		return
	}
	s.events.teardown() // the app's exit from here on is agentbox's doing
	rs, ok := env.(environment.Resetter)
	var err error
	switch {
	case !ok:
		err = fmt.Errorf("%w: the %s backend has no reset in place", ErrNoRelaunch, env.Info().Backend)
	case s.relay == nil:
		err = fmt.Errorf("%w: the sandbox's events do not pass through a relay", ErrNoRelaunch)
	}
	if l, ok := env.(environment.Liveness); ok && err == nil {
		select {
		case <-l.Done():
			err = fmt.Errorf("%w: the sandbox has ended", ErrNoRelaunch)
		default:
		}
	}
	if err == nil {
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.TeardownTimeout)
		t := time.Now()
		err = rs.Reset(tctx)
		cancel()
		s.timing("reset_in_place", time.Since(t))
	}
	if err != nil {
		s.keptErr = err
		fmt.Fprintf(s.cfg.Progress, "agentbox: relaunch: %s; the sandbox is removed\n", termsafe.Text(err.Error()))
		s.tw.Record(trace.Record{Type: trace.TypeEvent, Event: "relaunch_error", Data: map[string]any{"error": err.Error()}})
		s.emu.Lock()
		s.env = env
		s.emu.Unlock()
		s.teardown(ctx)
		return
	}
	s.relay.attach(nil) // what the sandbox says until the next session takes it is dropped
	// A pool's sandbox stays the pool's to end.
	s.kept = &Prepared{Env: env, Events: s.relay, Release: s.release()}
}
