package x11

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jezek/xgb/xproto"
)

// Window manager synchronisation.
//
// Input never waits for the window manager on its way to an application:
// agentbox's Openbox configuration has no mouse binding in the client
// context, so Openbox holds no passive button grab on application windows
// and the pointer is never frozen (see press.go for why that matters and
// what replaces click-to-focus). The window manager still acts on some
// input — a press on an inactive window activates it first, a press on a
// title bar or border is Openbox's own — and there the Conn waits until the
// window manager has handled everything sent before: it asks for
// _NET_REQUEST_FRAME_EXTENTS on a hidden probe window, which Openbox answers
// from its event loop, in order, by setting _NET_FRAME_EXTENTS on the probe.
// The wait has no fixed limit of its own and never switches itself off: a
// late answer is waited for until the action's deadline, and no answer by
// then is ErrUnconfirmed, which the step reports. Without a window manager,
// or with one that does not list _NET_REQUEST_FRAME_EXTENTS in
// _NET_SUPPORTED, there is nothing to wait for.

const (
	wmUnknown int32 = iota // re-read _NET_SUPPORTING_WM_CHECK and _NET_SUPPORTED
	wmNone                 // nothing to synchronise with
	wmProbe                // the window manager answers the probe
)

// wmSyncState is shared between the input lane and the event goroutine.
type wmSyncState struct {
	state    atomic.Int32
	probe    atomic.Uint32 // the probe window, 0 until created
	answers  atomic.Uint64 // _NET_FRAME_EXTENTS settings seen on the probe
	answer   chan struct{} // receives after answers is incremented
	requests uint64        // probes sent; input lane only
}

// wmChanged is called by the event goroutine when the root window's
// _NET_SUPPORTING_WM_CHECK or _NET_SUPPORTED changes.
func (w *wmSyncState) wmChanged() { w.state.Store(wmUnknown) }

// answered is called by the event goroutine when the probe's
// _NET_FRAME_EXTENTS is set.
func (w *wmSyncState) answered() {
	w.answers.Add(1)
	select {
	case w.answer <- struct{}{}:
	default:
	}
}

// wmPresent reports whether a window manager that answers the probe runs,
// creating the probe window the first time.
func (c *Conn) wmPresent(o *op) (bool, error) {
	w := &c.wm
	if w.state.Load() == wmUnknown {
		var supported bool
		err := o.do(func() error {
			var err error
			supported, err = c.wmSupportsProbe()
			return err
		})
		if err != nil {
			return false, err
		}
		if !supported {
			w.state.CompareAndSwap(wmUnknown, wmNone)
			return false, nil
		}
		if w.probe.Load() == 0 {
			err := o.do(func() error {
				id, err := xproto.NewWindowId(c.xc)
				if err != nil {
					return err
				}
				err = xproto.CreateWindowChecked(c.xc, 0, id, c.root, -10, -10, 1, 1, 0,
					xproto.WindowClassInputOnly, 0, xproto.CwEventMask,
					[]uint32{xproto.EventMaskPropertyChange}).Check()
				if err != nil {
					return err
				}
				w.probe.Store(uint32(id))
				return nil
			})
			if err != nil {
				return false, err
			}
		}
		w.requests = w.answers.Load() // start counting afresh
		w.state.CompareAndSwap(wmUnknown, wmProbe)
	}
	return w.state.Load() == wmProbe, nil
}

// wmSync waits until the window manager has handled every event and request
// sent so far (see above). what names the input for the error. It returns
// ErrUnconfirmed (wrapped) when o's deadline passes first, and adds the time
// it waited to the Conn's confirmation time.
func (c *Conn) wmSync(o *op, what string) error {
	ok, err := c.wmPresent(o)
	if err != nil || !ok {
		return err
	}
	w := &c.wm
	ev := xproto.ClientMessageEvent{
		Format: 32,
		Window: xproto.Window(w.probe.Load()),
		Type:   c.atoms.netRequestFrameExtents,
		Data:   xproto.ClientMessageDataUnionData32New(make([]uint32, 5)),
	}
	t0 := time.Now()
	defer func() { c.confirmNS.Add(int64(time.Since(t0))) }()
	err = o.do(func() error {
		xproto.SendEvent(c.xc, false, c.root,
			xproto.EventMaskSubstructureRedirect|xproto.EventMaskSubstructureNotify, string(ev.Bytes()))
		return nil
	})
	if err != nil {
		return err
	}
	// The window manager answers requests in order, one property change
	// each, so when the answers catch up with the requests, ours (and with
	// it everything before it) has been handled, even if an earlier probe
	// went unanswered and its answer comes late.
	w.requests++
	for w.answers.Load() < w.requests {
		select {
		case <-w.answer:
		case <-o.ctx.Done():
			return fmt.Errorf("x11: %s: the window manager did not answer within %v: %w",
				what, time.Since(t0).Round(time.Millisecond), ErrUnconfirmed)
		case <-c.closed:
			return ErrClosed
		}
	}
	return nil
}

// wmSupportsProbe reports whether a window manager runs that lists
// _NET_REQUEST_FRAME_EXTENTS in _NET_SUPPORTED.
func (c *Conn) wmSupportsProbe() (bool, error) {
	check, err := xproto.GetProperty(c.xc, false, c.root, c.atoms.netSupportingWmCheck, xproto.AtomWindow, 0, 1).Reply()
	if err != nil {
		return false, err
	}
	if check.Format != 32 || check.ValueLen != 1 {
		return false, nil
	}
	sup, err := xproto.GetProperty(c.xc, false, c.root, c.atoms.netSupported, xproto.AtomAtom, 0, 4096).Reply()
	if err != nil {
		return false, err
	}
	for i := 0; sup.Format == 32 && i+4 <= len(sup.Value); i += 4 {
		v := sup.Value[i:]
		if xproto.Atom(uint32(v[0])|uint32(v[1])<<8|uint32(v[2])<<16|uint32(v[3])<<24) == c.atoms.netRequestFrameExtents {
			return true, nil
		}
	}
	return false, nil
}
