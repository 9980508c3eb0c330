package envtest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/cpuload"
	"github.com/codegirl-games/agentbox/internal/keysym"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/internal/xevents"
	"github.com/codegirl-games/agentbox/observe"
)

// loadRounds is how many times the mixed sequence is sent under load; every
// round must arrive exactly.
const loadRounds = 20

// testInputUnderLoad saturates every CPU with busy loops and sends xev a
// mixed sequence of input loadRounds times: clicks with three buttons at
// three places, a double click, a drag through several points, scrolls both
// ways, a chord, a key held across a click, and text with characters that
// need Shift, Latin-1 and characters missing from the keymap (more of them
// over the rounds than there are spare keycodes). Every event must arrive
// exactly as sent, every round.
func (s *suite) testInputUnderLoad(t *testing.T) {
	testenv.Require(t, testenv.Slow("saturates every CPU for about a minute"))
	b, w := s.xevBox(t)
	// Xlib loads the keyboard map with its first key event: let xev do that
	// before the load starts (a person's first key is no different).
	b.do(action.Action{Kind: action.Type, Text: "x"})
	b.events(1, "KeyRelease")
	cpuload.Start(t, 8)
	var confirm []time.Duration
	for round := range loadRounds {
		from := len(xevents.Parse(b.sink.stdout()))
		acts, wantButtons, wantKeys, mid := mixedSequence(w, round)
		res := b.do(acts...)
		var c time.Duration
		for i, r := range res {
			if !r.OK {
				t.Fatalf("round %d: %s: %s", round, acts[i], r.Error)
			}
			c += time.Duration(r.ConfirmUS) * time.Microsecond
		}
		confirm = append(confirm, c)
		var evs []xevents.Event
		b.sink.waitFor(deliverWithin, func() bool {
			evs = xevents.Parse(b.sink.stdout())[from:]
			return len(xevents.Filter(evs, "ButtonPress", "ButtonRelease")) >= len(wantButtons) &&
				len(xevents.Filter(evs, "KeyPress", "KeyRelease")) >= len(wantKeys)
		})
		if got := buttonEvents(evs); !slices.Equal(got, wantButtons) {
			t.Errorf("round %d: buttons\n got %v\nwant %v", round, got, wantButtons)
		}
		if got := keyEvents(evs); !slices.Equal(got, wantKeys) {
			t.Errorf("round %d: keys\n got %v\nwant %v", round, got, wantKeys)
		}
		if !dragPassed(evs, mid) {
			t.Errorf("round %d: no motion with button 1 held through the drag's middle point %v", round, mid)
		}
		if t.Failed() {
			// Say where the window is now against where it was when the
			// round's places were computed, and what xev printed last: a
			// window managed or moved after its launch reads the same as
			// lost input.
			t.Logf("xev's window at launch: %+v", w)
			b.explainXev()
			t.Fatalf("round %d of %d under load went wrong (see above)", round+1, loadRounds)
		}
	}
	slices.Sort(confirm)
	t.Logf("%d rounds exact under load; input confirmation per round: median %v, max %v",
		loadRounds, confirm[len(confirm)/2], confirm[len(confirm)-1])
}

// mixedSequence returns the actions of one round, the button and key events
// xev must print for them ("ButtonPress 3 (x,y)", "+Shift_L"), and the
// drag's middle point, which motion must pass.
func mixedSequence(w observe.Window, round int) (acts []action.Action, buttons, keys []string, mid action.Point) {
	at := func(dx, dy int) (int, int) { return w.X + dx, w.Y + dy }
	btn := func(typ string, n, x, y int) string { return fmt.Sprintf("%s %d (%d,%d)", typ, n, x, y) }
	click := func(b action.Button, n, count, x, y int, mods string) {
		acts = append(acts, action.Action{Kind: action.Click, Button: b, Count: count, X: &x, Y: &y, Keys: mods})
		for range count {
			buttons = append(buttons, btn("ButtonPress", n, x, y), btn("ButtonRelease", n, x, y))
		}
	}
	shift := round % 7 // the places move a little each round
	x, y := at(20+shift, 30)
	click(action.Left, 1, 1, x, y, "")
	x, y = at(270, 180+shift)
	click(action.Right, 3, 1, x, y, "")
	x, y = at(520-shift, 370)
	click(action.Middle, 2, 1, x, y, "")
	x, y = at(400, 60)
	click(action.Left, 1, 2, x, y, "") // a double click
	// A drag through three points.
	p0x, p0y := at(60, 300)
	p1x, p1y := at(200+shift, 240)
	p2x, p2y := at(420, 330)
	acts = append(acts, action.Action{Kind: action.Drag, Path: action.Path{{X: p0x, Y: p0y}, {X: p1x, Y: p1y}, {X: p2x, Y: p2y}}})
	buttons = append(buttons, btn("ButtonPress", 1, p0x, p0y), btn("ButtonRelease", 1, p2x, p2y))
	mid = action.Point{X: p1x, Y: p1y}
	// Scrolls: two down and one left at one place.
	sx, sy := at(300, 250)
	acts = append(acts, action.Action{Kind: action.Scroll, X: &sx, Y: &sy, DY: action.Int(2), DX: action.Int(-1)})
	for _, n := range []int{5, 5, 6} {
		buttons = append(buttons, btn("ButtonPress", n, sx, sy), btn("ButtonRelease", n, sx, sy))
	}
	// A chord, then Shift held across a click.
	acts = append(acts, action.Action{Kind: action.Key, Keys: "ctrl+shift+t"})
	keys = append(keys, "+Control_L", "+Shift_L", "+T", "-T", "-Shift_L", "-Control_L")
	acts = append(acts, action.Action{Kind: action.KeyDown, Key: "shift"})
	keys = append(keys, "+Shift_L")
	x, y = at(100, 100)
	click(action.Left, 1, 1, x, y, "")
	acts = append(acts, action.Action{Kind: action.KeyUp, Key: "shift"})
	keys = append(keys, "-Shift_L")
	// Text: Shift for the capital, Latin-1, and characters the keymap lacks:
	// four new ones each round, so that after a few rounds every spare
	// keycode is rebound while xev may still be reading earlier presses.
	text := "Hé€✓日本 ok"
	for i := range 4 {
		text += string(rune(0x4e00 + 4*round + i))
	}
	acts = append(acts, action.Action{Kind: action.Type, Text: text})
	for _, r := range text {
		ks, _ := keysym.ForRune(r)
		name := keyName(uint32(ks))
		if r == 'H' {
			keys = append(keys, "+Shift_L", "+"+name, "-"+name, "-Shift_L")
			continue
		}
		keys = append(keys, "+"+name, "-"+name)
	}
	return acts, buttons, keys, mid
}

// keyName names a keysym as the comparisons do: the symbolic name for the
// keys a chord presses, else its value.
func keyName(ks uint32) string {
	switch ks {
	case 0xffe1:
		return "Shift_L"
	case 0xffe3:
		return "Control_L"
	case 'T':
		return "T"
	}
	return fmt.Sprintf("%#x", ks)
}

func buttonEvents(evs []xevents.Event) []string {
	var out []string
	for _, e := range xevents.Filter(evs, "ButtonPress", "ButtonRelease") {
		out = append(out, fmt.Sprintf("%s %d (%d,%d)", e.Type, e.Button, e.RootX, e.RootY))
	}
	return out
}

func keyEvents(evs []xevents.Event) []string {
	var out []string
	for _, e := range xevents.Filter(evs, "KeyPress", "KeyRelease") {
		sign := "+"
		if e.Type == "KeyRelease" {
			sign = "-"
		}
		out = append(out, sign+keyName(e.Keysym))
	}
	return out
}

// dragPassed reports whether a motion event with button 1 held passed
// through p.
func dragPassed(evs []xevents.Event, p action.Point) bool {
	return slices.ContainsFunc(xevents.Filter(evs, "MotionNotify"), func(e xevents.Event) bool {
		return e.State&0x100 != 0 && e.RootX == p.X && e.RootY == p.Y
	})
}
