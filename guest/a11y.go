package guest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/guest/atspi"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

// focusWait is how long type waits for its target to say it has the
// focus, after each way of giving it.
const focusWait = time.Second

// startA11y starts the accessibility bus for the app to come.
func (g *Guest) startA11y(ctx context.Context) error {
	bus, err := atspi.Start(ctx, atspi.Config{
		Dir:    filepath.Join(g.home, ".run", "a11y"),
		Env:    g.baseEnv(),
		Stderr: newLimitedWriter(g.logw, 64<<10),
	})
	if err != nil {
		if errors.Is(err, atspi.ErrMissing) {
			return wire.Errorf(wire.CodeNotFound, "start the accessibility bus: %v", err)
		}
		return fmt.Errorf("start the accessibility bus: %w", err)
	}
	g.bus = bus
	return nil
}

// tree reads the accessibility tree.
func (g *Guest) tree(ctx context.Context, req wire.A11yTreeRequest) (*observe.Tree, error) {
	if g.bus == nil {
		return nil, wire.Errorf(wire.CodeInvalid, "accessibility tree: the sandbox has no accessibility bus (start it with --a11y)")
	}
	return g.bus.Tree(ctx, req.Limits)
}

// resolveTarget finds an action's target in the live tree. An action the
// target cannot be found for is the agent's error (a result, not OK),
// never the environment's.
func (g *Guest) resolveTarget(ctx context.Context, a action.Action) (*observe.Element, error) {
	if g.bus == nil {
		return nil, errTarget{fmt.Sprintf("target %v: the sandbox has no accessibility bus (start it with --a11y)", *a.Target)}
	}
	e, _, err := g.bus.Find(ctx, *a.Target)
	if err != nil {
		return nil, errTarget{"target " + err.Error()}
	}
	if a.Kind != action.Type {
		p, ok := e.Center()
		if !ok {
			return nil, errTarget{fmt.Sprintf("target %v: %s has no place on the screen", *a.Target, e.Describe())}
		}
		if p.X < 0 || p.Y < 0 || p.X >= g.screen.Width || p.Y >= g.screen.Height {
			return nil, errTarget{fmt.Sprintf("target %v: the centre of %s, (%d,%d), is off the %dx%d screen", *a.Target, e.Describe(), p.X, p.Y, g.screen.Width, g.screen.Height)}
		}
	}
	return e, nil
}

// errTarget is a target that could not be acted on: told to the agent.
type errTarget struct{ msg string }

func (e errTarget) Error() string { return e.msg }

// focusTarget gives a type action's target the keyboard focus: through
// AT-SPI first (GrabFocus, which does not move the caret), then, if the
// element does not say it is focused, by clicking its centre as a person
// would. It records how.
func (g *Guest) focusTarget(ctx context.Context, e *observe.Element, res *action.Result) error {
	if e.Has("focused") {
		res.Target.Focus = "already"
		return nil
	}
	ok, err := g.bus.GrabFocus(ctx, e.ID, focusWait)
	if err == nil && ok {
		res.Target.Focus = "grab_focus"
		return nil
	}
	p, has := e.Center()
	if !has {
		return errTarget{fmt.Sprintf("target: %s cannot take the focus and has no place on the screen to click", e.Describe())}
	}
	if err := g.x.MouseMove(ctx, p.X, p.Y); err != nil {
		return err
	}
	if err := g.x.Click(ctx, 1, 1); err != nil {
		return err
	}
	res.Target.Point = &p
	if ok, _ := g.bus.WaitState(ctx, e.ID, "focused", focusWait); !ok {
		return errTarget{fmt.Sprintf("target: %s did not take the keyboard focus (neither by AT-SPI nor by a click at (%d,%d))", e.Describe(), p.X, p.Y)}
	}
	res.Target.Focus = "click"
	return nil
}
