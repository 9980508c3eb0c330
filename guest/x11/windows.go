package x11

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

// WindowID identifies an X window (an alias, so IDs mix freely with other
// packages' uint32 window IDs).
type WindowID = uint32

// Window describes a top-level window.
type Window struct {
	ID WindowID
	// Title is _NET_WM_NAME (UTF-8) or, when that is absent, WM_NAME
	// (Latin-1, converted to UTF-8): xterm in the C locale sets only WM_NAME.
	Title string
	// Instance and Class are the two parts of WM_CLASS.
	Instance, Class string
	// PID is _NET_WM_PID, 0 if unset.
	PID int
	// X, Y, Width and Height are the window's inside area in root
	// coordinates (without the window manager's frame).
	X, Y, Width, Height int
	// Mapped reports whether the window is viewable.
	Mapped bool
	// Focused reports whether the keyboard focus is in the window (on it or
	// on one of its descendants).
	Focused bool
	// OverrideRedirect is set for windows the window manager does not manage
	// (menus, tooltips, some full-screen games). Only listed without a WM.
	OverrideRedirect bool
}

// Windows lists the top-level windows: the window manager's
// _NET_CLIENT_LIST when there is one (in mapping order), otherwise the
// viewable InputOutput children of the root window (bottom to top). Windows
// that disappear while being read are left out. Listing a window also
// selects its title changes for WatchWindows.
func (c *Conn) Windows(ctx context.Context) ([]Window, error) {
	o, err := c.begin(ctx, &c.query, "windows")
	if err != nil {
		return nil, err
	}
	defer o.end()
	var wins []Window
	err = o.do(func() (err error) {
		wins, err = c.windows()
		return err
	})
	if err != nil {
		return nil, o.wrap("windows", err)
	}
	return wins, nil
}

// windows runs in the op's goroutine; it only touches its own memory.
func (c *Conn) windows() ([]Window, error) {
	ids, managed, err := c.clientList()
	if err != nil {
		return nil, err
	}
	focus, err := xproto.GetInputFocus(c.xc).Reply()
	if err != nil {
		return nil, err
	}

	// One pipelined batch per window, one round trip for all of them.
	type batch struct {
		attr          xproto.GetWindowAttributesCookie
		geom          xproto.GetGeometryCookie
		pos           xproto.TranslateCoordinatesCookie
		netName, name xproto.GetPropertyCookie
		class, pid    xproto.GetPropertyCookie
	}
	bs := make([]batch, len(ids))
	for i, id := range ids {
		// Select first, then read: a title set after the read is notified.
		xproto.ChangeWindowAttributes(c.xc, id, xproto.CwEventMask, []uint32{clientEventMask})
		bs[i] = batch{
			attr:    xproto.GetWindowAttributes(c.xc, id),
			geom:    xproto.GetGeometry(c.xc, xproto.Drawable(id)),
			pos:     xproto.TranslateCoordinates(c.xc, id, c.root, 0, 0),
			netName: xproto.GetProperty(c.xc, false, id, c.atoms.netWmName, c.atoms.utf8String, 0, 1024),
			name:    xproto.GetProperty(c.xc, false, id, xproto.AtomWmName, xproto.GetPropertyTypeAny, 0, 1024),
			class:   xproto.GetProperty(c.xc, false, id, xproto.AtomWmClass, xproto.AtomString, 0, 256),
			pid:     xproto.GetProperty(c.xc, false, id, c.atoms.netWmPid, xproto.AtomCardinal, 0, 1),
		}
	}
	focusTop, err := c.topLevelOf(focus.Focus, ids)
	if err != nil {
		return nil, err
	}
	wins := make([]Window, 0, len(ids))
	for i, id := range ids {
		b := bs[i]
		// Collect every reply (so none is left pending), then decide.
		attr, errA := b.attr.Reply()
		geom, errG := b.geom.Reply()
		pos, errP := b.pos.Reply()
		netName, _ := b.netName.Reply()
		name, _ := b.name.Reply()
		class, _ := b.class.Reply()
		pid, _ := b.pid.Reply()
		if errA != nil || errG != nil || errP != nil {
			if isClosed(errA) || isClosed(errG) || isClosed(errP) {
				return nil, ErrClosed
			}
			continue // the window went away
		}
		if !managed && (attr.Class != xproto.WindowClassInputOutput || attr.MapState != xproto.MapStateViewable) {
			continue
		}
		w := Window{
			ID:               WindowID(id),
			X:                int(pos.DstX),
			Y:                int(pos.DstY),
			Width:            int(geom.Width),
			Height:           int(geom.Height),
			Mapped:           attr.MapState == xproto.MapStateViewable,
			Focused:          focusTop == id,
			OverrideRedirect: attr.OverrideRedirect,
		}
		if netName != nil && netName.Format == 8 && netName.Type == c.atoms.utf8String {
			w.Title = toValidUTF8(netName.Value)
		} else if name != nil && name.Format == 8 {
			w.Title = latin1ToUTF8(name.Value, name.Type == c.atoms.utf8String)
		}
		if class != nil && class.Format == 8 {
			parts := bytes.SplitN(class.Value, []byte{0}, 3)
			w.Instance = latin1ToUTF8(parts[0], false)
			if len(parts) > 1 {
				w.Class = latin1ToUTF8(parts[1], false)
			}
		}
		if pid != nil && pid.Format == 32 && len(pid.Value) >= 4 {
			w.PID = int(uint32(pid.Value[0]) | uint32(pid.Value[1])<<8 | uint32(pid.Value[2])<<16 | uint32(pid.Value[3])<<24)
		}
		wins = append(wins, w)
	}
	return wins, nil
}

// clientList returns _NET_CLIENT_LIST and true when a window manager
// maintains it, else the children of the root window and false.
func (c *Conn) clientList() ([]xproto.Window, bool, error) {
	p, err := xproto.GetProperty(c.xc, false, c.root, c.atoms.netClientList, xproto.AtomWindow, 0, 4096).Reply()
	if err != nil {
		return nil, false, err
	}
	if p.Format == 32 && p.Type == xproto.AtomWindow {
		ids := make([]xproto.Window, 0, p.ValueLen)
		for i := 0; i+4 <= len(p.Value); i += 4 {
			v := p.Value[i:]
			ids = append(ids, xproto.Window(uint32(v[0])|uint32(v[1])<<8|uint32(v[2])<<16|uint32(v[3])<<24))
		}
		return ids, true, nil
	}
	t, err := xproto.QueryTree(c.xc, c.root).Reply()
	if err != nil {
		return nil, false, err
	}
	return t.Children, false, nil
}

// topLevelOf returns the window in tops that is win or an ancestor of win,
// or 0. It walks up with QueryTree (usually zero to two round trips).
func (c *Conn) topLevelOf(win xproto.Window, tops []xproto.Window) (xproto.Window, error) {
	for depth := 0; win != 0 && win != xproto.InputFocusPointerRoot && win != c.root && depth < 32; depth++ {
		if slices.Contains(tops, win) {
			return win, nil
		}
		t, err := xproto.QueryTree(c.xc, win).Reply()
		if err != nil {
			if isClosed(err) {
				return 0, err
			}
			return 0, nil
		}
		win = t.Parent
	}
	return 0, nil
}

func toValidUTF8(b []byte) string {
	b = bytes.TrimRight(b, "\x00")
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// latin1ToUTF8 decodes an ICCCM STRING (Latin-1). COMPOUND_TEXT is decoded
// the same way, which is right for its ASCII and Latin-1 parts.
func latin1ToUTF8(b []byte, isUTF8 bool) string {
	b = bytes.TrimRight(b, "\x00")
	if isUTF8 {
		return toValidUTF8(b)
	}
	var sb strings.Builder
	for _, ch := range b {
		sb.WriteRune(rune(ch))
	}
	return sb.String()
}

// ActiveWindow returns the active window: _NET_ACTIVE_WINDOW when a window
// manager sets it, otherwise the top-level window holding the input focus.
// It returns 0 when no window is active.
func (c *Conn) ActiveWindow(ctx context.Context) (WindowID, error) {
	o, err := c.begin(ctx, &c.query, "active window")
	if err != nil {
		return 0, err
	}
	defer o.end()
	var id xproto.Window
	err = o.do(func() error {
		p, err := xproto.GetProperty(c.xc, false, c.root, c.atoms.netActiveWindow, xproto.AtomWindow, 0, 1).Reply()
		if err != nil {
			return err
		}
		if p.Format == 32 && len(p.Value) >= 4 {
			v := p.Value
			id = xproto.Window(uint32(v[0]) | uint32(v[1])<<8 | uint32(v[2])<<16 | uint32(v[3])<<24)
			return nil
		}
		f, err := xproto.GetInputFocus(c.xc).Reply()
		if err != nil {
			return err
		}
		tops, _, err := c.clientList()
		if err != nil {
			return err
		}
		id, err = c.topLevelOf(f.Focus, tops)
		return err
	})
	if err != nil {
		return 0, o.wrap("active window", err)
	}
	return WindowID(id), nil
}

// Activate raises win and gives it the keyboard focus. With a window manager
// it sends the EWMH _NET_ACTIVE_WINDOW request (source indication 2, as a
// pager or a person would) and waits until the window manager has handled
// it (the probe of wmsync.go: no fixed limit, ctx bounds the wait); if the
// window manager then does not report win active (it may refuse a window
// that takes no input), or without a window manager, it raises the window
// and sets the input focus itself. Activate queues behind input, as a click
// would.
func (c *Conn) Activate(ctx context.Context, win WindowID) error {
	o, err := c.begin(ctx, &c.input, "activate")
	if err != nil {
		return err
	}
	hasWM, err := c.wmPresent(o)
	if err == nil && hasWM {
		err = c.activateSync(o, xproto.Window(win), "activate")
	}
	o.end()
	if err != nil {
		return o.wrap("activate", err)
	}
	if hasWM {
		if ok, err := c.isActive(ctx, win); err != nil || ok {
			return err
		}
	}
	return c.focus(ctx, win)
}

// SyncWM waits until the window manager has handled every event and
// request that reached the X server before it (one probe answered; see
// wmsync.go): what it does about a window it mapped and focused — its
// frame painted — is done then. Without a window manager that answers,
// it returns at once.
func (c *Conn) SyncWM(ctx context.Context) error {
	o, err := c.begin(ctx, &c.input, "sync with the window manager")
	if err != nil {
		return err
	}
	defer o.end()
	return o.wrap("sync with the window manager", c.wmSync(o, "sync with the window manager"))
}

// isActive reports whether the window manager reports win active and the
// keyboard focus is in win.
func (c *Conn) isActive(ctx context.Context, win WindowID) (bool, error) {
	o, err := c.begin(ctx, &c.query, "activate")
	if err != nil {
		return false, err
	}
	defer o.end()
	var ok bool
	err = o.do(func() error {
		p, err := xproto.GetProperty(c.xc, false, c.root, c.atoms.netActiveWindow, xproto.AtomWindow, 0, 1).Reply()
		if err != nil {
			return err
		}
		if p.Format != 32 || len(p.Value) < 4 || xgb.Get32(p.Value) != win {
			return nil
		}
		f, err := xproto.GetInputFocus(c.xc).Reply()
		if err != nil {
			return err
		}
		top, err := c.topLevelOf(f.Focus, []xproto.Window{xproto.Window(win)})
		ok = top == xproto.Window(win)
		return err
	})
	return ok, err
}

// focus raises win and sets the input focus to it directly.
func (c *Conn) focus(ctx context.Context, win WindowID) error {
	o, err := c.begin(ctx, &c.query, "focus")
	if err != nil {
		return err
	}
	defer o.end()
	return o.wrap("focus", o.do(func() error {
		xproto.ConfigureWindow(c.xc, xproto.Window(win), xproto.ConfigWindowStackMode, []uint32{xproto.StackModeAbove})
		return xproto.SetInputFocusChecked(c.xc, xproto.InputFocusParent, xproto.Window(win), xproto.TimeCurrentTime).Check()
	}))
}

// WaitWindow waits until a window satisfying match exists and returns it,
// re-reading the windows on every WatchWindows notification (no polling).
func (c *Conn) WaitWindow(ctx context.Context, match func(Window) bool) (Window, error) {
	changed, stop := c.WatchWindows()
	defer stop()
	for {
		wins, err := c.Windows(ctx)
		if err != nil {
			return Window{}, err
		}
		for _, w := range wins {
			if match(w) {
				return w, nil
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return Window{}, ctxError(ctx, "wait for window")
		case <-c.closed:
			return Window{}, fmt.Errorf("x11: wait for window: %w", ErrClosed)
		}
	}
}
