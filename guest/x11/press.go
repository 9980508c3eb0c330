package x11

import (
	"slices"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

// Where a button press lands, and who must act on it.
//
// A person's click on an inactive window focuses and raises it. Openbox's
// stock way to do that is a passive button grab in synchronous mode on every
// application window: on a press the pointer freezes until Openbox has
// handled it and replayed it to the application. Events sent meanwhile are
// queued and take their coordinates when they are finally processed, so on a
// loaded machine, where Openbox answers late, a click's release and the next
// click landed where a later move had put the pointer (issue 11: 3 of 4 runs
// with a Go test suite running beside). No deadline makes that exact: the
// position of an event must not depend on when the window manager runs.
//
// So agentbox's Openbox has no client-context bindings (no grab, no freeze:
// every event is processed by the server, and delivered, the moment it is
// sent, at the position it was sent with), and the Conn does what the grab
// was for, in order, before the press:
//
//   - the press lands on the active window, a window the window manager does
//     not manage (override-redirect menus, tooltips), or the root window:
//     nothing to do — the common case costs two pipelined round trips;
//   - it lands on a managed window that is not active: the Conn asks the
//     window manager to activate it (_NET_ACTIVE_WINDOW, source indication 2,
//     as a person's click would) and waits until the window manager has
//     handled that request (wmSync) before it presses, so the application
//     gets the focus before the press, as under Openbox's own click-to-focus;
//   - it lands on the window manager's own windows (title bar, borders,
//     frame buttons): the press is Openbox's input, handled in Openbox's
//     time, so after the release the Conn waits until Openbox has handled it
//     (a move or a close is then complete before the next input).
//
// Only buttons 1–3 take part, as in the stock configuration (wheel and
// side buttons never focus). Without a window manager nothing is done.
type pressKind int

const (
	pressDirect   pressKind = iota // no window manager involvement
	pressActivate                  // activate target first, then press
	pressWM                        // the window manager's own input: sync after the release
)

// pressTarget is what a press at the current pointer position needs.
type pressTarget struct {
	kind   pressKind
	client xproto.Window // for pressActivate
}

// focusButton reports whether a press of button focuses (see above).
func focusButton(button int) bool { return button >= ButtonLeft && button <= ButtonRight }

// classifyPress finds out where a press of button at the current pointer
// position lands. It runs under the input lane.
func (c *Conn) classifyPress(o *op, button int) (pressTarget, error) {
	if !focusButton(button) {
		return pressTarget{}, nil
	}
	if ok, err := c.wmPresent(o); err != nil || !ok {
		return pressTarget{}, err
	}
	var t pressTarget
	err := o.do(func() error {
		pc := xproto.QueryPointer(c.xc, c.root)
		ac := xproto.GetProperty(c.xc, false, c.root, c.atoms.netActiveWindow, xproto.AtomWindow, 0, 1)
		ptr, err := pc.Reply()
		act, aerr := ac.Reply()
		if err != nil {
			return err
		}
		if aerr != nil {
			return aerr
		}
		top := ptr.Child // the top-level window under the pointer: a frame, or unmanaged
		if top == 0 {
			return nil // the root window: nothing is bound there
		}
		var active xproto.Window
		if act.Format == 32 && len(act.Value) >= 4 {
			active = xproto.Window(xgb.Get32(act.Value))
		}
		under, err := xproto.QueryPointer(c.xc, top).Reply()
		if err != nil {
			return err
		}
		if under.Child != 0 && under.Child == active {
			return nil // the active client itself (Openbox reparents it into the frame)
		}
		// Which client, if any, does top frame?
		ids, managed, err := c.clientList()
		if err != nil || !managed {
			return err
		}
		if slices.Contains(ids, under.Child) {
			t = pressTarget{kind: pressActivate, client: under.Child}
			return nil
		}
		if slices.Contains(ids, top) {
			return nil // a managed window that is not reparented: its own
		}
		cookies := make([]xproto.QueryTreeCookie, len(ids))
		for i, id := range ids {
			cookies[i] = xproto.QueryTree(c.xc, id)
		}
		framed := false
		for _, ck := range cookies {
			r, err := ck.Reply()
			if err != nil {
				if isClosed(err) {
					return err
				}
				continue // the window went away
			}
			if r.Parent == top {
				framed = true
			}
		}
		if framed {
			// The pointer is on the frame but not on its client: a title
			// bar, a border or a frame button.
			t = pressTarget{kind: pressWM}
		}
		return nil
	})
	return t, err
}

// beforePress does what must happen before a press of button lands (see
// above) and reports whether the window manager must be waited for after
// the release.
func (c *Conn) beforePress(o *op, button int, what string) (syncAfter bool, err error) {
	t, err := c.classifyPress(o, button)
	if err != nil {
		return false, err
	}
	switch t.kind {
	case pressActivate:
		return false, c.activateSync(o, t.client, what)
	case pressWM:
		return true, nil
	}
	return false, nil
}

// activateSync asks the window manager to activate win and waits until it
// has handled the request and the focus change it made. Two probes: when
// the first is answered, the window manager has acted on the request (its
// SetInputFocus and restacking reached the server before its answer); the
// focus events that caused then reached it before the second probe, so when
// that is answered _NET_ACTIVE_WINDOW says what it made of them too.
func (c *Conn) activateSync(o *op, win xproto.Window, what string) error {
	err := o.do(func() error {
		c.requestActivate(win)
		return nil
	})
	if err == nil {
		err = c.wmSync(o, what)
	}
	if err == nil {
		err = c.wmSync(o, what)
	}
	return err
}

// requestActivate sends the EWMH _NET_ACTIVE_WINDOW request for win (source
// indication 2: a pager or a person), unchecked.
func (c *Conn) requestActivate(win xproto.Window) {
	ev := xproto.ClientMessageEvent{
		Format: 32,
		Window: win,
		Type:   c.atoms.netActiveWindow,
		Data:   xproto.ClientMessageDataUnionData32New([]uint32{2, 0, 0, 0, 0}),
	}
	xproto.SendEvent(c.xc, false, c.root,
		xproto.EventMaskSubstructureRedirect|xproto.EventMaskSubstructureNotify, string(ev.Bytes()))
}
