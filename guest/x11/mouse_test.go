package x11

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/guest/xserver"
	"github.com/codegirl-games/agentbox/internal/xevents"
)

func TestMouseXev(t *testing.T) {
	for _, wm := range []bool{false, true} {
		t.Run(fmt.Sprintf("wm=%v", wm), func(t *testing.T) { testMouseXev(t, wm) })
	}
}

func testMouseXev(t *testing.T, wm bool) {
	e := newEnv(t, xserver.Config{}, wm)
	x := startXev(t, e.c, e.srv.Display())
	focusXev(t, e.c, x)
	ctx := testCtx(t, 20*time.Second)
	c := e.c
	w := x.win

	type click struct{ x, y, button int }
	clicks := []click{{w.X + 10, w.Y + 15, 1}, {w.X + 200, w.Y + 100, 2}, {w.X + 390, w.Y + 290, 3}}
	for _, k := range clicks {
		if err := c.MouseMove(ctx, k.x, k.y); err != nil {
			t.Fatal(err)
		}
		if err := c.Click(ctx, k.button, 1); err != nil {
			t.Fatal(err)
		}
	}
	evs := x.waitFor(t, "three clicks", func(evs []xevents.Event) bool { return count(evs, "ButtonRelease") >= 3 })
	bs := xevents.Filter(evs, "ButtonPress", "ButtonRelease")
	if len(bs) != 6 {
		t.Fatalf("button events: %s", summarize(evs))
	}
	for i, k := range clicks {
		for _, b := range bs[2*i : 2*i+2] {
			if b.Button != k.button || b.RootX != k.x || b.RootY != k.y || b.X != k.x-w.X || b.Y != k.y-w.Y {
				t.Errorf("click %d: %s of button %d at root (%d,%d) window (%d,%d), want button %d at (%d,%d)",
					i, b.Type, b.Button, b.RootX, b.RootY, b.X, b.Y, k.button, k.x, k.y)
			}
		}
	}
	x.reset()

	// Scroll: down 2, up 1, right 3, left 1 → buttons 5,5,4,7,7,7,6.
	if err := c.Scroll(ctx, 0, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.Scroll(ctx, 0, -1); err != nil {
		t.Fatal(err)
	}
	if err := c.Scroll(ctx, 3, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Scroll(ctx, -1, 0); err != nil {
		t.Fatal(err)
	}
	evs = x.waitFor(t, "scroll clicks", func(evs []xevents.Event) bool { return count(evs, "ButtonRelease") >= 7 })
	var got []int
	for _, e := range xevents.Filter(evs, "ButtonPress") {
		got = append(got, e.Button)
	}
	if want := []int{5, 5, 4, 7, 7, 7, 6}; !equalInts(got, want) {
		t.Errorf("scroll buttons %v, want %v", got, want)
	}
	x.reset()

	// Double click: two press/release pairs, close enough in time.
	if err := c.Click(ctx, 1, 2); err != nil {
		t.Fatal(err)
	}
	evs = x.waitFor(t, "double click", func(evs []xevents.Event) bool { return count(evs, "ButtonRelease") >= 2 })
	bp := xevents.Filter(evs, "ButtonPress")
	if len(bp) != 2 || bp[0].Button != 1 || bp[1].Button != 1 {
		t.Fatalf("double click: %s", summarize(evs))
	}
	if dt := bp[1].Time - bp[0].Time; dt > 200 {
		t.Errorf("double click presses %d ms apart", dt)
	}
	x.reset()

	// ButtonDown, drag, ButtonUp.
	if err := c.ButtonDown(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.MouseMove(ctx, w.X+50, w.Y+60); err != nil {
		t.Fatal(err)
	}
	if err := c.ButtonUp(ctx, 1); err != nil {
		t.Fatal(err)
	}
	evs = x.waitFor(t, "drag", func(evs []xevents.Event) bool { return count(evs, "ButtonRelease") >= 1 })
	br := xevents.Filter(evs, "ButtonRelease")
	if br[0].RootX != w.X+50 || br[0].RootY != w.Y+60 {
		t.Errorf("release at %d,%d", br[0].RootX, br[0].RootY)
	}
	if !strings.Contains(summarize(evs), "MotionNotify") {
		t.Errorf("no motion during drag: %s", summarize(evs))
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestMouseMoveAndCursor(t *testing.T) {
	e := newEnv(t, xserver.Config{Width: 800, Height: 600}, false)
	ctx := testCtx(t, 10*time.Second)
	c := e.c
	steps := []struct {
		abs          bool
		x, y         int
		wantX, wantY int
	}{
		{true, 100, 100, 100, 100},
		{false, 30, -20, 130, 80},
		{false, -500, 0, 0, 80},      // clamped at the left edge
		{true, 5000, 5000, 799, 599}, // clamped to the screen
		{false, -99, -99, 700, 500},
		{false, 250, -250, 799, 250},
		{true, -10, -10, 0, 0},
		{false, 3, 4, 3, 4},
	}
	for i, s := range steps {
		var err error
		if s.abs {
			err = c.MouseMove(ctx, s.x, s.y)
		} else {
			err = c.MouseMoveRelative(ctx, s.x, s.y)
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		gx, gy, err := c.Cursor(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if gx != s.wantX || gy != s.wantY {
			t.Errorf("step %d (%+v): cursor at %d,%d", i, s, gx, gy)
		}
	}
	if err := c.MouseMove(ctx, 40000, 0); !errors.Is(err, ErrBadArgument) {
		t.Errorf("MouseMove(40000, 0) = %v", err)
	}
	if err := c.Click(ctx, 0, 1); !errors.Is(err, ErrBadArgument) {
		t.Errorf("Click(button 0) = %v", err)
	}
	if err := c.Click(ctx, 1, 0); !errors.Is(err, ErrBadArgument) {
		t.Errorf("Click(count 0) = %v", err)
	}
}

// TestMultiClickTk checks with a real toolkit (Tk) that Click(…, 2) and
// Click(…, 3) register as a double and a triple click.
func TestMultiClickTk(t *testing.T) {
	e := newEnv(t, xserver.Config{}, true)
	script := filepath.Join(t.TempDir(), "clicks.tcl")
	err := os.WriteFile(script, []byte(`
wm title . agentbox-tk
wm geometry . 300x200+40+40
bind . <Map> {puts mapped; flush stdout}
bind . <Button-1> {puts single; flush stdout}
bind . <Double-Button-1> {puts double; flush stdout}
bind . <Triple-Button-1> {puts triple; flush stdout}
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	_, out := startApp(t, e.srv.Display(), nil, "wish", script)
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	ctx := testCtx(t, 20*time.Second)
	w, err := e.c.WaitWindow(ctx, func(w Window) bool {
		return w.Title == "agentbox-tk" && w.Mapped && w.Width == 300 && w.Height == 200
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.MouseMove(ctx, w.X+100, w.Y+100); err != nil {
		t.Fatal(err)
	}
	// Tk maps its toplevel inside the wrapper window the window manager
	// lists a moment after the wrapper: a click before that lands on the
	// wrapper, where no binding is (a person would click a window that has
	// not drawn yet). Wait, as an agent would wait for the app to draw.
	select {
	case l := <-lines:
		if l != "mapped" {
			t.Fatalf("Tk printed %q, want mapped", l)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Tk never mapped its toplevel")
	}
	expect := func(want ...string) {
		t.Helper()
		for _, wl := range want {
			select {
			case l := <-lines:
				if l != wl {
					t.Fatalf("Tk printed %q, want %q", l, wl)
				}
			case <-time.After(5 * time.Second):
				// Say what the desktop looked like, and whether a second
				// click lands (see docs/actions.md, "first click").
				ws, _ := e.c.Windows(testCtx(t, 5*time.Second))
				px, py, _ := e.c.Cursor(testCtx(t, 5*time.Second))
				again := "nothing"
				_ = e.c.Click(testCtx(t, 5*time.Second), 1, 1)
				select {
				case l := <-lines:
					again = l
				case <-time.After(5 * time.Second):
				}
				t.Fatalf("Tk printed nothing, want %q; window when waited for %+v, now %+v; pointer %d,%d; after one more click Tk printed %s; wm sync state %d",
					wl, w, ws, px, py, again, e.c.wm.state.Load())
			}
		}
	}
	sleepPastDoubleClick := func() { time.Sleep(600 * time.Millisecond) } // Tk's double-click time is 500 ms
	if err := e.c.Click(ctx, 1, 1); err != nil {
		t.Fatal(err)
	}
	expect("single")
	sleepPastDoubleClick()
	if err := e.c.Click(ctx, 1, 2); err != nil {
		t.Fatal(err)
	}
	expect("single", "double")
	sleepPastDoubleClick()
	if err := e.c.Click(ctx, 1, 3); err != nil {
		t.Fatal(err)
	}
	expect("single", "double", "triple")
}

// TestFirstClickIntoNewWindow: a click right after a window is listed at
// its size lands in it (the first thing an agent does with a new window).
func TestFirstClickIntoNewWindow(t *testing.T) {
	e := newEnv(t, xserver.Config{}, true)
	x := startXev(t, e.c, e.srv.Display())
	ctx := testCtx(t, 20*time.Second)
	if err := e.c.MouseMove(ctx, x.win.X+100, x.win.Y+100); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Click(ctx, 1, 1); err != nil {
		t.Fatal(err)
	}
	evs := x.waitFor(t, "the first click", func(evs []xevents.Event) bool { return count(evs, "ButtonRelease") > 0 })
	p := xevents.Filter(evs, "ButtonPress")
	if len(p) != 1 || p[0].X != 100 || p[0].Y != 100 {
		t.Errorf("presses %+v, want one at (100,100) in the window", p)
	}
}
