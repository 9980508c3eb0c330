package x11

import (
	"sync/atomic"
	"time"

	"github.com/jezek/xgb/xproto"
)

// Window manager synchronisation.
//
// Openbox gives a clicked window the focus through a passive button grab in
// synchronous mode: on a press the pointer freezes until Openbox has handled
// the press and replayed it to the application. Events sent meanwhile are
// queued and get their coordinates when they are finally delivered, so a
// press-move-release sent quickly arrives at the application as a press and
// release at the end position (measured: the release of a click at A was
// reported at B when the pointer moved on to B at once). After sending a
// button press the Conn therefore waits until the window manager has handled
// everything before it: it asks for _NET_REQUEST_FRAME_EXTENTS on a hidden
// probe window, which Openbox answers from its event loop after the press,
// by setting _NET_FRAME_EXTENTS on the probe. Without a window manager, or
// with one that does not list _NET_REQUEST_FRAME_EXTENTS in _NET_SUPPORTED,
// there is nothing to wait for.

// wmSyncLimit bounds the wait for the window manager's answer. After
// wmSyncMisses unanswered probes in a row the window manager is not waited
// for any more, until it changes.
const (
	wmSyncLimit  = 250 * time.Millisecond
	wmSyncMisses = 3
)

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
	misses   int           // unanswered probes in a row; input lane only
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

// wmSync waits until the window manager has handled every event generated
// so far (see above). It returns an error only when o's context ends.
func (c *Conn) wmSync(o *op) error {
	w := &c.wm
	if w.state.Load() == wmUnknown {
		var supported bool
		err := o.do(func() error {
			var err error
			supported, err = c.wmSupportsProbe()
			return err
		})
		if err != nil {
			return err
		}
		if !supported {
			w.state.CompareAndSwap(wmUnknown, wmNone)
			return nil
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
				return err
			}
		}
		w.requests = w.answers.Load() // start counting afresh
		w.state.CompareAndSwap(wmUnknown, wmProbe)
	}
	if w.state.Load() != wmProbe {
		return nil
	}
	ev := xproto.ClientMessageEvent{
		Format: 32,
		Window: xproto.Window(w.probe.Load()),
		Type:   c.atoms.netRequestFrameExtents,
		Data:   xproto.ClientMessageDataUnionData32New(make([]uint32, 5)),
	}
	err := o.do(func() error {
		xproto.SendEvent(c.xc, false, c.root,
			xproto.EventMaskSubstructureRedirect|xproto.EventMaskSubstructureNotify, string(ev.Bytes()))
		return nil
	})
	if err != nil {
		return err
	}
	// The window manager answers requests in order, one property change
	// each, so when the answers catch up with the requests, ours (and with
	// it the press before it) has been handled, even if an earlier probe
	// timed out and its answer comes late.
	w.requests++
	t := time.NewTimer(wmSyncLimit)
	defer t.Stop()
	for w.answers.Load() < w.requests {
		select {
		case <-w.answer:
		case <-t.C:
			if w.misses++; w.misses >= wmSyncMisses {
				w.state.CompareAndSwap(wmProbe, wmNone)
			}
			return nil
		case <-o.ctx.Done():
			return ctxError(o.ctx, o.name)
		case <-c.closed:
			return ErrClosed
		}
	}
	w.misses = 0
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
