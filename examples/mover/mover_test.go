//go:build linux

package main

// These tests run the real mover binary against a private Xvfb and drive it
// with XTEST, the same way agentbox does inside its container.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"
)

const screenW, screenH = 640, 480

func TestMain(m *testing.M) {
	// Test connections are torn down by killing Xvfb; keep xgb quiet about it.
	xgb.Logger = log.New(io.Discard, "", 0)
	os.Exit(m.Run())
}

// xvfb is a private X server.
type xvfb struct {
	display string
	cmd     *exec.Cmd
}

// startXvfb starts Xvfb on a free display (Xvfb picks it and reports it
// through -displayfd) and stops it when the test ends.
func startXvfb(t *testing.T) *xvfb {
	t.Helper()
	testenv.Require(t, testenv.Programs("Xvfb"))
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	logPath := filepath.Join(t.TempDir(), "xvfb.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command("Xvfb", "-displayfd", "3", "-screen", "0",
		fmt.Sprintf("%dx%dx24", screenW, screenH), "-nolisten", "tcp")
	cmd.ExtraFiles = []*os.File{w} // becomes fd 3
	// If the test binary dies without running cleanups (timeout panic,
	// SIGKILL), the kernel still stops Xvfb.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(cmd) })

	// Xvfb writes "N\n" once it accepts connections; EOF means it died.
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case n := <-got:
		if n == "" {
			out, _ := os.ReadFile(logPath)
			t.Fatalf("Xvfb exited before reporting its display:\n%s", out)
		}
		return &xvfb{display: ":" + n, cmd: cmd}
	case <-time.After(20 * time.Second):
		t.Fatal("Xvfb did not report its display within 20s")
	}
	return nil
}

// stop ends a process politely (SIGTERM lets Xvfb remove its lock file),
// then forcibly, and reaps it.
func stop(cmd *exec.Cmd) {
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// mover is a running mover process.
type mover struct {
	cmd    *exec.Cmd
	lines  chan string // stdout lines; closed at EOF
	seen   []string    // lines consumed by waitLine
	stderr bytes.Buffer
	done   chan struct{} // closed when the process has been reaped
	err    error         // Wait's result, valid after done
}

// startMover builds the mover into a temp dir and runs it on display.
func startMover(t *testing.T, display string, env []string, args ...string) *mover {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mover")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	m := &mover{lines: make(chan string, 1000), done: make(chan struct{})}
	m.cmd = exec.Command(bin, args...)
	m.cmd.Env = append(append(os.Environ(), "DISPLAY="+display), env...)
	m.cmd.Stderr = &m.stderr
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		for sc := bufio.NewScanner(stdout); sc.Scan(); {
			m.lines <- sc.Text()
		}
		close(m.lines)
		m.err = m.cmd.Wait() // only after stdout is drained
		close(m.done)
	}()
	t.Cleanup(func() {
		select {
		case <-m.done:
		default:
			m.cmd.Process.Kill()
			<-m.done
		}
	})
	return m
}

// waitLine returns the next stdout line starting with prefix, skipping others.
func (m *mover) waitLine(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-m.lines:
			if !ok {
				<-m.done
				t.Fatalf("mover exited (%v) before printing %q; stdout %q; stderr:\n%s", m.err, prefix, m.seen, m.stderr.String())
			}
			m.seen = append(m.seen, l)
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-timeout:
			t.Fatalf("no %q line within 10s; stdout so far %q", prefix, m.seen)
		}
	}
}

// wait waits for the process to exit and returns its exit code.
func (m *mover) wait(t *testing.T) int {
	t.Helper()
	for l := range m.lines {
		m.seen = append(m.seen, l)
	}
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("mover did not exit; stdout %q", m.seen)
	}
	var ee *exec.ExitError
	if errors.As(m.err, &ee) {
		return ee.ExitCode()
	}
	if m.err != nil {
		t.Fatal(m.err)
	}
	return 0
}

// client is the test's own X connection, standing in for agentbox.
type client struct {
	conn *xgb.Conn
	root xproto.Window
}

func dial(t *testing.T, display string) *client {
	t.Helper()
	conn, err := xgb.NewConnDisplay(display)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	if err := xtest.Init(conn); err != nil {
		t.Fatal(err)
	}
	return &client{conn: conn, root: xproto.Setup(conn).DefaultScreen(conn).Root}
}

// keycode returns the first keycode bound to sym.
func (c *client) keycode(t *testing.T, sym xproto.Keysym) xproto.Keycode {
	t.Helper()
	s := xproto.Setup(c.conn)
	r, err := xproto.GetKeyboardMapping(c.conn, s.MinKeycode, byte(s.MaxKeycode-s.MinKeycode+1)).Reply()
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range r.Keysyms {
		if k == sym {
			return s.MinKeycode + xproto.Keycode(i/int(r.KeysymsPerKeycode))
		}
	}
	t.Fatalf("no keycode for keysym %#x", sym)
	return 0
}

// key presses or releases a key with XTEST and waits until the server has
// processed it.
func (c *client) key(t *testing.T, code xproto.Keycode, down bool) {
	t.Helper()
	typ := byte(xproto.KeyRelease)
	if down {
		typ = xproto.KeyPress
	}
	if err := xtest.FakeInputChecked(c.conn, typ, byte(code), 0, c.root, 0, 0, 0).Check(); err != nil {
		t.Fatal(err)
	}
	if _, err := xproto.GetInputFocus(c.conn).Reply(); err != nil {
		t.Fatal(err)
	}
}

// greenCentroid screenshots the root window and returns the centroid and
// count of green pixels (the square).
func (c *client) greenCentroid(t *testing.T) (x, y float64, n int) {
	t.Helper()
	img, err := xproto.GetImage(c.conn, xproto.ImageFormatZPixmap, xproto.Drawable(c.root),
		0, 0, screenW, screenH, 0xffffffff).Reply()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+3 < len(img.Data) && i/4 < screenW*screenH; i += 4 {
		b, g, r := img.Data[i], img.Data[i+1], img.Data[i+2] // BGRX
		if g > 180 && r < 80 && b < 80 {
			x += float64(i / 4 % screenW)
			y += float64(i / 4 / screenW)
			n++
		}
	}
	if n == 0 {
		t.Fatal("no green pixels on screen")
	}
	return x / float64(n), y / float64(n), n
}

// findWindow returns the top-level window whose WM_NAME is name, or 0.
func (c *client) findWindow(t *testing.T, name string) xproto.Window {
	t.Helper()
	tree, err := xproto.QueryTree(c.conn, c.root).Reply()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range tree.Children {
		if c.prop(t, w, xproto.AtomWmName) == name {
			return w
		}
	}
	return 0
}

// prop returns a window property's raw value as a string.
func (c *client) prop(t *testing.T, w xproto.Window, atom xproto.Atom) string {
	t.Helper()
	r, err := xproto.GetProperty(c.conn, false, w, atom, xproto.GetPropertyTypeAny, 0, 1024).Reply()
	if err != nil {
		t.Fatal(err)
	}
	return string(r.Value)
}

func (c *client) atom(t *testing.T, name string) xproto.Atom {
	t.Helper()
	r, err := xproto.InternAtom(c.conn, false, uint16(len(name)), name).Reply()
	if err != nil {
		t.Fatal(err)
	}
	return r.Atom
}

// TestHoldRight holds Right for one second and checks how far the square went.
func TestHoldRight(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   []string
		args  []string
		speed float64 // pixels a second
	}{
		{"speed200", nil, nil, 200},
		{"speed100", nil, []string{"-speed", "100"}, 100},
		{"MOVER_SPEED=100", []string{"MOVER_SPEED=100"}, nil, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			x := startXvfb(t)
			c := dial(t, x.display)
			right := c.keycode(t, 0xff53)
			m := startMover(t, x.display, tc.env, tc.args...)
			m.waitLine(t, "mover: ready 640x480")

			x0, y0, n := c.greenCentroid(t)
			if n != squareSize*squareSize || x0 != 59.5 || y0 != 239.5 {
				t.Fatalf("initial square: centroid (%v,%v) of %d px, want (59.5,239.5) of 1600", x0, y0, n)
			}
			c.key(t, right, true)
			start := time.Now()
			m.waitLine(t, "mover: key Right down")
			// Watch it move for a second: every frame shows the whole
			// square (no tearing) and it never goes backwards.
			x1, y1, frames := x0, y0, 0
			for time.Since(start) < time.Second {
				time.Sleep(20 * time.Millisecond)
				x, y, n := c.greenCentroid(t)
				if n != squareSize*squareSize || x < x1 || y != y0 {
					t.Fatalf("frame %d: centroid (%v,%v) of %d px after (%v,%v)", frames, x, y, n, x1, y1)
				}
				x1, y1 = x, y
				frames++
			}
			held := time.Since(start)
			c.key(t, right, false)
			m.waitLine(t, "mover: key Right up")
			at := m.waitLine(t, "mover: at ")

			// The reported position is the one on screen.
			var ax, ay int
			if _, err := fmt.Sscanf(at, "mover: at x=%d y=%d", &ax, &ay); err != nil {
				t.Fatalf("bad line %q: %v", at, err)
			}
			x2, y2, _ := c.greenCentroid(t)
			if x2 != float64(ax)+19.5 || y2 != float64(ay)+19.5 || ay != 220 {
				t.Errorf("%q but centroid at (%v,%v)", at, x2, y2)
			}
			// The whole move against the time the key was held: the mover
			// moves by its own elapsed time, so the distance is its speed
			// times the hold, give or take the ticks at either end (a
			// quarter, and a tenth of a second's worth). Not the last
			// frame watched: on a busy machine one capture took the whole
			// second, and the frame it saw was 0.2 s into the hold.
			dx := x2 - x0
			moved := tc.speed * held.Seconds()
			t.Logf("held Right %v: centroid moved %.1f px (%.0f px/s; %.1f px by the last of %d frames watched)", held.Round(time.Millisecond), dx, dx/held.Seconds(), x1-x0, frames)
			if lo, hi := 0.75*moved-tc.speed/10, 1.25*moved+tc.speed/10; dx < lo || dx > hi || y2 != y0 {
				t.Errorf("centroid moved by (%.1f,%.1f) in %v, want x in [%.0f,%.0f] (%.0f px/s), y 0", dx, y2-y0, held.Round(time.Millisecond), lo, hi, tc.speed)
			}
			want := []string{"mover: ready 640x480", "mover: key Right down", "mover: key Right up", at}
			if strings.Join(m.seen, "\n") != strings.Join(want, "\n") {
				t.Errorf("stdout %q, want %q", m.seen, want)
			}
		})
	}
}

// TestTapThenQuit taps Right faster than a tick (the KeyPress event still
// counts for one tick), then quits with q. The tap moves the square by the
// speed times that one tick's length, 3.3 px at 60 ticks a second; a tick
// of a mover starved on a busy machine is longer (CI of 42be22c: 55 ms,
// 11 px), so the bound allows a tick of up to 250 ms — a tap counted for
// more than one tick would keep the square moving, and no position would
// be printed.
func TestTapThenQuit(t *testing.T) {
	t.Parallel()
	x := startXvfb(t)
	c := dial(t, x.display)
	m := startMover(t, x.display, nil)
	m.waitLine(t, "mover: ready")
	// No window manager here: give the mover the focus the WM would.
	w := c.findWindow(t, "mover")
	if err := xproto.SetInputFocusChecked(c.conn, xproto.InputFocusPointerRoot, w, 0).Check(); err != nil {
		t.Fatal(err)
	}
	right := c.keycode(t, 0xff53)
	c.key(t, right, true)
	c.key(t, right, false)
	m.waitLine(t, "mover: key Right down")
	m.waitLine(t, "mover: key Right up")
	var ax, ay int
	at := m.waitLine(t, "mover: at ")
	if _, err := fmt.Sscanf(at, "mover: at x=%d y=%d", &ax, &ay); err != nil || ax <= 40 || ax > 40+200/4 || ay != 220 {
		t.Errorf("after a tap: %q, want x in (40,90], y=220", at)
	}
	q := c.keycode(t, 'q')
	c.key(t, q, true)
	c.key(t, q, false)
	m.waitLine(t, "mover: bye")
	if code := m.wait(t); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}

// TestWindowProperties checks what the window manager sees, then closes the
// window the way it would (WM_DELETE_WINDOW).
func TestWindowProperties(t *testing.T) {
	t.Parallel()
	x := startXvfb(t)
	c := dial(t, x.display)
	m := startMover(t, x.display, nil, "-title", "Mover Ω")
	m.waitLine(t, "mover: ready")
	w := c.findWindow(t, "Mover Ω")
	if w == 0 {
		t.Fatal("no window with WM_NAME \"Mover Ω\"")
	}
	if got := c.prop(t, w, c.atom(t, "_NET_WM_NAME")); got != "Mover Ω" {
		t.Errorf("_NET_WM_NAME %q", got)
	}
	if got := c.prop(t, w, xproto.AtomWmClass); got != "mover\x00Mover\x00" {
		t.Errorf("WM_CLASS %q", got)
	}
	if h := []byte(c.prop(t, w, xproto.AtomWmNormalHints)); len(h) != 72 ||
		xgb.Get32(h[20:]) != 640 || xgb.Get32(h[24:]) != 480 || xgb.Get32(h[28:]) != 640 || xgb.Get32(h[32:]) != 480 {
		t.Errorf("WM_NORMAL_HINTS %v, want min=max=640x480", h)
	}
	wmProtocols, wmDelete := c.atom(t, "WM_PROTOCOLS"), c.atom(t, "WM_DELETE_WINDOW")
	if got := c.prop(t, w, wmProtocols); got != string(u32s(uint32(wmDelete))) {
		t.Errorf("WM_PROTOCOLS %q", got)
	}

	ev := xproto.ClientMessageEvent{Format: 32, Window: w, Type: wmProtocols,
		Data: xproto.ClientMessageDataUnionData32New([]uint32{uint32(wmDelete), 0, 0, 0, 0})}
	if err := xproto.SendEventChecked(c.conn, false, w, 0, string(ev.Bytes())).Check(); err != nil {
		t.Fatal(err)
	}
	m.waitLine(t, "mover: bye")
	if code := m.wait(t); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}

// TestWindowDestroyed destroys the window from outside, as xdotool
// windowclose does.
func TestWindowDestroyed(t *testing.T) {
	t.Parallel()
	x := startXvfb(t)
	c := dial(t, x.display)
	m := startMover(t, x.display, nil)
	m.waitLine(t, "mover: ready")
	if err := xproto.DestroyWindowChecked(c.conn, c.findWindow(t, "mover")).Check(); err != nil {
		t.Fatal(err)
	}
	m.waitLine(t, "mover: bye")
	if code := m.wait(t); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}

func TestExitAfter(t *testing.T) {
	t.Parallel()
	x := startXvfb(t)
	m := startMover(t, x.display, nil, "-exit-after", "500ms")
	m.waitLine(t, "mover: ready")
	m.waitLine(t, "mover: bye")
	if code := m.wait(t); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}

func TestCrashAfter(t *testing.T) {
	t.Parallel()
	x := startXvfb(t)
	m := startMover(t, x.display, nil, "-crash-after", "500ms")
	m.waitLine(t, "mover: ready")
	if code := m.wait(t); code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
	if !strings.Contains(m.stderr.String(), "crash") {
		t.Errorf("stderr %q does not mention the crash", m.stderr.String())
	}
}

func TestNoWindow(t *testing.T) {
	t.Parallel()
	x := startXvfb(t)
	c := dial(t, x.display)
	m := startMover(t, x.display, nil, "-no-window")
	m.waitLine(t, "mover: sleeping")
	if w := c.findWindow(t, "mover"); w != 0 {
		t.Errorf("window %#x exists", w)
	}
	// With no timer set it sleeps until told to stop (and must not trip
	// the runtime's deadlock detector meanwhile).
	time.Sleep(200 * time.Millisecond)
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := m.wait(t); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	for _, l := range m.seen {
		if strings.HasPrefix(l, "mover: ready") {
			t.Errorf("printed %q", l)
		}
	}
}

func TestXServerDies(t *testing.T) {
	t.Parallel()
	x := startXvfb(t)
	m := startMover(t, x.display, nil)
	m.waitLine(t, "mover: ready")
	if err := x.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := m.wait(t); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if !strings.Contains(m.stderr.String(), "X connection") {
		t.Errorf("stderr %q does not mention the X connection", m.stderr.String())
	}
}
