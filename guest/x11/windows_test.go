package x11

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/codegirl-games/agentbox/guest/xserver"
)

func TestWindowsXterm(t *testing.T) {
	for _, wm := range []bool{true, false} {
		t.Run(fmt.Sprintf("wm=%v", wm), func(t *testing.T) {
			e := newEnv(t, xserver.Config{}, wm)
			changed, stop := e.c.WatchWindows()
			defer stop()
			title := fmt.Sprintf("agentbox term %d", time.Now().UnixNano())
			// The C locale: xterm sets only WM_NAME, no _NET_WM_NAME.
			startApp(t, e.srv.Display(), []string{"LANG=C", "LC_ALL=C"}, "xterm", "-T", title)
			ctx := testCtx(t, 30*time.Second)
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatal("WatchWindows did not fire when xterm started")
			}
			w, err := e.c.WaitWindow(ctx, func(w Window) bool { return w.Title == title && w.Mapped })
			if err != nil {
				wins, _ := e.c.Windows(testCtx(t, 5*time.Second))
				t.Fatalf("WaitWindow: %v; windows: %+v", err, wins)
			}
			if w.Class != "XTerm" || w.Instance != "xterm" {
				t.Errorf("WM_CLASS %q %q", w.Instance, w.Class)
			}
			if w.Width < 100 || w.Height < 50 || w.X < 0 || w.Y < 0 {
				t.Errorf("geometry %dx%d+%d+%d", w.Width, w.Height, w.X, w.Y)
			}
			net, err := xproto.GetProperty(e.c.xc, false, xproto.Window(w.ID), e.c.atoms.netWmName, xproto.GetPropertyTypeAny, 0, 64).Reply()
			if err != nil {
				t.Fatal(err)
			}
			if net.ValueLen != 0 {
				t.Logf("xterm set _NET_WM_NAME %q; the WM_NAME fallback is covered by TestWindowTitles", net.Value)
			}
			if wm {
				if !w.Focused {
					t.Errorf("new xterm not focused under the window manager")
				}
				id, err := e.c.ActiveWindow(ctx)
				if err != nil || id != w.ID {
					t.Errorf("ActiveWindow = %#x, %v; want %#x", id, err, w.ID)
				}
			}
		})
	}
}

// rawWindow creates a top-level window with the given properties on xc
// and maps it.
func rawWindow(t *testing.T, xc *xgb.Conn, x, y, w, h int, props map[xproto.Atom]prop) xproto.Window {
	t.Helper()
	scr := xproto.Setup(xc).DefaultScreen(xc)
	wid, err := xproto.NewWindowId(xc)
	if err != nil {
		t.Fatal(err)
	}
	err = xproto.CreateWindowChecked(xc, scr.RootDepth, wid, scr.Root, int16(x), int16(y), uint16(w), uint16(h), 0,
		xproto.WindowClassInputOutput, scr.RootVisual, xproto.CwBackPixel, []uint32{0x336699}).Check()
	if err != nil {
		t.Fatal(err)
	}
	for a, p := range props {
		setProp(t, xc, wid, a, p)
	}
	if err := xproto.MapWindowChecked(xc, wid).Check(); err != nil {
		t.Fatal(err)
	}
	return wid
}

type prop struct {
	typ xproto.Atom
	val []byte
}

func setProp(t *testing.T, xc *xgb.Conn, win xproto.Window, a xproto.Atom, p prop) {
	t.Helper()
	err := xproto.ChangePropertyChecked(xc, xproto.PropModeReplace, win, a, p.typ, 8, uint32(len(p.val)), p.val).Check()
	if err != nil {
		t.Fatal(err)
	}
}

func TestWindowTitles(t *testing.T) {
	for _, wm := range []bool{false, true} {
		t.Run(fmt.Sprintf("wm=%v", wm), func(t *testing.T) {
			e := newEnv(t, xserver.Config{}, wm)
			xc := client(t, e.srv.Display())
			changed, stop := e.c.WatchWindows()
			defer stop()
			utf8 := e.c.atoms.utf8String
			latin := rawWindow(t, xc, 10, 10, 100, 80, map[xproto.Atom]prop{
				xproto.AtomWmName:  {xproto.AtomString, []byte("Fen\xeatre")}, // Latin-1
				xproto.AtomWmClass: {xproto.AtomString, []byte("inst\x00Klasse\x00")},
			})
			both := rawWindow(t, xc, 150, 10, 100, 80, map[xproto.Atom]prop{
				xproto.AtomWmName:   {xproto.AtomString, []byte("fallback")},
				e.c.atoms.netWmName: {utf8, []byte("日本 ✓")},
			})
			ctx := testCtx(t, 20*time.Second)
			find := func(id xproto.Window, want string) Window {
				t.Helper()
				w, err := e.c.WaitWindow(ctx, func(w Window) bool { return w.ID == uint32(id) && w.Title == want && w.Mapped })
				if err != nil {
					wins, _ := e.c.Windows(testCtx(t, 5*time.Second))
					t.Fatalf("window %#x with title %q: %v; windows %+v", id, want, err, wins)
				}
				return w
			}
			w := find(latin, "Fenêtre")
			if w.Instance != "inst" || w.Class != "Klasse" {
				t.Errorf("WM_CLASS %q %q", w.Instance, w.Class)
			}
			find(both, "日本 ✓")

			// A title change is notified and seen.
			for len(changed) > 0 {
				<-changed
			}
			setProp(t, xc, latin, xproto.AtomWmName, prop{xproto.AtomString, []byte("renamed")})
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatal("no notification for a WM_NAME change")
			}
			find(latin, "renamed")
			setProp(t, xc, both, e.c.atoms.netWmName, prop{utf8, []byte("neu ✓")})
			find(both, "neu ✓")

			// Unmapping is notified and the window leaves the list.
			for len(changed) > 0 {
				<-changed
			}
			if err := xproto.UnmapWindowChecked(xc, latin).Check(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatal("no notification for an unmap")
			}
			_, err := e.c.WaitWindow(ctx, func(Window) bool {
				wins, _ := e.c.Windows(ctx)
				for _, w := range wins {
					if w.ID == uint32(latin) && w.Mapped {
						return false
					}
				}
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestActivate(t *testing.T) {
	for _, wm := range []bool{true, false} {
		t.Run(fmt.Sprintf("wm=%v", wm), func(t *testing.T) {
			e := newEnv(t, xserver.Config{}, wm)
			xc := client(t, e.srv.Display())
			a := rawWindow(t, xc, 10, 10, 200, 150, map[xproto.Atom]prop{xproto.AtomWmName: {xproto.AtomString, []byte("A")}})
			b := rawWindow(t, xc, 250, 10, 200, 150, map[xproto.Atom]prop{xproto.AtomWmName: {xproto.AtomString, []byte("B")}})
			ctx := testCtx(t, 20*time.Second)
			for _, id := range []xproto.Window{a, b} {
				if _, err := e.c.WaitWindow(ctx, func(w Window) bool { return w.ID == uint32(id) && w.Mapped }); err != nil {
					t.Fatal(err)
				}
			}
			if wm {
				// Openbox focuses new windows; let it finish with b first.
				if _, err := e.c.WaitWindow(ctx, func(w Window) bool { return w.ID == uint32(b) && w.Focused }); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range []xproto.Window{a, b, a} {
				if err := e.c.Activate(ctx, uint32(id)); err != nil {
					t.Fatalf("Activate(%#x): %v", id, err)
				}
				active, err := e.c.ActiveWindow(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if active != uint32(id) {
					t.Errorf("after Activate(%#x) ActiveWindow = %#x", id, active)
				}
				wins, err := e.c.Windows(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range wins {
					if (w.ID == uint32(id)) != w.Focused && (w.ID == uint32(a) || w.ID == uint32(b)) {
						t.Errorf("after Activate(%#x): window %#x Focused=%v", id, w.ID, w.Focused)
					}
				}
			}
		})
	}
}

func TestWindowsChangedClosedOnClose(t *testing.T) {
	e := newEnv(t, xserver.Config{}, false)
	ch := e.c.WindowsChanged()
	if ch != e.c.WindowsChanged() {
		t.Fatal("WindowsChanged returns different channels")
	}
	e.c.Close()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				if _, err := e.c.Windows(t.Context()); !errors.Is(err, ErrClosed) {
					t.Fatalf("Windows after Close: %v", err)
				}
				return
			}
		case <-timeout:
			t.Fatal("WindowsChanged channel not closed by Close")
		}
	}
}
