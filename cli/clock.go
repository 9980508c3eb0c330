package cli

import (
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/session"
)

// clockFlags are --clock and --clock-step (run, eval).
type clockFlags struct {
	clock     string
	clockStep time.Duration
}

func (f *clockFlags) registerClock(fl *pflag.FlagSet, whose string) {
	fl.StringVar(&f.clock, "clock", session.ClockWall, "the clock "+whose+" reads: wall, or virtual (time starts at "+session.DefaultClockStart.Format(time.RFC3339)+" and moves only with the steps: --clock-step per action, a wait's own length for a wait; dynamically linked apps only, through libfaketime)")
	fl.DurationVar(&f.clockStep, "clock-step", session.DefaultClockStep, "with --clock virtual: how far each action other than a wait moves the app's clock")
}

// parseClock checks them.
func (f *clockFlags) parseClock(fl *pflag.FlagSet) (session.Clock, error) {
	if fl.Changed("clock-step") && f.clock != session.ClockVirtual {
		return session.Clock{}, usageErrorf("--clock-step applies to --clock virtual")
	}
	if f.clockStep <= 0 || f.clockStep > time.Hour {
		return session.Clock{}, usageErrorf("--clock-step %v: want a duration above 0 and at most 1h", f.clockStep)
	}
	c, err := session.ParseClock(f.clock, time.Time{}, f.clockStep)
	if err != nil {
		return c, usageErrorf("--clock: %v", err)
	}
	return c, nil
}

// checkClock refuses a virtual clock the backend cannot give or the app
// cannot read (session.CheckClock), as a usage error.
func checkClock(c session.Clock, b environment.Backend, bundle *app.Bundle) error {
	if err := session.CheckClock(c, b, bundle); err != nil {
		return usageErrorf("--clock virtual: %s", strings.TrimPrefix(err.Error(), session.ErrNoClock.Error()+": "))
	}
	return nil
}
