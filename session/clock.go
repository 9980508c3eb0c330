package session

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/faketime"
	"github.com/codegirl-games/agentbox/trace"
)

// Clock modes (run's and eval's --clock, serve's and suites' clock).
const (
	ClockWall    = "wall"    // the app reads the real clock (the default)
	ClockVirtual = "virtual" // the app's time moves only with the steps
)

// DefaultClockStart is where a virtual clock starts unless told: a fixed
// instant, so that two runs (a recording and its replay) start at the
// same time. DefaultClockStep is how far it moves at each step that is
// not a wait.
var DefaultClockStart = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

const DefaultClockStep = 100 * time.Millisecond

// Clock is the app's clock. The zero Clock is the wall clock.
//
// On a virtual clock (backends with Capabilities.VirtualClock) the app's
// time starts at Start and stands still — while the agent decides, while
// the screen settles, while a step is recorded — except that each
// performed action moves it: a plain wait of N ms by N ms (at its start:
// the app has the wait's real time to catch up), any other action by Step
// once it has run. A done, an invalid action and a person's look move
// nothing.
type Clock struct {
	Virtual bool
	Start   time.Time     // default DefaultClockStart
	Step    time.Duration // default DefaultClockStep
	// Advances, when set (a replay), are the amounts to move the clock
	// at given steps instead of the rule above: the recorded ones.
	Advances map[int]time.Duration
}

// ParseClock reads "wall" or "virtual" ("" is wall).
func ParseClock(mode string, start time.Time, step time.Duration) (Clock, error) {
	switch mode {
	case "", ClockWall:
		return Clock{}, nil
	case ClockVirtual:
	default:
		return Clock{}, fmt.Errorf("clock %q: want %s or %s", mode, ClockWall, ClockVirtual)
	}
	if step < 0 {
		return Clock{}, fmt.Errorf("the clock's step must not be negative, got %v", step)
	}
	return Clock{Virtual: true, Start: start, Step: step}, nil
}

// MaxClockStep is the largest step a virtual clock takes per action.
const MaxClockStep = time.Hour

// ClockOf reads a clock as run, eval, serve and suites name it: a mode
// ("", wall or virtual) and a step per action (0: DefaultClockStep),
// which only a virtual clock takes.
func ClockOf(mode string, step time.Duration) (Clock, error) {
	c, err := ParseClock(mode, time.Time{}, step)
	if err != nil {
		return c, err
	}
	switch {
	case step != 0 && !c.Virtual:
		return Clock{}, fmt.Errorf("a clock step applies to the virtual clock only (clock %q)", mode)
	case step < 0 || step > MaxClockStep:
		return Clock{}, fmt.Errorf("clock step %v: want a duration above 0 and at most %v", step, MaxClockStep)
	}
	return c, nil
}

// ErrNoClock says a virtual clock was asked of what cannot have one: a
// backend without the capability, or an app libfaketime cannot be
// preloaded into.
var ErrNoClock = errors.New("no virtual clock")

// CheckClock refuses, before anything starts, a virtual clock the backend
// cannot give or the app cannot read: a backend without
// Capabilities.VirtualClock, or a staged program that libfaketime cannot
// be preloaded into (a static executable, a Go program). A program of
// the image (bundle.InImage) is checked in the sandbox, at launch. The
// error wraps ErrNoClock and names why.
func CheckClock(c Clock, b environment.Backend, bundle *app.Bundle) error {
	if !c.Virtual {
		return nil
	}
	if !environment.CapabilitiesOf(b).VirtualClock {
		why := ""
		if b.Name() == "local" {
			why = " (it needs libfaketime on this host: apt-get install libfaketime, or scripts/deps.sh test)"
		}
		return fmt.Errorf("%w: the %s backend has no virtual clock%s", ErrNoClock, b.Name(), why)
	}
	if bundle == nil || bundle.InImage || bundle.Dir == "" {
		return nil
	}
	cmd := filepath.Join(bundle.Dir, filepath.FromSlash(bundle.Manifest.Command))
	if err := faketime.Check(cmd); err != nil {
		if errors.Is(err, faketime.ErrNotFakeable) {
			return fmt.Errorf("%w: the app %w", ErrNoClock, err)
		}
		return fmt.Errorf("%w: cannot read the app's program: %w", ErrNoClock, err)
	}
	return nil
}

// withDefaults fills a virtual clock's zero fields.
func (c Clock) withDefaults() Clock {
	if !c.Virtual {
		return Clock{}
	}
	if c.Start.IsZero() {
		c.Start = DefaultClockStart
	}
	if c.Step <= 0 {
		c.Step = DefaultClockStep
	}
	return c
}

// settings is how the trace records the clock (nil: the wall clock).
func (c Clock) settings() *trace.ClockSettings {
	if !c.Virtual {
		return nil
	}
	return &trace.ClockSettings{Mode: ClockVirtual, Start: c.Start.UTC().Format(time.RFC3339Nano), StepMS: msOf(c.Step)}
}

// ClockFromRun is the clock a recording ran on, with its recorded
// advances, for its replay: the same start, the same amounts at the same
// steps. A recording on the wall clock gives the wall clock.
func ClockFromRun(src *trace.Trace) (Clock, error) {
	cs := src.Run.Settings
	if cs == nil || cs.Clock == nil || cs.Clock.Mode != ClockVirtual {
		return Clock{}, nil
	}
	start, err := time.Parse(time.RFC3339Nano, cs.Clock.Start)
	if err != nil {
		return Clock{}, fmt.Errorf("the recorded clock's start %q: %w", cs.Clock.Start, err)
	}
	c := Clock{Virtual: true, Start: start, Step: time.Duration(cs.Clock.StepMS * float64(time.Millisecond)), Advances: map[int]time.Duration{}}
	for _, st := range src.Steps {
		if st.Result != nil {
			c.Advances[st.Step] = time.Duration(st.Result.ClockAdvanceMS * float64(time.Millisecond))
		}
	}
	return c, nil
}

// clockAdvance is how far the virtual clock moves for an action at step.
func (s *Session) clockAdvance(step int, a action.Action) time.Duration {
	c := s.cfg.Clock
	if !c.Virtual {
		return 0
	}
	if d, ok := c.Advances[step]; ok {
		return d
	}
	if a.Kind == action.Wait && a.Until == "" {
		return time.Duration(a.MS) * time.Millisecond
	}
	return c.Step
}

// advanceClock moves the app's virtual clock by d.
func (s *Session) advanceClock(ctx context.Context, d time.Duration) error {
	if d <= 0 || s.clock == nil {
		return nil
	}
	next := s.clockNow.Add(d)
	if err := s.clock.SetClock(ctx, next); err != nil {
		return err
	}
	s.clockNow = next
	return nil
}

// clockStamp is the virtual time recorded with an observation ("" on the
// wall clock).
func (s *Session) clockStamp() string {
	if s.clock == nil {
		return ""
	}
	return s.clockNow.UTC().Format(time.RFC3339Nano)
}
