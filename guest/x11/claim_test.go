package x11

import (
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/codegirl-games/agentbox/guest/xserver"
)

// keyboardChanges counts the keyboard MappingNotify events an X client
// that never asked for XKB receives (the server tells such a client
// that way that the core keyboard changed).
type keyboardChanges struct {
	xc  *xgb.Conn
	got chan xproto.MappingNotifyEvent
}

func watchKeyboard(t *testing.T, display string) *keyboardChanges {
	t.Helper()
	xc, err := xgb.NewConnDisplay(display)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(xc.Close)
	w := &keyboardChanges{xc: xc, got: make(chan xproto.MappingNotifyEvent, 64)}
	go func() {
		for {
			ev, err := xc.WaitForEvent()
			if ev == nil && err == nil {
				return
			}
			if m, ok := ev.(xproto.MappingNotifyEvent); ok && m.Request == xproto.MappingKeyboard {
				w.got <- m
			}
		}
	}()
	return w
}

// since returns the keyboard changes the watcher received up to now: a
// round trip of its own first, so that whatever the server sent before
// has arrived.
func (w *keyboardChanges) since(t *testing.T) []xproto.MappingNotifyEvent {
	t.Helper()
	if _, err := xproto.GetInputFocus(w.xc).Reply(); err != nil {
		t.Fatal(err)
	}
	var evs []xproto.MappingNotifyEvent
	for {
		select {
		case m := <-w.got:
			evs = append(evs, m)
		case <-time.After(100 * time.Millisecond):
			return evs
		}
	}
}

// TestClaimKeyboard: the first XTEST key event switches the core
// keyboard's source device, and the server tells every client that the
// keyboard changed at that very key — an app reloading its keyboard state
// then can lose the first keys typed into it. ClaimKeyboard makes that
// switch before any app runs: afterwards typing tells clients nothing.
func TestClaimKeyboard(t *testing.T) {
	t.Run("unclaimed", func(t *testing.T) {
		e := newEnv(t, xserver.Config{}, false)
		w := watchKeyboard(t, e.srv.Display())
		w.since(t)
		if err := e.c.TypeText(testCtx(t, 10*time.Second), "ab", 0); err != nil {
			t.Fatal(err)
		}
		if evs := w.since(t); len(evs) == 0 {
			t.Errorf("typing on an unclaimed keyboard: no MappingNotify; the server no longer switches the source at the first key, and ClaimKeyboard may be moot")
		}
	})
	t.Run("claimed", func(t *testing.T) {
		e := newEnv(t, xserver.Config{}, false)
		w := watchKeyboard(t, e.srv.Display())
		ctx := testCtx(t, 10*time.Second)
		if err := e.c.ClaimKeyboard(ctx); err != nil {
			t.Fatal(err)
		}
		if evs := w.since(t); len(evs) == 0 {
			t.Errorf("claiming: no MappingNotify")
		}
		for _, text := range []string{"ab", "Ada Lovelace"} {
			if err := e.c.TypeText(ctx, text, 0); err != nil {
				t.Fatal(err)
			}
			if evs := w.since(t); len(evs) > 0 {
				t.Errorf("typing %q after the claim: %d MappingNotify events %+v", text, len(evs), evs)
			}
		}
	})
}
