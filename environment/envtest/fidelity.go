package envtest

import (
	"bytes"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/keysym"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/internal/xevents"
	"github.com/codegirl-games/agentbox/observe"
)

// xevBox starts xev and returns its window (absolute geometry).
func (s *suite) xevBox(t *testing.T) (*box, observe.Window) {
	t.Helper()
	b := s.newBox(t)
	lr := b.inImage("xev", []string{"-geometry", "560x400+20+20"}, "Event Tester")
	w := *lr.Window
	// The pointer rests inside xev's window, as a person's hand would.
	x, y := pt(w.X+w.Width/2, w.Y+w.Height/2)
	b.do(action.Action{Kind: action.MouseMove, X: x, Y: y})
	return b, w
}

// deliverWithin bounds how long the suite waits for what a sent action
// must make the app print. Xvfb has processed the input when the action
// returns; the wait covers the app reading it, printing it and the guest
// forwarding it, which on a machine whose cores are all busy (a whole test
// suite beside) can take seconds. It is a bound on a hang, not a speed
// claim: a lost event still fails, only later.
const deliverWithin = 30 * time.Second

// events waits until xev has printed at least n events of the given types
// and returns them. When they do not come it says what xev's window, the
// cursor and xev itself look like now, so lost input can be told from a
// moved window or a dead xev.
func (b *box) events(n int, types ...string) []xevents.Event {
	b.t.Helper()
	var evs []xevents.Event
	start := time.Now()
	ok := b.sink.waitFor(deliverWithin, func() bool {
		evs = xevents.Filter(xevents.Parse(b.sink.stdout()), types...)
		return len(evs) >= n
	})
	if !ok {
		b.explainXev()
		b.t.Fatalf("xev printed %d %v events in %v, want %d (see above)", len(evs), types, deliverWithin, n)
	}
	if d := time.Since(start); d > time.Second {
		b.t.Logf("xev printed %d %v events %v after they were sent (a busy machine)", n, types, d.Round(time.Millisecond))
	}
	return evs
}

// explainXev logs the windows and the cursor as they are now, whether xev
// exited, and the end of what it printed.
func (b *box) explainXev() {
	b.t.Helper()
	if _, st, err := b.env.Observe(b.ctx); err != nil {
		b.t.Logf("observe: %v", err)
	} else {
		b.t.Logf("windows now: %+v; cursor %v", st.Windows, st.Cursor)
	}
	if e := b.sink.exited(); e != nil {
		b.t.Logf("xev exited: %+v; stderr: %s", *e, tail(b.sink.stderr(), 2000))
	}
	b.t.Logf("xev's output, its end:\n%s", tail(b.sink.stdout(), 6000))
}

// allText is every printable ASCII character, Unicode beyond the keymap,
// and the two control characters type accepts.
func allText() string {
	var b strings.Builder
	for r := rune(0x20); r <= 0x7e; r++ {
		b.WriteRune(r)
	}
	b.WriteString("é ß € ✓ 日本 Ωπ ü\tEnd\n")
	return b.String()
}

func (s *suite) testTypeEveryCharacter(t *testing.T) {
	b, _ := s.xevBox(t)
	text := allText()
	b.do(action.Action{Kind: action.Type, Text: text})
	runes := []rune(text)
	var presses []xevents.Event
	b.sink.waitFor(deliverWithin, func() bool {
		presses = nonModifier(xevents.Filter(xevents.Parse(b.sink.stdout()), "KeyPress"))
		return len(presses) >= len(runes)
	})
	if len(presses) != len(runes) {
		b.explainXev()
		t.Fatalf("xev saw %d key presses for %d characters", len(presses), len(runes))
	}
	bad := 0
	for i, r := range runes {
		want := []byte(string(r))
		if r == '\n' {
			want = []byte{'\r'} // Return
		}
		wantSym, _ := keysym.ForRune(r)
		e := presses[i]
		if e.Lookup != string(want) || e.Keysym != uint32(wantSym) {
			bad++
			t.Errorf("character %d %q: xev saw keysym 0x%x (%s) text %q, want 0x%x %q", i, r, e.Keysym, e.KeysymName, e.Lookup, uint32(wantSym), want)
		}
	}
	var releases []xevents.Event
	b.sink.waitFor(deliverWithin, func() bool {
		releases = nonModifier(xevents.Filter(xevents.Parse(b.sink.stdout()), "KeyRelease"))
		return len(releases) >= len(runes)
	})
	if len(releases) != len(runes) {
		t.Errorf("%d key releases for %d presses", len(releases), len(runes))
	}
	t.Logf("%d of %d characters arrived exactly (%q)", len(runes)-bad, len(runes), text)
}

func nonModifier(evs []xevents.Event) []xevents.Event {
	var out []xevents.Event
	for _, e := range evs {
		if !keysym.IsModifier(keysym.Keysym(e.Keysym)) {
			out = append(out, e)
		}
	}
	return out
}

// keySeq renders key events as "+Control_L +Shift_L +T -T -Shift_L -Control_L".
func keySeq(evs []xevents.Event) string {
	var parts []string
	for _, e := range evs {
		sign := "+"
		if e.Type == "KeyRelease" {
			sign = "-"
		}
		parts = append(parts, sign+e.KeysymName)
	}
	return strings.Join(parts, " ")
}

func (s *suite) testKeysAndChords(t *testing.T) {
	b, w := s.xevBox(t)
	keys := func(from int) []xevents.Event {
		return xevents.Filter(xevents.Parse(b.sink.stdout()), "KeyPress", "KeyRelease")[from:]
	}
	tests := []struct {
		act  action.Action
		want string
	}{
		{action.Action{Kind: action.Key, Keys: "ctrl+shift+t"}, "+Control_L +Shift_L +T -T -Shift_L -Control_L"},
		{action.Action{Kind: action.Key, Keys: "Return", Repeat: 3}, "+Return -Return +Return -Return +Return -Return"},
		{action.Action{Kind: action.Key, Keys: "alt+Tab"}, "+Alt_L +Tab -Tab -Alt_L"},
		{action.Action{Kind: action.Key, Keys: "shift+slash"}, "+Shift_L +question -question -Shift_L"},
		{action.Action{Kind: action.Key, Keys: "RIGHT"}, "+Right -Right"},
		{action.Action{Kind: action.Key, Keys: "enter"}, "+Return -Return"},
		{action.Action{Kind: action.Key, Keys: "esc"}, "+Escape -Escape"},
		{action.Action{Kind: action.Key, Keys: "pageup"}, "+Prior -Prior"},
		{action.Action{Kind: action.Key, Keys: "F5"}, "+F5 -F5"},
		{action.Action{Kind: action.Key, Keys: "ctrl+a"}, "+Control_L +a -a -Control_L"},
		{action.Action{Kind: action.Key, Keys: "super+e"}, "+Super_L +e -e -Super_L"},
		{action.Action{Kind: action.Key, Keys: "<"}, "+less -less"},
		{action.Action{Kind: action.Key, Keys: "eacute"}, "+eacute -eacute"},
	}
	n := 0
	for _, tt := range tests {
		b.do(tt.act)
		want := len(strings.Fields(tt.want))
		b.events(n+want, "KeyPress", "KeyRelease")
		if got := keySeq(keys(n)); got != tt.want {
			t.Errorf("%s: xev saw %q, want %q", tt.act, got, tt.want)
		}
		n += want
	}

	// A held key stays down across other actions until released: a click
	// while Shift is held carries ShiftMask, and a short hold is exactly
	// one press (no autorepeat).
	x, y := pt(w.X+50, w.Y+50)
	b.do(action.Action{Kind: action.KeyDown, Key: "shift"},
		action.Action{Kind: action.Click, X: x, Y: y},
		action.Action{Kind: action.KeyUp, Key: "shift"},
		action.Action{Kind: action.KeyDown, Key: "a"},
		action.Action{Kind: action.Wait, MS: 200},
		action.Action{Kind: action.KeyUp, Key: "a"})
	press := b.events(1, "ButtonPress")[0]
	if press.State&1 == 0 {
		t.Errorf("click with Shift held: state 0x%x lacks ShiftMask", press.State)
	}
	b.events(n+4, "KeyPress", "KeyRelease")
	if got := keySeq(keys(n)); got != "+Shift_L -Shift_L +a -a" {
		t.Errorf("hold sequence: %q", got)
	}
}

func (s *suite) testMouse(t *testing.T) {
	b, w := s.xevBox(t)
	at := func(dx, dy int) (int, int) { return w.X + dx, w.Y + dy }
	type btn struct {
		typ          string
		button, x, y int
	}
	buttons := func(from int) []btn {
		var out []btn
		for _, e := range xevents.Filter(xevents.Parse(b.sink.stdout()), "ButtonPress", "ButtonRelease")[from:] {
			out = append(out, btn{e.Type, e.Button, e.RootX, e.RootY})
		}
		return out
	}
	n := 0
	expect := func(what string, want ...btn) {
		t.Helper()
		b.events(n+len(want), "ButtonPress", "ButtonRelease")
		got := buttons(n)
		if fmt.Sprint(got[:min(len(got), len(want))]) != fmt.Sprint(want) {
			t.Errorf("%s: xev saw %v, want %v", what, got, want)
		}
		n += len(want)
	}
	click := func(b action.Button, count, x, y int, keys string) action.Action {
		return action.Action{Kind: action.Click, Button: b, Count: count, X: &x, Y: &y, Keys: keys}
	}
	for i, c := range []struct {
		b   action.Button
		num int
	}{{action.Left, 1}, {action.Middle, 2}, {action.Right, 3}} {
		x, y := at(40+100*i, 60+30*i)
		b.do(click(c.b, 1, x, y, ""))
		expect("click "+string(c.b), btn{"ButtonPress", c.num, x, y}, btn{"ButtonRelease", c.num, x, y})
	}
	for count := 2; count <= 3; count++ {
		x, y := at(300, 100+20*count)
		first := len(xevents.Filter(xevents.Parse(b.sink.stdout()), "ButtonPress"))
		b.do(click(action.Left, count, x, y, ""))
		var want []btn
		for i := 0; i < count; i++ {
			want = append(want, btn{"ButtonPress", 1, x, y}, btn{"ButtonRelease", 1, x, y})
		}
		expect(fmt.Sprintf("click count %d", count), want...)
		presses := xevents.Filter(xevents.Parse(b.sink.stdout()), "ButtonPress")[first:]
		if span := presses[count-1].Time - presses[0].Time; span > 400 {
			t.Errorf("a %d-click spans %d ms; toolkits need the clicks within their double-click time", count, span)
		}
	}
	// Modifiers held for a click.
	x, y := at(200, 200)
	b.do(click(action.Left, 1, x, y, "ctrl+shift"))
	expect("ctrl+shift click", btn{"ButtonPress", 1, x, y}, btn{"ButtonRelease", 1, x, y})
	if p := xevents.Filter(xevents.Parse(b.sink.stdout()), "ButtonPress"); p[len(p)-1].State&0x5 != 0x5 {
		t.Errorf("ctrl+shift click: state 0x%x", p[len(p)-1].State)
	}
	// Scroll: positive dy is down (5), negative up (4), positive dx right
	// (7), negative left (6).
	sx, sy := at(250, 250)
	b.do(action.Action{Kind: action.Scroll, X: &sx, Y: &sy, DY: action.Int(2)},
		action.Action{Kind: action.Scroll, DY: action.Int(-1)},
		action.Action{Kind: action.Scroll, DX: action.Int(2)},
		action.Action{Kind: action.Scroll, DX: action.Int(-1)})
	var want []btn
	for _, n := range []int{5, 5, 4, 7, 7, 6} {
		want = append(want, btn{"ButtonPress", n, sx, sy}, btn{"ButtonRelease", n, sx, sy})
	}
	expect("scroll in four directions", want...)

	// Drag through a path: press at the first point, pass the middle one
	// exactly, release at the last.
	p0x, p0y := at(60, 300)
	p1x, p1y := at(180, 250)
	p2x, p2y := at(400, 330)
	motions := len(xevents.Filter(xevents.Parse(b.sink.stdout()), "MotionNotify"))
	b.do(action.Action{Kind: action.Drag, Path: action.Path{{X: p0x, Y: p0y}, {X: p1x, Y: p1y}, {X: p2x, Y: p2y}}})
	expect("drag", btn{"ButtonPress", 1, p0x, p0y}, btn{"ButtonRelease", 1, p2x, p2y})
	passed := false
	for _, m := range xevents.Filter(xevents.Parse(b.sink.stdout()), "MotionNotify")[motions:] {
		if m.RootX == p1x && m.RootY == p1y && m.State&0x100 != 0 {
			passed = true
		}
	}
	if !passed {
		t.Errorf("drag: no motion with Button1 held through (%d,%d)", p1x, p1y)
	}
	// mouse_down, move, mouse_up.
	b.do(action.Action{Kind: action.MouseDown, Button: action.Right})
	mx, my := at(500, 100)
	b.do(action.Action{Kind: action.MouseMove, X: &mx, Y: &my}, action.Action{Kind: action.MouseUp, Button: action.Right})
	expect("mouse_down/up", btn{"ButtonPress", 3, p2x, p2y}, btn{"ButtonRelease", 3, mx, my})
	// Relative motion and the cursor position.
	r := b.do(action.Action{Kind: action.MouseMove, DX: action.Int(-30), DY: action.Int(15)}, action.Action{Kind: action.CursorPosition})
	if c := r[1].Cursor; c == nil || c.X != mx-30 || c.Y != my+15 {
		t.Errorf("cursor after a relative move = %+v, want (%d,%d)", c, mx-30, my+15)
	}
	// Out of the screen: a validation error in the result, nothing sent.
	big := 10000
	res, err := b.env.Act(b.ctx, action.Action{Kind: action.Click, X: &big, Y: &big})
	if err != nil || res.OK || !strings.Contains(res.Error, "outside") {
		t.Errorf("click outside the screen: %+v, %v", res, err)
	}
}

// xterm: a shell line full of metacharacters must arrive exactly. xterm
// logs what it shows (-l) to its stdout, which is the app's stdout here.
func (s *suite) testXterm(t *testing.T) {
	b := s.newBox(t)
	b.inImage("xterm", []string{"-l", "-lf", "/dev/stdout", "-T", "term", "-e", "bash", "--norc", "--noprofile", "-i"}, "term")
	// A person would wait for the prompt before typing.
	if !b.sink.waitFor(deliverWithin, func() bool { return strings.Contains(b.sink.stdout(), "$ ") }) {
		t.Fatalf("no shell prompt: %q", b.sink.stdout())
	}
	line := `echo "a<b>c|d&e;f'g\"h\$i~j" > /tmp/x; cat /tmp/x`
	b.do(action.Action{Kind: action.Type, Text: line + "\n"})
	want := `a<b>c|d&e;f'g"h$i~j`
	// The typed line (with its backslashes) is what xterm echoed; want
	// (without them) can only come from cat.
	ok := b.sink.waitFor(deliverWithin, func() bool {
		out := b.sink.stdout()
		return strings.Contains(out, line) && strings.Contains(out, want)
	})
	if !ok {
		t.Errorf("xterm did not show the exact line and its output %q:\n%q", want, b.sink.stdout())
	}
}

// xcalc: the digits shown after clicking 1 2 + 3 4 = are the same pixels as
// after typing 46 on the keyboard, and differ from the cleared display.
func (s *suite) testXcalc(t *testing.T) {
	b := s.newBox(t)
	lr := b.inImage("xcalc", nil, "Calculator")
	w := *lr.Window
	// xcalc's TI-30 layout: 5 columns 44 px apart, rows 30 px apart.
	button := func(row, col int) action.Action {
		x, y := pt(w.X+25+44*col, w.Y+76+30*row)
		return action.Action{Kind: action.Click, X: x, Y: y}
	}
	display := image.Rect(w.X+10, w.Y+5, w.X+w.Width-10, w.Y+45)
	crop := func() []byte {
		b.do(action.Action{Kind: action.Wait, Until: action.UntilStable, StableMS: 150, MS: 3000})
		f, _ := b.observe()
		var out []byte
		for y := display.Min.Y; y < display.Max.Y; y++ {
			out = append(out, f.Pix[4*(y*f.Width+display.Min.X):4*(y*f.Width+display.Max.X)]...)
		}
		return out
	}
	// settled is the display once two reads in a row agree: a screen
	// that held still for 150 ms is no proof that xcalc has handled the
	// input on a loaded machine (a sandbox's CPU quota can hold it off for
	// longer); want, when given, is waited for, up to 15 s.
	settled := func(want []byte) []byte {
		cur := crop()
		for end := time.Now().Add(15 * time.Second); time.Now().Before(end); {
			if want != nil && bytes.Equal(cur, want) {
				return cur
			}
			next := crop()
			if want == nil && bytes.Equal(next, cur) {
				return cur
			}
			cur = next
		}
		return cur
	}
	ac := button(0, 4)
	b.do(action.Action{Kind: action.Type, Text: "46"})
	typed := settled(nil)
	b.do(ac)
	cleared := settled(nil)
	if bytes.Equal(typed, cleared) {
		t.Fatal("the display region did not change when cleared: the probe cannot see digits")
	}
	b.do(button(9, 1), button(9, 2), button(9, 4), button(9, 3), button(8, 1), button(10, 4)) // 1 2 + 3 4 =
	clicked := settled(typed)
	if !bytes.Equal(clicked, typed) {
		f, _ := b.observe()
		png, _ := f.PNG()
		name := filepath.Join(testenv.Artifacts(t), strings.ReplaceAll(t.Name(), "/", "_")+".png")
		if err := os.WriteFile(name, png, 0o644); err != nil {
			name = err.Error()
		}
		t.Errorf("after clicking 1 2 + 3 4 = the display differs from typed 46 (the screen: %s)", name)
	}
}
