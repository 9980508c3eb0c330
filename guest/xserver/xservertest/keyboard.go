package xservertest

import (
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

// KeyboardWatch is an X client that never asked for XKB and counts the
// keyboard MappingNotify events it receives: the server tells such a
// client that way that the core keyboard changed (its mapping, or the
// device it follows).
type KeyboardWatch struct {
	xc     *xgb.Conn
	win    xproto.Window
	events chan xgb.Event
}

// WatchKeyboard connects a KeyboardWatch to display, closed when the
// test ends.
func WatchKeyboard(t testing.TB, display string) *KeyboardWatch {
	t.Helper()
	xc, err := xgb.NewConnDisplay(display)
	if err != nil {
		t.Fatalf("connect to %s: %v", display, err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		close(done) // before the close, so the reader never blocks on a full channel
		xc.Close()
	})
	w := &KeyboardWatch{xc: xc, events: make(chan xgb.Event, 256)}
	if w.win, err = xproto.NewWindowId(xc); err != nil {
		t.Fatal(err)
	}
	root := xproto.Setup(xc).DefaultScreen(xc).Root
	if err := xproto.CreateWindowChecked(xc, 0, w.win, root, 0, 0, 1, 1, 0, xproto.WindowClassInputOnly, 0,
		xproto.CwEventMask, []uint32{xproto.EventMaskPropertyChange}).Check(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(w.events)
		for {
			ev, err := xc.WaitForEvent()
			if ev == nil && err == nil {
				return
			}
			if ev != nil {
				select {
				case w.events <- ev:
				case <-done:
					return
				}
			}
		}
	}()
	return w
}

// Changes returns how many keyboard MappingNotify events arrived since the
// previous call. It changes a property of its own window and reads events
// until that change's PropertyNotify: the server sends a client's events
// in order, so every notice sent before has been read, however late this
// process runs.
func (w *KeyboardWatch) Changes(t testing.TB) int {
	t.Helper()
	if err := xproto.ChangePropertyChecked(w.xc, xproto.PropModeReplace, w.win, xproto.AtomWmName, xproto.AtomString, 8,
		4, []byte("mark")).Check(); err != nil {
		t.Fatal(err)
	}
	n := 0
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-w.events:
			if !ok {
				t.Fatal("the keyboard watch's connection closed")
			}
			switch e := ev.(type) {
			case xproto.MappingNotifyEvent:
				if e.Request == xproto.MappingKeyboard {
					n++
				}
			case xproto.PropertyNotifyEvent:
				// Each call reads up to its own mark's notice, so the
				// first on the window is this call's.
				if e.Window == w.win {
					return n
				}
			}
		case <-deadline:
			t.Fatal("the keyboard watch's mark did not come back within 30s")
		}
	}
}
