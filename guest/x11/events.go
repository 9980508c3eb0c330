package x11

import (
	"github.com/jezek/xgb/damage"
	"github.com/jezek/xgb/xproto"
)

// drainEvents reads every event and asynchronous error off the connection
// for as long as it is open: xgb stops delivering replies when its event
// buffer is full, so something must always read. It never sends requests or
// waits for replies itself.
func (c *Conn) drainEvents() {
	defer close(c.eventsDone)
	defer c.closeShared()
	defer c.markClosed()
	defer c.notify()
	defer c.notifyDamage()
	for {
		ev, xerr := c.xc.WaitForEvent()
		if ev == nil && xerr == nil {
			return // connection closed
		}
		if ev == nil {
			// An error for an unchecked request, e.g. BadWindow when selecting
			// events on a window that was destroyed meanwhile. Nothing waits
			// for it.
			continue
		}
		switch e := ev.(type) {
		case xproto.PropertyNotifyEvent:
			if e.Window == c.root {
				switch e.Atom {
				case c.atoms.netClientList, c.atoms.netActiveWindow:
					c.notify()
				case c.atoms.netSupportingWmCheck, c.atoms.netSupported:
					c.wm.wmChanged()
				}
			} else if uint32(e.Window) == c.wm.probe.Load() {
				if e.Atom == c.atoms.netFrameExtents {
					c.wm.answered()
				}
			} else if e.Atom == xproto.AtomWmName || e.Atom == c.atoms.netWmName || e.Atom == c.atoms.wmState {
				c.notify()
			}
		case damage.NotifyEvent:
			c.notifyDamage()
		case xproto.MappingNotifyEvent:
			c.kb.mappingChanged(e)
		case xproto.CreateNotifyEvent:
			if e.Parent == c.root {
				c.queueSelect(e.Window)
				c.notify()
			}
		case xproto.MapNotifyEvent, xproto.UnmapNotifyEvent, xproto.DestroyNotifyEvent, xproto.ReparentNotifyEvent,
			xproto.ConfigureNotifyEvent: // geometry: a window can be mapped before it has its size
			c.notify()
		}
	}
}

// queueSelect asks selectWindows to watch win's properties. When the queue is
// full the window is dropped; Windows selects on every window it lists anyway.
func (c *Conn) queueSelect(win xproto.Window) {
	select {
	case c.selectq <- win:
	default:
	}
}

// clientEventMask is selected on top-level and client windows: title and
// WM_STATE changes (PropertyChange), map and unmap (StructureNotify).
const clientEventMask = xproto.EventMaskPropertyChange | xproto.EventMaskStructureNotify

// selectWindows selects clientEventMask on windows queued by drainEvents.
// The requests are unchecked (no reply to wait for); it runs in its own
// goroutine because sending can block while the server is grabbed.
func (c *Conn) selectWindows() {
	for {
		select {
		case win := <-c.selectq:
			xproto.ChangeWindowAttributes(c.xc, win, xproto.CwEventMask, []uint32{clientEventMask})
		case <-c.closed:
			return
		}
	}
}

// subscriber is one WatchWindows channel.
type subscriber struct{ ch chan struct{} }

// WindowsChanged returns the Conn's shared change channel: it receives like a
// WatchWindows channel and is closed when the Conn closes, so
//
//	for range c.WindowsChanged() { refresh() }
//
// ends with the connection. Every call returns the same channel, so it suits
// one consumer; use WatchWindows for more.
func (c *Conn) WindowsChanged() <-chan struct{} {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	if c.shared == nil {
		c.shared = &subscriber{ch: make(chan struct{}, 1)}
		if c.isClosed() {
			close(c.shared.ch)
		} else {
			c.subs[c.shared] = struct{}{}
		}
	}
	return c.shared.ch
}

// closeShared closes the WindowsChanged channel; called once the event
// goroutine has stopped.
func (c *Conn) closeShared() {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	if c.shared != nil {
		if _, ok := c.subs[c.shared]; ok {
			delete(c.subs, c.shared)
			close(c.shared.ch)
		}
	}
}

// WatchWindows returns a channel that receives a value whenever the set of
// windows, their mapping, the active window or a window title may have
// changed: _NET_CLIENT_LIST or _NET_ACTIVE_WINDOW on the root window, WM_NAME,
// _NET_WM_NAME or WM_STATE on a window, and creation, map, unmap, reparent or
// destruction of top-level windows. Notifications coalesce (the channel has a
// buffer of one), so after a receive call Windows to see the current state.
// The channel also receives when the Conn closes. Call stop to unsubscribe.
func (c *Conn) WatchWindows() (changed <-chan struct{}, stop func()) {
	s := &subscriber{ch: make(chan struct{}, 1)}
	c.subMu.Lock()
	c.subs[s] = struct{}{}
	c.subMu.Unlock()
	return s.ch, func() {
		c.subMu.Lock()
		delete(c.subs, s)
		c.subMu.Unlock()
	}
}

// notify wakes every subscriber without blocking.
func (c *Conn) notify() {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	for s := range c.subs {
		select {
		case s.ch <- struct{}{}:
		default:
		}
	}
}
