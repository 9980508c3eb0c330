package x11

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/jezek/xgb/xproto"
)

// Buttons by their X numbers.
const (
	ButtonLeft       = 1
	ButtonMiddle     = 2
	ButtonRight      = 3
	ButtonWheelUp    = 4
	ButtonWheelDown  = 5
	ButtonWheelLeft  = 6
	ButtonWheelRight = 7
)

// pointerState is guarded by the input lane.
type pointerState struct {
	held []int // buttons pressed by ButtonDown, in press order
	// wmPress is set while a button pressed by ButtonDown on the window
	// manager's own windows is held: the press, every motion and the
	// release are each followed by wmSync.
	wmPress bool
}

func checkButton(button int) error {
	if button < 1 || button > 255 {
		return fmt.Errorf("x11: button %d (want 1–255): %w", button, ErrBadArgument)
	}
	return nil
}

func checkCoord(what string, v int) error {
	if v < math.MinInt16 || v > math.MaxInt16 {
		return fmt.Errorf("x11: %s %d out of range: %w", what, v, ErrBadArgument)
	}
	return nil
}

// MouseMove moves the pointer to (x, y) on the root window. The server
// clamps positions outside the screen to its edge.
func (c *Conn) MouseMove(ctx context.Context, x, y int) error {
	if err := checkCoord("x", x); err != nil {
		return err
	}
	if err := checkCoord("y", y); err != nil {
		return err
	}
	o, err := c.begin(ctx, &c.input, "mouse move")
	if err != nil {
		return err
	}
	defer o.end()
	err = o.do(func() error {
		c.fake(xproto.MotionNotify, 0, int16(x), int16(y))
		return c.syncInput()
	})
	return o.wrap("mouse move", c.wmSyncDrag(o, err, "mouse move"))
}

// MouseMoveRelative moves the pointer by (dx, dy) pixels. It reads the
// pointer position and moves it absolutely, so the distance is exact: a
// relative XTEST motion would go through the server's pointer acceleration.
func (c *Conn) MouseMoveRelative(ctx context.Context, dx, dy int) error {
	if err := checkCoord("dx", dx); err != nil {
		return err
	}
	if err := checkCoord("dy", dy); err != nil {
		return err
	}
	o, err := c.begin(ctx, &c.input, "mouse move relative")
	if err != nil {
		return err
	}
	defer o.end()
	err = o.do(func() error {
		p, err := xproto.QueryPointer(c.xc, c.root).Reply()
		if err != nil {
			return err
		}
		x := min(max(int(p.RootX)+dx, math.MinInt16), math.MaxInt16)
		y := min(max(int(p.RootY)+dy, math.MinInt16), math.MaxInt16)
		c.fake(xproto.MotionNotify, 0, int16(x), int16(y))
		return c.syncInput()
	})
	return o.wrap("mouse move relative", c.wmSyncDrag(o, err, "mouse move"))
}

// wmSyncDrag follows a motion sent without error by wmSync while a button
// pressed on the window manager's own windows is held: Openbox drops a
// title-bar drag whose events it reads only after the release (measured with
// Openbox stopped during the drag), so such a drag goes at Openbox's pace,
// one event at a time.
func (c *Conn) wmSyncDrag(o *op, err error, what string) error {
	if err != nil || !c.ptr.wmPress {
		return err
	}
	return c.wmSync(o, what)
}

// ButtonDown presses button (1 left, 2 middle, 3 right, 4/5 wheel up/down,
// 6/7 wheel left/right, 8/9 back/forward) and keeps it held until ButtonUp or
// ReleaseAll.
func (c *Conn) ButtonDown(ctx context.Context, button int) error {
	if err := checkButton(button); err != nil {
		return err
	}
	o, err := c.begin(ctx, &c.input, "button down")
	if err != nil {
		return err
	}
	defer o.end()
	syncAfter, err := c.beforePress(o, button, "button down")
	if err != nil {
		return o.wrap("button down", err)
	}
	if !slices.Contains(c.ptr.held, button) {
		c.ptr.held = append(c.ptr.held, button)
		c.publishHeld()
	}
	c.ptr.wmPress = c.ptr.wmPress || syncAfter
	err = o.do(func() error {
		c.fake(xproto.ButtonPress, byte(button), 0, 0)
		return c.syncInput()
	})
	if err == nil && c.ptr.wmPress {
		err = c.wmSync(o, "button down")
	}
	return o.wrap("button down", err)
}

// ButtonUp releases button.
func (c *Conn) ButtonUp(ctx context.Context, button int) error {
	if err := checkButton(button); err != nil {
		return err
	}
	o, err := c.begin(ctx, &c.input, "button up")
	if err != nil {
		return err
	}
	defer o.end()
	if i := slices.Index(c.ptr.held, button); i >= 0 {
		c.ptr.held = slices.Delete(c.ptr.held, i, i+1)
		c.publishHeld()
	}
	err = o.do(func() error {
		c.fake(xproto.ButtonRelease, byte(button), 0, 0)
		return c.syncInput()
	})
	if err == nil && c.ptr.wmPress && len(c.ptr.held) == 0 {
		c.ptr.wmPress = false
		err = c.wmSync(o, "button up")
	}
	return o.wrap("button up", err)
}

// Click presses and releases button count times (count ≥ 1) at the current
// pointer position, pausing DefaultClickInterval between clicks, so count 2
// is a double click and 3 a triple click in every toolkit.
//
// Like every method that presses a button, Click first gives an inactive
// window under the pointer the focus through the window manager, and after
// a click on the window manager's own windows waits until it has handled
// the click (see press.go).
func (c *Conn) Click(ctx context.Context, button, count int) error {
	if err := checkButton(button); err != nil {
		return err
	}
	if count < 1 {
		return fmt.Errorf("x11: click count %d: %w", count, ErrBadArgument)
	}
	o, err := c.begin(ctx, &c.input, "click")
	if err != nil {
		return err
	}
	defer o.end()
	syncAfter, err := c.beforePress(o, button, "click")
	if err != nil {
		return o.wrap("click", err)
	}
	for i := range count {
		if i > 0 {
			if err := o.sleep(DefaultClickInterval); err != nil {
				return err
			}
		}
		err := o.do(func() error {
			c.fake(xproto.ButtonPress, byte(button), 0, 0)
			c.fake(xproto.ButtonRelease, byte(button), 0, 0)
			return c.syncInput()
		})
		if err != nil {
			return o.wrap("click", err)
		}
	}
	if syncAfter {
		return o.wrap("click", c.wmSync(o, "click"))
	}
	return nil
}

// Scroll turns the wheel: dy clicks down (negative: up, buttons 5/4) and dx
// clicks right (negative: left, buttons 7/6), vertical first.
func (c *Conn) Scroll(ctx context.Context, dx, dy int) error {
	const maxClicks = 10000
	if dx < -maxClicks || dx > maxClicks || dy < -maxClicks || dy > maxClicks {
		return fmt.Errorf("x11: scroll %d,%d: %w", dx, dy, ErrBadArgument)
	}
	if dx == 0 && dy == 0 {
		return nil
	}
	o, err := c.begin(ctx, &c.input, "scroll")
	if err != nil {
		return err
	}
	defer o.end()
	err = o.do(func() error {
		wheel := func(n int, neg, pos byte) {
			b := pos
			if n < 0 {
				b, n = neg, -n
			}
			for range n {
				c.fake(xproto.ButtonPress, b, 0, 0)
				c.fake(xproto.ButtonRelease, b, 0, 0)
			}
		}
		wheel(dy, ButtonWheelUp, ButtonWheelDown)
		wheel(dx, ButtonWheelLeft, ButtonWheelRight)
		return c.syncInput()
	})
	return o.wrap("scroll", err)
}

// Cursor returns the pointer position on the root window.
func (c *Conn) Cursor(ctx context.Context) (x, y int, err error) {
	o, err := c.begin(ctx, &c.query, "cursor")
	if err != nil {
		return 0, 0, err
	}
	defer o.end()
	var rx, ry int16
	err = o.do(func() error {
		p, err := xproto.QueryPointer(c.xc, c.root).Reply()
		if err != nil {
			return err
		}
		rx, ry = p.RootX, p.RootY
		return nil
	})
	if err != nil {
		return 0, 0, o.wrap("cursor", err)
	}
	return int(rx), int(ry), nil
}
