package x11

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/codegirl-games/agentbox/guest/xserver"
	"github.com/codegirl-games/agentbox/guest/xserver/xservertest"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/internal/xevents"
)

// testCtx returns a context that ends with the test (or after d).
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

type env struct {
	srv *xserver.Server
	c   *Conn
	wm  *xserver.WM // nil without a window manager
}

// newEnv starts Xvfb (and Openbox when wm), then opens a Conn, closed at the
// end of the test. The Conn is opened before the window manager, as the
// guest does.
func newEnv(t testing.TB, cfg xserver.Config, wm bool, opts ...Option) env {
	t.Helper()
	srv := xservertest.Start(t, cfg)
	c, err := Open(testCtx(t, 10*time.Second), srv.Display(), opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", srv.Display(), err)
	}
	t.Cleanup(func() { c.Close() })
	e := env{srv: srv, c: c}
	if wm {
		e.wm = xservertest.StartWM(t, srv.Display())
	}
	return e
}

// startApp runs an X client on display for the test, killed when the test
// ends, and returns its stdout; stderr goes to the test log.
func startApp(t testing.TB, display string, env []string, name string, args ...string) (*exec.Cmd, io.Reader) {
	t.Helper()
	testenv.Require(t, testenv.Programs(name))
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "DISPLAY="+display)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &testLog{t: t, prefix: name + ": "}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, out
}

type testLog struct {
	mu     sync.Mutex
	t      testing.TB
	prefix string
}

func (l *testLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer func() { _ = recover() }() // logging after the test ended panics
	l.t.Log(l.prefix + strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// xev runs `xev` with a unique title and parses what it prints.
type xev struct {
	title string
	win   Window
	mu    sync.Mutex
	cond  *sync.Cond
	evs   []xevents.Event
	raw   []string // xev's output lines since the last reset, for failures
	eof   bool
}

// startXev starts xev on display in a UTF-8 locale and waits for its window
// to be listed by c.
func startXev(t testing.TB, c *Conn, display string) *xev {
	t.Helper()
	return startXevAt(t, c, display, 20, 20, false)
}

// startXevAt starts xev with its 400×300 window at (wx, wy), printing focus
// events too when focus is set.
func startXevAt(t testing.TB, c *Conn, display string, wx, wy int, focus bool) *xev {
	t.Helper()
	testenv.Require(t, testenv.Programs("xev"))
	x := &xev{title: fmt.Sprintf("agentbox-xev-%d", time.Now().UnixNano())}
	x.cond = sync.NewCond(&x.mu)
	args := []string{"-oL", "xev", "-geometry", fmt.Sprintf("400x300+%d+%d", wx, wy), "-name", x.title,
		"-event", "keyboard", "-event", "button", "-event", "mouse"}
	if focus {
		args = append(args, "-event", "focus")
	}
	cmd, out := startApp(t, display, []string{"LC_ALL=C.UTF-8"}, "stdbuf", args...)
	go x.parse(out)
	// The size too: under load xev's window has been listed mapped at
	// 78×78 (its minimum size) before it got its 400×300, and a click
	// aimed by the first geometry missed it; once, with every core busy
	// and the whole suite running, Openbox left it at 78×78 for good. A
	// window not at its size 3 s after it was mapped is asked for it
	// again, as its client would.
	is := func(w Window) bool { return w.Title == x.title && w.Mapped && w.Width == 400 && w.Height == 300 }
	w, err := c.WaitWindow(testCtx(t, 20*time.Second), func(w Window) bool { return w.Title == x.title && w.Mapped })
	if err == nil && !is(w) {
		mapped := w
		w, err = c.WaitWindow(testCtx(t, 3*time.Second), is)
		if err != nil {
			t.Logf("xev's window is mapped at %d×%d, not 400×300, after 3 s: asking for its size again", mapped.Width, mapped.Height)
			xproto.ConfigureWindow(c.xc, xproto.Window(mapped.ID), xproto.ConfigWindowWidth|xproto.ConfigWindowHeight, []uint32{400, 300})
			w, err = c.WaitWindow(testCtx(t, 20*time.Second), is)
		}
	}
	if err != nil {
		ws, _ := c.Windows(testCtx(t, 5*time.Second))
		dc := exec.Command("sh", "-c", "xwininfo -root -tree | grep -v 'has no name'; xprop -root _NET_CLIENT_LIST _NET_ACTIVE_WINDOW; xwininfo -name "+x.title+" | grep -E 'Map State|Override'; xprop -name "+x.title+"; ps -o pid,stat,etimes,time,args -C openbox; cat /proc/"+strconv.Itoa(cmd.Process.Pid)+"/status | head -3")
		dc.Env = append(os.Environ(), "DISPLAY="+display)
		diag, _ := dc.CombinedOutput()
		t.Fatalf("xev window: %v\nWindows: %+v\n%s", err, ws, diag)
	}
	x.win = w
	return x
}

func (x *xev) parse(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	var p xevents.Parser
	publish := func(e *xevents.Event) {
		if e != nil {
			x.mu.Lock()
			x.evs = append(x.evs, *e)
			x.cond.Broadcast()
			x.mu.Unlock()
		}
	}
	for sc.Scan() {
		x.mu.Lock()
		x.raw = append(x.raw, sc.Text())
		x.mu.Unlock()
		publish(p.Line(sc.Text()))
	}
	publish(p.Flush())
	x.mu.Lock()
	x.eof = true
	x.cond.Broadcast()
	x.mu.Unlock()
}

// output returns xev's raw output since the last reset.
func (x *xev) output() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return strings.Join(x.raw, "\n")
}

// waitFor waits until pred holds for the events seen so far.
func (x *xev) waitFor(t testing.TB, what string, pred func([]xevents.Event) bool) []xevents.Event {
	t.Helper()
	ok := x.seen(10*time.Second, pred)
	x.mu.Lock()
	defer x.mu.Unlock()
	if !ok {
		t.Fatalf("xev: timed out waiting for %s; got %d events: %s", what, len(x.evs), summarize(x.evs))
	}
	return append([]xevents.Event(nil), x.evs...)
}

// seen reports whether pred comes to hold within d.
func (x *xev) seen(d time.Duration, pred func([]xevents.Event) bool) bool {
	deadline := time.Now().Add(d)
	timer := time.AfterFunc(d, func() {
		x.mu.Lock()
		x.cond.Broadcast()
		x.mu.Unlock()
	})
	defer timer.Stop()
	x.mu.Lock()
	defer x.mu.Unlock()
	for !pred(x.evs) {
		if x.eof || !time.Now().Before(deadline) {
			return false
		}
		x.cond.Wait()
	}
	return true
}

// reset forgets the events seen so far.
func (x *xev) reset() {
	x.mu.Lock()
	x.evs, x.raw = nil, nil
	x.mu.Unlock()
}

func count(evs []xevents.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func summarize(evs []xevents.Event) string {
	var sb strings.Builder
	for i, e := range evs {
		if i == 60 {
			sb.WriteString(" …")
			break
		}
		switch e.Type {
		case "KeyPress", "KeyRelease":
			fmt.Fprintf(&sb, " %s(%s/%#x)", e.Type, e.KeysymName, e.Keysym)
		case "ButtonPress", "ButtonRelease":
			fmt.Fprintf(&sb, " %s(%d@%d,%d)", e.Type, e.Button, e.RootX, e.RootY)
		default:
			sb.WriteString(" " + e.Type)
		}
	}
	return sb.String()
}

// focusXev activates the xev window and puts the pointer in it.
func focusXev(t testing.TB, c *Conn, x *xev) {
	t.Helper()
	ctx := testCtx(t, 10*time.Second)
	if err := c.Activate(ctx, x.win.ID); err != nil {
		t.Fatalf("Activate: %v", err)
	}
	cx, cy := x.win.X+x.win.Width/2, x.win.Y+x.win.Height/2
	if err := c.MouseMove(ctx, cx-1, cy-1); err != nil {
		t.Fatal(err)
	}
	if err := c.MouseMove(ctx, cx, cy); err != nil {
		t.Fatal(err)
	}
	// Wait until xev has processed everything so far: a motion event at the
	// pointer position shows the window is receiving.
	x.waitFor(t, "motion into the xev window", func(evs []xevents.Event) bool { return count(evs, "MotionNotify") > 0 })
	x.reset()
}

// serverInputState returns the keycodes the server reports as down and the
// pointer's modifier/button mask.
func serverInputState(t testing.TB, c *Conn) (down []int, mask uint16) {
	t.Helper()
	km, err := xproto.QueryKeymap(c.xc).Reply()
	if err != nil {
		t.Fatal(err)
	}
	for code := range len(km.Keys) * 8 {
		if km.Keys[code/8]&(1<<(code%8)) != 0 {
			down = append(down, code)
		}
	}
	p, err := xproto.QueryPointer(c.xc, c.root).Reply()
	if err != nil {
		t.Fatal(err)
	}
	return down, p.Mask
}

// client is a second, plain xgb connection (another X client).
func client(t testing.TB, display string) *xgb.Conn {
	t.Helper()
	xc, err := xgb.NewConnDisplay(display)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			if ev, err := xc.WaitForEvent(); ev == nil && err == nil {
				return
			}
		}
	}()
	t.Cleanup(xc.Close)
	return xc
}

// warmKeyboard types one key and waits until xev has seen it: Xlib loads
// the keyboard mapping when it handles its first key event. It then asks
// for mapping notifications only when it next waits for events, and on a
// loaded machine it may not have by the time it prints the key: the Conn's
// bind waits for that (TestKeyDownUnmappedKeysym binds right after this).
func warmKeyboard(t testing.TB, c *Conn, x *xev) {
	t.Helper()
	if err := c.TypeText(testCtx(t, 10*time.Second), "x", 0); err != nil {
		t.Fatal(err)
	}
	x.waitFor(t, "the warm-up key", func(evs []xevents.Event) bool { return count(evs, "KeyRelease") > 0 })
	x.reset()
}
