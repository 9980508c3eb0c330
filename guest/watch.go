package guest

import (
	"sync"
	"sync/atomic"

	"github.com/codegirl-games/agentbox/wire"
)

// screenWatch is the guest's side of wire.MethodWatch: while on, an
// EventScreen when the screen may have changed since the last screenshot
// answered — a DAMAGE report (x11.Conn.WatchDamage) or an action performed
// (a pointer move damages nothing; every move the guest makes is one of
// its actions). At most one event is outstanding: the next waits until a
// screenshot has been answered, so an animating app costs one event per
// look of the watcher, never a stream. An app moving the pointer itself
// (XWarpPointer) sends nothing: the watcher's backstop look catches it.
// Polling QueryPointer instead would wake the guest and the X server at
// its rate even while nothing happens, which is what watching replaces.
type screenWatch struct {
	mu   sync.Mutex
	stop func() // ends the running watch; nil while off

	on          atomic.Bool
	outstanding atomic.Bool // an event was sent and no screenshot answered since
}

// watch turns screen events on or off.
func (g *Guest) watch(req wire.WatchRequest) (wire.WatchResponse, error) {
	if g.x == nil {
		return wire.WatchResponse{}, wire.Errorf(wire.CodeInvalid, "watch: the display is not up")
	}
	w := &g.sw
	w.mu.Lock()
	defer w.mu.Unlock()
	resp := wire.WatchResponse{Damage: g.x.Damage()}
	if !req.On || !resp.Damage {
		if w.stop != nil {
			w.stop()
			w.stop = nil
		}
		return resp, nil
	}
	if w.stop != nil {
		return resp, nil
	}
	changed, unsubscribe := g.x.WatchDamage()
	quit := make(chan struct{})
	w.stop = func() {
		w.on.Store(false)
		unsubscribe()
		close(quit)
	}
	w.outstanding.Store(false)
	w.on.Store(true)
	go func() {
		for {
			select {
			case <-changed:
				g.screenChanged()
			case <-quit:
				return
			case <-g.conn.Done():
				return
			}
		}
	}()
	return resp, nil
}

// screenChanged sends EventScreen while watched, unless one is
// outstanding.
func (g *Guest) screenChanged() {
	w := &g.sw
	if !w.on.Load() || w.outstanding.Swap(true) {
		return
	}
	if err := g.conn.Notify(wire.EventScreen, nil, nil); err != nil {
		w.outstanding.Store(false)
	}
}

// screenLooked re-arms the screen event: called before a screenshot
// captures, so that a change after its capture is reported again.
func (g *Guest) screenLooked() { g.sw.outstanding.Store(false) }
