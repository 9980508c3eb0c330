package cli

import (
	"errors"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/faketime"
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
// cannot read: a backend without the capability, or a staged program
// that libfaketime cannot be preloaded into (a static executable, a Go
// program). A program of the image is checked in the sandbox, at launch.
func checkClock(c session.Clock, b environment.Backend, bundle *app.Bundle) error {
	if !c.Virtual {
		return nil
	}
	if !environment.CapabilitiesOf(b).VirtualClock {
		why := ""
		if b.Name() == "local" {
			why = " (it needs libfaketime on this host: apt-get install libfaketime, or scripts/deps.sh test)"
		}
		return usageErrorf("--clock virtual: the %s backend has no virtual clock%s", b.Name(), why)
	}
	if bundle == nil || bundle.InImage || bundle.Dir == "" {
		return nil
	}
	cmd := filepath.Join(bundle.Dir, filepath.FromSlash(bundle.Manifest.Command))
	if err := faketime.Check(cmd); err != nil {
		if errors.Is(err, faketime.ErrNotFakeable) {
			return usageErrorf("--clock virtual: the app %v", err)
		}
		return usageErrorf("--clock virtual: cannot read the app's program: %v", err)
	}
	return nil
}
