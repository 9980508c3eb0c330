package session

import (
	"context"
	"errors"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
)

// ForkPoint is where a running episode stands, for a fork to be made of
// it: the steps it has recorded and the screen as it is now.
type ForkPoint struct {
	RunID, TraceDir string
	// Steps is the number of steps recorded: a fork replays steps 1 to
	// Steps.
	Steps int
	// Frame is the screen now, State the desktop's (pointer, windows):
	// a fork's screen after its replay must match them.
	Frame *observe.Frame
	State environment.State
}

// ForkPoint takes the episode's fork point. It holds the step lock, so
// it waits for a step in flight and no step runs while it looks; nothing
// is recorded and the app's output is left for the next observation. An
// episode that has ended answers with *EndedError; one being relaunched
// with ErrRelaunching.
func (s *Session) ForkPoint(ctx context.Context) (ForkPoint, error) {
	defer s.busy()()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.end != nil {
		return ForkPoint{}, &EndedError{*s.end}
	}
	if s.relaunchDecided() {
		return ForkPoint{}, ErrRelaunching
	}
	env := s.environment()
	if env == nil {
		return ForkPoint{}, environment.ErrClosed
	}
	lctx, cancel := context.WithDeadline(ctx, s.deadlineNow())
	defer cancel()
	// The screen as it rests: a step that just ran may still be drawn.
	// Looks 50 ms apart until the screen has not changed for ForkStill
	// (at most ForkSettle).
	var f *observe.Frame
	var st environment.State
	deadline := time.Now().Add(ForkSettle)
	var since time.Time // when the screen last changed
	for {
		prev := f
		var err error
		f, st, err = env.Observe(lctx)
		if err == nil && f == nil {
			err = errors.New("the sandbox gave no screenshot")
		}
		if err != nil {
			return ForkPoint{}, err
		}
		now := time.Now()
		if prev == nil || prev.Hash != f.Hash {
			since = now
		}
		if now.Sub(since) >= ForkStill || now.After(deadline) {
			break
		}
		if err := sleepCtx(lctx, 50*time.Millisecond); err != nil {
			return ForkPoint{}, err
		}
	}
	s.tw.Flush() // the recorded screenshots are on disk for the forks to compare with
	return ForkPoint{RunID: s.cfg.RunID, TraceDir: s.cfg.TraceDir, Steps: s.steps, Frame: f, State: st}, nil
}

// How a fork's screens are taken as they rest (ForkPoint's of the parent,
// and the fork's after its replay): the screen unchanged for ForkStill,
// waited for at most ForkSettle. A screen that held still for one look
// 50 ms later was taken for one at rest, and on a loaded machine the
// clock demo had not drawn the virtual clock's last move by then
// (TestForkClock diverged once in a CI by the digits of its time).
const (
	ForkStill  = 500 * time.Millisecond
	ForkSettle = 3 * time.Second
)

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
