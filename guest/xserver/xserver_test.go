package xserver_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/codegirl-games/agentbox/guest/xserver"
	"github.com/codegirl-games/agentbox/guest/xserver/xservertest"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// connect opens a plain xgb connection to s (not through package x11).
func connect(t testing.TB, display string) *xgb.Conn {
	t.Helper()
	xc, err := xgb.NewConnDisplay(display)
	if err != nil {
		t.Fatalf("connect to %s: %v", display, err)
	}
	t.Cleanup(xc.Close)
	go func() {
		for {
			if ev, err := xc.WaitForEvent(); ev == nil && err == nil {
				return
			}
		}
	}()
	return xc
}

func TestStartStop(t *testing.T) {
	s := xservertest.Start(t, xserver.Config{Width: 320, Height: 200})
	if !strings.HasPrefix(s.Display(), ":") || s.Display() != ":"+itoa(s.Number()) {
		t.Fatalf("Display() = %q, Number() = %d", s.Display(), s.Number())
	}
	if fi, err := os.Stat(s.SocketPath()); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket %s: %v %v", s.SocketPath(), fi, err)
	}
	t.Logf("Xvfb %s ready after %v", s.Display(), s.ReadyAfter())

	xc := connect(t, s.Display())
	scr := xproto.Setup(xc).DefaultScreen(xc)
	if scr.WidthInPixels != 320 || scr.HeightInPixels != 200 || scr.RootDepth != 24 {
		t.Fatalf("screen %dx%d depth %d, want 320x200 depth 24", scr.WidthInPixels, scr.HeightInPixels, scr.RootDepth)
	}
	for _, ext := range []string{"XTEST", "MIT-SHM"} {
		r, err := xproto.QueryExtension(xc, uint16(len(ext)), ext).Reply()
		if err != nil || !r.Present {
			t.Errorf("extension %s missing: %v", ext, err)
		}
	}

	if err := s.Stop(ctxT(t, 5*time.Second)); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	if err := s.Stop(ctxT(t, time.Second)); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := os.Stat(s.SocketPath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket still there after Stop: %v", err)
	}
}

func TestTwoServersGetDifferentDisplays(t *testing.T) {
	a := xservertest.Start(t, xserver.Config{})
	b := xservertest.Start(t, xserver.Config{})
	if a.Display() == b.Display() {
		t.Fatalf("both servers on %s", a.Display())
	}
	// Both must answer on their own socket.
	for _, s := range []*xserver.Server{a, b} {
		xc := connect(t, s.Display())
		if _, err := xproto.GetInputFocus(xc).Reply(); err != nil {
			t.Fatalf("%s: %v", s.Display(), err)
		}
	}
}

func TestExplicitDisplayInUse(t *testing.T) {
	a := xservertest.Start(t, xserver.Config{})
	if a.Number() == 0 {
		// Display 0 means "any"; take a second server, which is not :0.
		a = xservertest.Start(t, xserver.Config{})
	}
	_, err := xserver.Start(ctxT(t, 20*time.Second), xserver.Config{Display: a.Number()})
	if err == nil {
		t.Fatal("second server on the same display started")
	}
	if !errors.Is(err, xserver.ErrNotReady) || !strings.Contains(err.Error(), "already") {
		t.Fatalf("error = %v; want ErrNotReady with Xvfb's stderr", err)
	}
	// The first server must be unharmed (its socket not stolen).
	xc := connect(t, a.Display())
	if _, err := xproto.GetInputFocus(xc).Reply(); err != nil {
		t.Fatalf("first server broken: %v", err)
	}
}

func TestStartErrors(t *testing.T) {
	testenv.Require(t, testenv.Programs("Xvfb"))
	if _, err := xserver.Start(ctxT(t, time.Second), xserver.Config{RuntimeDir: "/run/x"}); !errors.Is(err, xserver.ErrRuntimeDir) {
		t.Errorf("RuntimeDir /run/x: %v", err)
	}
	if _, err := xserver.Start(ctxT(t, time.Second), xserver.Config{Xvfb: "no-such-xvfb"}); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("missing Xvfb: %v", err)
	}
	_, err := xserver.Start(ctxT(t, 10*time.Second), xserver.Config{ExtraArgs: []string{"-no-such-flag"}})
	if !errors.Is(err, xserver.ErrNotReady) || !strings.Contains(err.Error(), "no-such-flag") {
		t.Errorf("bad flag: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := xserver.Start(ctx, xserver.Config{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
}

func TestStartWM(t *testing.T) {
	s := xservertest.Start(t, xserver.Config{})
	xc := connect(t, s.Display())
	wm := xservertest.StartWM(t, s.Display())
	t.Logf("openbox ready after %v (config %s)", wm.ReadyAfter(), wm.ConfigFile())

	root := xproto.Setup(xc).DefaultScreen(xc).Root
	const name = "_NET_SUPPORTING_WM_CHECK"
	a, err := xproto.InternAtom(xc, true, uint16(len(name)), name).Reply()
	if err != nil {
		t.Fatal(err)
	}
	p, err := xproto.GetProperty(xc, false, root, a.Atom, xproto.AtomWindow, 0, 1).Reply()
	if err != nil || p.ValueLen != 1 {
		t.Fatalf("_NET_SUPPORTING_WM_CHECK not set: %v %+v", err, p)
	}
	if _, err := os.Stat(wm.ConfigFile()); err != nil {
		t.Fatal(err)
	}

	// A second window manager on the same screen fails with Openbox's reason.
	_, err = xserver.StartWM(ctxT(t, 10*time.Second), s.Display(), xserver.WMConfig{})
	if err == nil || !strings.Contains(err.Error(), "window manager") {
		t.Errorf("second openbox: %v", err)
	}

	if err := wm.Stop(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wm.Done():
	default:
		t.Fatal("openbox still running after Stop")
	}
}

func TestStartWMTempConfigRemoved(t *testing.T) {
	s := xservertest.Start(t, xserver.Config{})
	testenv.Require(t, testenv.Programs("openbox"))
	wm, err := xserver.StartWM(ctxT(t, xservertest.StartTimeout), s.Display(), xserver.WMConfig{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(wm.ConfigFile())
	if err := wm.Stop(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary config dir %s left behind: %v", dir, err)
	}
}

func TestNoWM(t *testing.T) {
	s := xservertest.Start(t, xserver.Config{})
	t.Setenv("PATH", t.TempDir()) // a PATH without openbox
	_, err := xserver.StartWM(ctxT(t, 5*time.Second), s.Display(), xserver.WMConfig{})
	if !errors.Is(err, xserver.ErrNoWM) || !errors.Is(err, exec.ErrNotFound) {
		t.Fatalf("StartWM without openbox: %v; want ErrNoWM", err)
	}
}

func TestStartWMBadDisplay(t *testing.T) {
	testenv.Require(t, testenv.Programs("openbox"))
	// A display number nobody serves: the dial fails before openbox starts.
	dir := t.TempDir()
	_, err := xserver.StartWM(ctxT(t, 5*time.Second), ":65000", xserver.WMConfig{Dir: dir})
	var op *net.OpError
	if err == nil || !errors.As(err, &op) {
		t.Fatalf("StartWM on a missing display: %v", err)
	}
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}

// TestWMManagesWindowMappedAtOnce maps a window the moment StartWM returns,
// as the guest does with the app, and expects Openbox to manage it (reparent
// it into a frame). Openbox 3.6 can lose such a window when StartWM returns
// on _NET_SUPPORTING_WM_CHECK alone.
func TestWMManagesWindowMappedAtOnce(t *testing.T) {
	testenv.Require(t, testenv.Programs("openbox"))
	for i := range 8 {
		s := xservertest.Start(t, xserver.Config{})
		xc := connect(t, s.Display())
		root := xproto.Setup(xc).DefaultScreen(xc).Root
		wm := xservertest.StartWM(t, s.Display())

		wid, err := xproto.NewWindowId(xc)
		if err != nil {
			t.Fatal(err)
		}
		err = xproto.CreateWindowChecked(xc, 0, wid, root, 10, 10, 100, 100, 0, xproto.WindowClassInputOutput, 0,
			xproto.CwEventMask, []uint32{xproto.EventMaskStructureNotify}).Check()
		if err != nil {
			t.Fatal(err)
		}
		if err := xproto.MapWindowChecked(xc, wid).Check(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			tree, err := xproto.QueryTree(xc, wid).Reply()
			if err != nil {
				t.Fatal(err)
			}
			if tree.Parent != root {
				break // reparented into a frame: managed
			}
			if time.Now().After(deadline) {
				t.Fatalf("start %d: window not managed 5 s after StartWM returned", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
		_ = wm.Stop(ctxT(t, 5*time.Second))
		_ = s.Stop(ctxT(t, 5*time.Second))
	}
}
