package x11

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/guest/xserver"
	"github.com/codegirl-games/agentbox/internal/cpuload"
	"github.com/codegirl-games/agentbox/internal/keysym"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/internal/xevents"
)

// Input must land exactly whatever the load: these tests stop the window
// manager outright (the extreme of a machine that runs it late) or saturate
// every CPU, and compare what xev received with what was sent.

// stallWM stops the window manager until resume is called (or the test
// ends).
func stallWM(t *testing.T, wm *xserver.WM) (resume func()) {
	t.Helper()
	if err := syscall.Kill(wm.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatalf("stop openbox: %v", err)
	}
	resumed := false
	resume = func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(wm.Pid(), syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	return resume
}

// btn is a button event as xev reports it.
type btn struct {
	typ          string
	button, x, y int
}

func (b btn) String() string { return fmt.Sprintf("%s(%d@%d,%d)", b.typ, b.button, b.x, b.y) }

// mixedInput sends clicks with three buttons at three places, a double
// click, a drag through three points, scrolls, a chord and Unicode text into
// xev's window, and returns the button events and key presses xev must
// report.
func mixedInput(t *testing.T, c *Conn, w Window) (buttons []btn, keys []uint32) {
	t.Helper()
	ctx := testCtx(t, 60*time.Second)
	at := func(dx, dy int) (int, int) { return w.X + dx, w.Y + dy }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, b := range []int{ButtonLeft, ButtonRight, ButtonMiddle} {
		x, y := at(10+180*i, 15+130*i)
		must(c.MouseMove(ctx, x, y))
		must(c.Click(ctx, b, 1))
		buttons = append(buttons, btn{"ButtonPress", b, x, y}, btn{"ButtonRelease", b, x, y})
	}
	x, y := at(300, 40)
	must(c.MouseMove(ctx, x, y))
	must(c.Click(ctx, ButtonLeft, 2))
	buttons = append(buttons, btn{"ButtonPress", 1, x, y}, btn{"ButtonRelease", 1, x, y},
		btn{"ButtonPress", 1, x, y}, btn{"ButtonRelease", 1, x, y})
	// A drag: press at one point, move through two more, release at the last.
	x, y = at(50, 250)
	must(c.MouseMove(ctx, x, y))
	must(c.ButtonDown(ctx, ButtonLeft))
	buttons = append(buttons, btn{"ButtonPress", 1, x, y})
	for _, p := range [][2]int{{150, 200}, {250, 260}, {350, 100}} {
		x, y = at(p[0], p[1])
		must(c.MouseMove(ctx, x, y))
	}
	must(c.ButtonUp(ctx, ButtonLeft))
	buttons = append(buttons, btn{"ButtonRelease", 1, x, y})
	x, y = at(200, 150)
	must(c.MouseMove(ctx, x, y))
	must(c.Scroll(ctx, 1, 2))
	for _, b := range []int{ButtonWheelDown, ButtonWheelDown, ButtonWheelRight} {
		buttons = append(buttons, btn{"ButtonPress", b, x, y}, btn{"ButtonRelease", b, x, y})
	}
	must(c.Chord(ctx, []uint32{0xffe3, 0xffe1, 't'}, 1)) // ctrl+shift+t
	keys = append(keys, 0xffe3, 0xffe1, 'T')
	text := "Hé€✓日本 ok"
	must(c.TypeText(ctx, text, 0))
	for _, r := range text {
		ks, err := keysym.ForRune(r)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, uint32(ks))
	}
	return buttons, keys
}

// checkMixed waits for xev to report what mixedInput sent and compares.
func checkMixed(t *testing.T, x *xev, buttons []btn, keys []uint32) {
	t.Helper()
	evs := x.waitFor(t, "every button and key event", func(evs []xevents.Event) bool {
		return len(xevents.Filter(evs, "ButtonPress", "ButtonRelease")) >= len(buttons) &&
			len(pressNames(evs)) >= len(keys)
	})
	var got []btn
	for _, e := range xevents.Filter(evs, "ButtonPress", "ButtonRelease") {
		got = append(got, btn{e.Type, e.Button, e.RootX, e.RootY})
	}
	if fmt.Sprint(got) != fmt.Sprint(buttons) {
		t.Errorf("button events:\n got %v\nwant %v", got, buttons)
	}
	// Between the drag's press and release the pointer moved through
	// every point.
	var motion int
	for _, e := range xevents.Filter(evs, "MotionNotify") {
		if e.State&(1<<8) != 0 { // Button1Mask
			motion++
		}
	}
	if motion < 3 {
		t.Errorf("%d motion events with button 1 held, want ≥ 3", motion)
	}
	if got := pressNames(evs); fmt.Sprintf("%#x", got) != fmt.Sprintf("%#x", keys) {
		t.Errorf("key presses (keysyms):\n got %#x\nwant %#x", got, keys)
	}
}

// pressNames lists the keysyms of xev's key presses, Shift_L only where it
// was not added for a character (the chord's, right after Control_L).
func pressNames(evs []xevents.Event) []uint32 {
	var out []uint32
	for _, e := range xevents.Filter(evs, "KeyPress") {
		if e.Keysym == 0xffe1 && (len(out) == 0 || out[len(out)-1] != 0xffe3) {
			continue // Shift pressed for an upper-case character
		}
		out = append(out, e.Keysym)
	}
	return out
}

func TestInputExactWhileWMStalled(t *testing.T) {
	e := newEnv(t, xserver.Config{}, true)
	x := startXev(t, e.c, e.srv.Display())
	focusXev(t, e.c, x)
	warmKeyboard(t, e.c, x)
	stallWM(t, e.wm)
	before := e.c.ConfirmTime()
	buttons, keys := mixedInput(t, e.c, x.win)
	checkMixed(t, x, buttons, keys)
	t.Logf("confirmation took %v in all", e.c.ConfirmTime()-before)
}

// loadedXev starts xev under Openbox, focused and with its keyboard map
// loaded, then perCore busy loops on every CPU (skipped with -short).
func loadedXev(t *testing.T, perCore int) (env, *xev) {
	t.Helper()
	testenv.Require(t, testenv.Slow("saturates every CPU"))
	e := newEnv(t, xserver.Config{}, true)
	x := startXev(t, e.c, e.srv.Display())
	focusXev(t, e.c, x)
	warmKeyboard(t, e.c, x)
	cpuload.Start(t, perCore)
	return e, x
}

func TestInputExactUnderLoad(t *testing.T) {
	e, x := loadedXev(t, 4)
	for i := range 5 {
		before := e.c.ConfirmTime()
		buttons, keys := mixedInput(t, e.c, x.win)
		checkMixed(t, x, buttons, keys)
		t.Logf("round %d: confirmation took %v", i, e.c.ConfirmTime()-before)
		if t.Failed() {
			t.Fatalf("round %d: xev printed:\n%s", i, x.output())
		}
		x.reset()
	}
}

// twoXevs starts two xev windows side by side under Openbox, makes the
// second active and puts the pointer at (x, y) inside the first.
func twoXevs(t *testing.T) (e env, a, b *xev, x, y int) {
	t.Helper()
	e = newEnv(t, xserver.Config{}, true)
	a = startXevAt(t, e.c, e.srv.Display(), 10, 10, true)
	b = startXevAt(t, e.c, e.srv.Display(), 420, 10, true)
	ctx := testCtx(t, 20*time.Second)
	if err := e.c.Activate(ctx, b.win.ID); err != nil {
		t.Fatal(err)
	}
	b.waitFor(t, "focus in b", func(evs []xevents.Event) bool { return count(evs, "FocusIn") > 0 })
	x, y = a.win.X+100, a.win.Y+100
	if err := e.c.MouseMove(ctx, x, y); err != nil {
		t.Fatal(err)
	}
	a.reset()
	b.reset()
	return e, a, b, x, y
}

// A click into an inactive window gives it the focus before the press, as
// Openbox's click-to-focus did; keys typed next go to it.
func TestClickFocusesInactiveWindow(t *testing.T) {
	e, a, b, x, y := twoXevs(t)
	ctx := testCtx(t, 20*time.Second)
	if err := e.c.Click(ctx, ButtonLeft, 1); err != nil {
		t.Fatal(err)
	}
	if err := e.c.TypeText(ctx, "ok", 0); err != nil {
		t.Fatal(err)
	}
	evs := a.waitFor(t, "focus, click and keys", func(evs []xevents.Event) bool { return count(evs, "KeyRelease") >= 2 })
	var seq []string
	for _, e := range xevents.Filter(evs, "FocusIn", "ButtonPress", "ButtonRelease", "KeyPress") {
		seq = append(seq, e.Type)
	}
	if got, want := strings.Join(seq, " "), "FocusIn ButtonPress ButtonRelease KeyPress KeyPress"; got != want {
		t.Errorf("the inactive window saw %q, want %q", got, want)
	}
	if p := xevents.Filter(evs, "ButtonPress"); len(p) != 1 || p[0].RootX != x || p[0].RootY != y {
		t.Errorf("presses %+v, want one at (%d,%d)", p, x, y)
	}
	if !b.seen(10*time.Second, func(evs []xevents.Event) bool { return count(evs, "FocusOut") > 0 }) {
		t.Errorf("the active window saw no FocusOut:\n%s", b.output())
	}
	if n := count(b.events(), "KeyPress"); n != 0 {
		t.Errorf("the window that lost the focus got %d key presses", n)
	}
	active, err := e.c.ActiveWindow(ctx)
	if err != nil || active != a.win.ID {
		t.Errorf("active window %#x (%v), want %#x", active, err, a.win.ID)
	}
}

// When the window manager does not answer before the action's deadline, a
// click that needed it to focus the window first is not sent at all, and
// the error says the input was not confirmed. The next click, once it
// answers again, works.
func TestClickInactiveWindowWMStalled(t *testing.T) {
	e, a, b, x, y := twoXevs(t)
	ctx := testCtx(t, 20*time.Second)
	resume := stallWM(t, e.wm)
	err := e.c.Click(testCtx(t, 500*time.Millisecond), ButtonLeft, 1)
	if !errors.Is(err, ErrUnconfirmed) {
		t.Fatalf("Click with the window manager stopped: %v, want ErrUnconfirmed", err)
	}
	t.Logf("error: %v", err)
	resume()
	if err := e.c.Click(ctx, ButtonRight, 1); err != nil {
		t.Fatal(err)
	}
	evs := a.waitFor(t, "the second click", func(evs []xevents.Event) bool { return count(evs, "ButtonRelease") > 0 })
	var got []btn
	for _, e := range xevents.Filter(evs, "ButtonPress", "ButtonRelease") {
		got = append(got, btn{e.Type, e.Button, e.RootX, e.RootY})
	}
	if want := []btn{{"ButtonPress", 3, x, y}, {"ButtonRelease", 3, x, y}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("a saw %v, want only the second click %v", got, want)
	}
	if n := count(b.events(), "ButtonPress"); n != 0 {
		t.Errorf("b saw %d presses", n)
	}
}

// events returns the events seen so far.
func (x *xev) events() []xevents.Event {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]xevents.Event(nil), x.evs...)
}

// A drag on a title bar is Openbox's input: it goes at Openbox's pace, so
// Openbox moves the window even if it runs late (it drops a drag it reads
// only after the release), and when the release returns the move is done.
func TestTitleBarDragWaitsForWM(t *testing.T) {
	e := newEnv(t, xserver.Config{}, true)
	x := startXev(t, e.c, e.srv.Display())
	focusXev(t, e.c, x)
	ctx := testCtx(t, 20*time.Second)
	w := x.win
	tx, ty := w.X+w.Width/2, w.Y-8 // on the title bar, above the client
	resume := stallWM(t, e.wm)
	go func() {
		time.Sleep(300 * time.Millisecond)
		resume()
	}()
	if err := e.c.MouseMove(ctx, tx, ty); err != nil {
		t.Fatal(err)
	}
	if err := e.c.ButtonDown(ctx, ButtonLeft); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		if err := e.c.MouseMove(ctx, tx+10*i, ty+8*i); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.c.ButtonUp(ctx, ButtonLeft); err != nil {
		t.Fatal(err)
	}
	wins, err := e.c.Windows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range wins {
		if got.ID == w.ID && (got.X != w.X+50 || got.Y != w.Y+40) {
			t.Errorf("after the drag the window is at (%d,%d), want (%d,%d)", got.X, got.Y, w.X+50, w.Y+40)
		}
	}
	if n := count(x.events(), "ButtonPress"); n != 0 {
		t.Errorf("xev saw %d presses of a drag on the title bar", n)
	}
}

// Typing under load: more distinct characters missing from the keymap than
// there are spare keycodes, so spares are rebound while xev, starved of CPU,
// still has earlier presses of them to read.
func TestTypeUnmappedUnderLoad(t *testing.T) {
	e, x := loadedXev(t, 8)
	var sb strings.Builder
	for r := rune(0x4e00); r < 0x4e00+45; r++ { // CJK ideographs
		sb.WriteRune(r)
	}
	for r := rune(0x3b1); r < 0x3b1+15; r++ { // Greek
		sb.WriteRune(r)
	}
	text := sb.String()
	for round := range 3 {
		if err := e.c.TypeText(testCtx(t, 60*time.Second), text, 0); err != nil {
			t.Fatal(err)
		}
		want := []rune(text)
		evs := x.waitFor(t, "presses", func(evs []xevents.Event) bool { return len(presses(evs)) >= len(want) })
		got := presses(evs)
		bad := 0
		for i, r := range want {
			if got[i].MbLookup != string(r) {
				bad++
				if bad < 10 {
					t.Errorf("round %d char %d: got %q (keysym %#x) want %q", round, i, got[i].MbLookup, got[i].Keysym, string(r))
				}
			}
		}
		if bad > 0 {
			t.Fatalf("round %d: %d of %d characters wrong", round, bad, len(want))
		}
		x.reset()
	}
	t.Logf("spare keycodes: %d", len(e.c.kb.spares))
}
