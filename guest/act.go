package guest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/guest/x11"
	"github.com/codegirl-games/agentbox/internal/keysym"
	"github.com/codegirl-games/agentbox/internal/textcut"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

// Defaults for waits that do not say.
const (
	defaultStableMS  = 500
	defaultUntilMS   = 10_000
	pollInterval     = 25 * time.Millisecond
	dragStepPixels   = 16
	dragStepInterval = 2 * time.Millisecond
)

// act performs one action. The host validated it; the guest validates
// again against its own screen, because it trusts no input.
func (g *Guest) act(ctx context.Context, a action.Action) (action.Result, error) {
	res, err := g.actCursor(ctx, a, true)
	return res, err
}

// actCursor is act; without cursor, a pointer action's result is left
// without its cursor, for the caller to read it (step).
func (g *Guest) actCursor(ctx context.Context, a action.Action, cursor bool) (action.Result, error) {
	if g.x == nil {
		return action.Result{}, wire.Errorf(wire.CodeInvalid, "act: the display is not up")
	}
	if err := action.Validate(a, action.DefaultLimits(g.screen.Width, g.screen.Height)); err != nil {
		return action.Result{}, wire.Errorf(wire.CodeInvalid, "%v", err)
	}
	t, c0 := time.Now(), g.x.ConfirmTime()
	res := action.Result{OK: true}
	err := g.performOn(ctx, a, &res)
	var te errTarget
	if errors.As(err, &te) {
		// The target was not found or could not be acted on: the agent's
		// error, told in the result (a tree's near misses: bounded).
		res.OK, res.Error = false, textcut.Bytes(te.Error(), 4000, "…")
		err = nil
	}
	res.ElapsedUS = time.Since(t).Microseconds()
	res.ConfirmUS = (g.x.ConfirmTime() - c0).Microseconds()
	if errors.Is(err, x11.ErrUnconfirmed) {
		// Never OK for input that may not have landed as sent: say so.
		res.OK, res.Error = false, err.Error()
		err = nil
	}
	if err != nil {
		return action.Result{}, err
	}
	if cursor && movesPointer(a.Kind) {
		return res, g.resultCursor(ctx, &res)
	}
	return res, nil
}

// movesPointer says whether an action's result carries the cursor.
func movesPointer(k action.Kind) bool {
	switch k {
	case action.MouseMove, action.Click, action.MouseDown, action.MouseUp, action.Drag, action.Scroll, action.CursorPosition:
		return true
	}
	return false
}

// resultCursor reads the pointer into a result.
func (g *Guest) resultCursor(ctx context.Context, res *action.Result) error {
	ctx, cancel := context.WithTimeout(ctx, xTimeout)
	defer cancel()
	x, y, err := g.x.Cursor(ctx)
	if err != nil {
		return fmt.Errorf("cursor: %w", err)
	}
	res.Cursor = &action.Point{X: x, Y: y}
	return nil
}

// step performs an action as an act request does, then the settle, then
// a screenshot (wire.StepRequest): one round trip where a step made two
// or three. Where nothing comes between the action and the screenshot
// (no settle) and the screenshot reads the desktop's state, the action's
// cursor is the state's — one read of the pointer, after the action as
// before, where there were two.
func (g *Guest) step(ctx context.Context, req wire.StepRequest) (wire.StepResponse, []byte, error) {
	var resp wire.StepResponse
	if s := req.Settle; s != nil && (s.Kind != action.Wait || s.Until != action.UntilStable) {
		return resp, nil, wire.Errorf(wire.CodeInvalid, "step: the settle is a wait until stable, not %s", s)
	}
	shared := req.Settle == nil && req.Screenshot.WithState && movesPointer(req.Action.Kind)
	res, err := g.actCursor(ctx, req.Action, !shared)
	g.screenChanged() // the pointer may have moved, which damages nothing
	if err != nil {
		return resp, nil, err
	}
	resp.Result = res
	t := time.Now()
	failed := func(err error) (wire.StepResponse, []byte, error) {
		if shared && resp.Result.Cursor == nil {
			// The cursor the action's result would have had.
			if cerr := g.resultCursor(ctx, &resp.Result); cerr != nil {
				return resp, nil, cerr
			}
		}
		resp.Failed = err.Error()
		return resp, nil, nil
	}
	if req.Settle != nil {
		sres, err := g.act(ctx, *req.Settle)
		g.screenChanged()
		if err != nil {
			return failed(fmt.Errorf("settle: %w", err))
		}
		resp.Settled = &sres
	}
	shot, payload, err := g.screenshot(ctx, req.Screenshot)
	if err != nil {
		return failed(err)
	}
	if shared && shot.State != nil {
		c := shot.State.Cursor
		resp.Result.Cursor = &c
	}
	resp.Shot = &shot
	resp.ObserveUS = time.Since(t).Microseconds()
	return resp, payload, nil
}

// performOn resolves an action's target in the live accessibility tree,
// then performs it: a pointer action at the element's centre, typing
// after the element has the focus.
func (g *Guest) performOn(ctx context.Context, a action.Action, res *action.Result) error {
	if a.Target == nil {
		return g.perform(ctx, a, res)
	}
	tctx, cancel := context.WithTimeout(ctx, time.Duration(observe.MaxTreeTimeout)*time.Millisecond)
	e, err := g.resolveTarget(tctx, a)
	cancel()
	if err != nil {
		return err
	}
	res.Target = observe.ResolvedOf(e)
	if a.Kind == action.Type {
		fctx, cancel := context.WithTimeout(ctx, 2*focusWait+2*xTimeout)
		err := g.focusTarget(fctx, e, res)
		cancel()
		if err != nil {
			return err
		}
	} else {
		p, _ := e.Center()
		a.X, a.Y = &p.X, &p.Y
		res.Target.Point = &p
	}
	a.Target = nil
	return g.perform(ctx, a, res)
}

func (g *Guest) perform(ctx context.Context, a action.Action, res *action.Result) error {
	x := g.x
	if a.Kind != action.Wait {
		// Input is quick; only a server that stopped answering takes long.
		// The bound grows with what an action may legitimately take.
		limit := xTimeout + time.Duration(len([]rune(a.Text)))*(time.Duration(a.DelayMS)*time.Millisecond+5*time.Millisecond) +
			time.Duration(max(a.Repeat, 1))*10*time.Millisecond + time.Duration(len(a.Path))*50*time.Millisecond
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	switch a.Kind {
	case action.Screenshot, action.CursorPosition, action.Done, action.AccessibilityTree:
		return nil // the observation after the step carries the answer
	case action.Key:
		syms, err := chord(a.Keys)
		if err != nil {
			return err
		}
		return x.Chord(ctx, syms, max(a.Repeat, 1))
	case action.KeyDown, action.KeyUp:
		ks, err := keysym.Lookup(a.Key)
		if err != nil {
			return wire.Errorf(wire.CodeInvalid, "%v", err)
		}
		if a.Kind == action.KeyDown {
			return x.KeyDown(ctx, uint32(ks))
		}
		return x.KeyUp(ctx, uint32(ks))
	case action.Type:
		return x.TypeText(ctx, a.Text, time.Duration(a.DelayMS)*time.Millisecond)
	case action.MouseMove:
		if a.X != nil {
			return x.MouseMove(ctx, *a.X, *a.Y)
		}
		return x.MouseMoveRelative(ctx, deref(a.DX), deref(a.DY))
	case action.Click:
		return g.withModifiers(ctx, a.Keys, func() error {
			if a.X != nil {
				if err := x.MouseMove(ctx, *a.X, *a.Y); err != nil {
					return err
				}
			}
			return x.Click(ctx, a.Button.Number(), max(a.Count, 1))
		})
	case action.MouseDown:
		return x.ButtonDown(ctx, a.Button.Number())
	case action.MouseUp:
		return x.ButtonUp(ctx, a.Button.Number())
	case action.Drag:
		return g.drag(ctx, a)
	case action.Scroll:
		return g.withModifiers(ctx, a.Keys, func() error {
			if a.X != nil {
				if err := x.MouseMove(ctx, *a.X, *a.Y); err != nil {
					return err
				}
			}
			return x.Scroll(ctx, deref(a.DX), deref(a.DY))
		})
	case action.Wait:
		if a.Until == action.UntilFile {
			met, seen, err := g.waitFile(ctx, a)
			if err != nil {
				return err
			}
			res.Met = &met
			if !met {
				res.OK = false
				res.Error = fmt.Sprintf("wait until file %s: not met within %dms: %s", a.File, untilMS(a), seen)
			}
			return nil
		}
		met, err := g.wait(ctx, a)
		if err != nil {
			return err
		}
		if a.Until != "" {
			res.Met = &met
			if !met {
				res.OK = false
				res.Error = fmt.Sprintf("wait until %s: not met within %dms", a.Until, untilMS(a))
			}
		}
		return nil
	}
	return wire.Errorf(wire.CodeInvalid, "unknown action %q", a.Kind)
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func chord(s string) ([]uint32, error) {
	ks, err := keysym.ParseChord(s)
	if err != nil {
		return nil, wire.Errorf(wire.CodeInvalid, "%v", err)
	}
	out := make([]uint32, len(ks))
	for i, k := range ks {
		out[i] = uint32(k)
	}
	return out, nil
}

// withModifiers holds the modifier chord keys around f.
func (g *Guest) withModifiers(ctx context.Context, keys string, f func() error) error {
	if keys == "" {
		return f()
	}
	syms, err := chord(keys)
	if err != nil {
		return err
	}
	for i, s := range syms {
		if err := g.x.KeyDown(ctx, s); err != nil {
			for j := i - 1; j >= 0; j-- {
				_ = g.x.KeyUp(ctx, syms[j])
			}
			return err
		}
	}
	ferr := f()
	for i := len(syms) - 1; i >= 0; i-- {
		if err := g.x.KeyUp(ctx, syms[i]); err != nil && ferr == nil {
			ferr = err
		}
	}
	return ferr
}

// drag presses at the first point, moves through the others in small steps
// (so apps see motion events as from a hand), and releases at the last.
func (g *Guest) drag(ctx context.Context, a action.Action) error {
	x := g.x
	b := a.Button.Number()
	p0 := a.Path[0]
	if err := x.MouseMove(ctx, p0.X, p0.Y); err != nil {
		return err
	}
	if err := x.ButtonDown(ctx, b); err != nil {
		return err
	}
	cur := p0
	for _, p := range a.Path[1:] {
		dx, dy := p.X-cur.X, p.Y-cur.Y
		steps := max(abs(dx), abs(dy)) / dragStepPixels
		for i := 1; i <= steps; i++ {
			if err := x.MouseMove(ctx, cur.X+dx*i/(steps+1), cur.Y+dy*i/(steps+1)); err != nil {
				_ = x.ButtonUp(ctx, b)
				return err
			}
			time.Sleep(dragStepInterval)
		}
		if err := x.MouseMove(ctx, p.X, p.Y); err != nil {
			_ = x.ButtonUp(ctx, b)
			return err
		}
		cur = p
	}
	return x.ButtonUp(ctx, b)
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func untilMS(a action.Action) int {
	if a.MS > 0 {
		return a.MS
	}
	return defaultUntilMS
}

// wait sleeps, or polls a condition cheaply (frame hashes, the window
// cache) until it holds or its deadline passes.
func (g *Guest) wait(ctx context.Context, a action.Action) (bool, error) {
	if a.Until == "" {
		t := time.NewTimer(time.Duration(a.MS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return true, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(untilMS(a))*time.Millisecond)
	defer cancel()
	switch a.Until {
	case action.UntilWindow:
		match, err := action.TitleMatcher(a.Title)
		if err != nil {
			return false, wire.Errorf(wire.CodeInvalid, "title: %v", err)
		}
		_, err = g.waitWindow(wctx, match, nil)
		return g.waitResult(ctx, err)
	case action.UntilStable, action.UntilChange:
		stable := time.Duration(a.StableMS) * time.Millisecond
		if stable <= 0 {
			stable = defaultStableMS * time.Millisecond
		}
		// Where the server reports damage, the wait follows it rather
		// than looking every pollInterval: subscribed before the first
		// look, so that no change after a look goes unreported.
		var damaged <-chan struct{}
		if g.x.Damage() {
			ch, stop := g.x.WatchDamage()
			defer stop()
			damaged = ch
		}
		first, err := g.frameHash(wctx)
		if err != nil {
			return g.waitResult(ctx, err)
		}
		last, since, look := first, time.Now(), time.Now()
		// On a virtual clock, the screen is stable only once the app
		// is idle too (idle.go): it has drawn the instant it is at.
		var load *appLoad
		if g.vclock != nil && a.Until == action.UntilStable {
			load = newAppLoad(g.vclock.file)
			load.busy()
			damaged = nil // the app's load is looked at every pollInterval
		}
		for {
			var due time.Time
			if a.Until == action.UntilStable {
				due = since.Add(stable)
			}
			if err := nextLook(wctx, damaged, look, due); err != nil {
				return g.waitResult(ctx, err)
			}
			look = time.Now()
			h, err := g.frameHash(wctx)
			if err != nil {
				return g.waitResult(ctx, err)
			}
			if a.Until == action.UntilChange {
				if h != first {
					return true, nil
				}
				continue
			}
			if h != last || (load != nil && load.busy()) {
				last, since = h, time.Now()
			} else if time.Since(since) >= stable {
				return true, nil
			}
		}
	}
	return false, wire.Errorf(wire.CodeInvalid, "unknown wait condition %q", a.Until)
}

// damageBackstop is the longest a wait following damage goes without
// looking at the screen: a look at an undamaged screen costs one round
// trip to the X server, no capture.
const damageBackstop = time.Second

// nextLook waits until a wait should look at the screen again after its
// look at last: without damage reports (damaged nil), pollInterval after
// it; with them, when one arrives or at due (when the screen would have
// been stable long enough; zero: none) or after damageBackstop, whichever
// is first — and never sooner than pollInterval after the last look, so
// that an app drawing all the time costs what polling cost.
func nextLook(ctx context.Context, damaged <-chan struct{}, last, due time.Time) error {
	next := last.Add(pollInterval)
	if damaged != nil {
		wake := last.Add(damageBackstop)
		if !due.IsZero() && due.Before(wake) {
			wake = due
		}
		t := time.NewTimer(time.Until(wake))
		select {
		case <-damaged:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
	t := time.NewTimer(time.Until(next))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitFile waits until the file of a (below the home) was written since
// the app was launched and has stayed the same for stable_ms (waitFile's
// rules); seen says what it saw last when that did not hold in time.
func (g *Guest) waitFile(ctx context.Context, a action.Action) (bool, string, error) {
	if g.home == "" {
		return false, "", wire.Errorf(wire.CodeInvalid, "wait until file: the display is not started")
	}
	rel, err := action.HomeRel(a.File)
	if err != nil {
		return false, "", wire.Errorf(wire.CodeInvalid, "wait until file: %v", err)
	}
	var since time.Time
	if g.app != nil {
		since = g.app.started
	}
	stable := time.Duration(a.StableMS) * time.Millisecond
	if stable <= 0 {
		stable = defaultStableMS * time.Millisecond
	}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(untilMS(a))*time.Millisecond)
	defer cancel()
	met, seen, err := waitFile(wctx, g.home, rel, since, stable, pollInterval)
	if err != nil {
		return false, "", wire.Errorf(wire.CodeInvalid, "wait until file: %v", err)
	}
	if !met && ctx.Err() != nil {
		return false, "", ctx.Err()
	}
	return met, seen, nil
}

// waitResult turns the end of a wait into (met, error): the wait's own
// deadline is "not met", the request's cancellation an error.
func (g *Guest) waitResult(ctx context.Context, err error) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return false, nil
	}
	return false, err
}
