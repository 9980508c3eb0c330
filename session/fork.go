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
	// Looks 50 ms apart until two are the same (at most forkSettle).
	var f *observe.Frame
	var st environment.State
	deadline := time.Now().Add(forkSettle)
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
		if prev != nil && prev.Hash == f.Hash || time.Now().After(deadline) {
			break
		}
		if err := sleepCtx(lctx, 50*time.Millisecond); err != nil {
			return ForkPoint{}, err
		}
	}
	s.tw.Flush() // the recorded screenshots are on disk for the forks to compare with
	return ForkPoint{RunID: s.cfg.RunID, TraceDir: s.cfg.TraceDir, Steps: s.steps, Frame: f, State: st}, nil
}

// forkSettle bounds how long ForkPoint waits for the screen to rest.
const forkSettle = 2 * time.Second

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
