package x11

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/guest/xserver"
	"github.com/codegirl-games/agentbox/internal/xevents"
)

const (
	ksControlL = 0xffe3
	ksAltL     = 0xffe9
	ksSuperL   = 0xffeb
	ksLeft     = 0xff51
	ksTab      = 0xff09
	ksEscape   = 0xff1b
)

func isModifierKeysym(ks uint32) bool { return ks >= 0xffe1 && ks <= 0xffee }

// presses returns the non-modifier KeyPress events.
func presses(evs []xevents.Event) []xevents.Event {
	var out []xevents.Event
	for _, e := range evs {
		if e.Type == "KeyPress" && !isModifierKeysym(e.Keysym) {
			out = append(out, e)
		}
	}
	return out
}

// typingText is every printable ASCII character, some Latin-1, some
// characters outside Latin-1 (remapped to spare keycodes), and \n, \t.
func typingText() string {
	var sb strings.Builder
	for r := rune(0x20); r <= 0x7e; r++ {
		sb.WriteRune(r)
	}
	sb.WriteString("é ß € ✓ 日本\n\tÉ")
	return sb.String()
}

func TestTypeTextXev(t *testing.T) {
	for _, wm := range []bool{true, false} {
		t.Run(fmt.Sprintf("wm=%v", wm), func(t *testing.T) {
			e := newEnv(t, xserver.Config{}, wm)
			x := startXev(t, e.c, e.srv.Display())
			focusXev(t, e.c, x)
			text := typingText()
			ctx := testCtx(t, 30*time.Second)
			if err := e.c.TypeText(ctx, text, 0); err != nil {
				t.Fatalf("TypeText: %v", err)
			}
			want := []rune(text)
			evs := x.waitFor(t, "all key presses and releases", func(evs []xevents.Event) bool {
				return len(presses(evs)) >= len(want) && count(evs, "KeyPress") == count(evs, "KeyRelease")
			})
			got := presses(evs)
			if len(got) != len(want) {
				t.Fatalf("%d key presses, want %d: %s", len(got), len(want), summarize(evs))
			}
			for i, r := range want {
				ks, _ := RuneKeysym(r)
				g := got[i]
				if g.Keysym != ks {
					t.Errorf("char %d %q: keysym %#x (%s), want %#x", i, r, g.Keysym, g.KeysymName, ks)
				}
				var wantText string
				switch r {
				case '\n':
					wantText = "\r"
				case '\t':
					wantText = "\t"
				default:
					wantText = string(r)
				}
				if !g.HasMb || g.MbLookup != wantText {
					t.Errorf("char %d %q: XmbLookupString %q", i, r, g.MbLookup)
				}
			}
			if t.Failed() {
				t.Logf("events: %s", summarize(evs))
			}
			// Every press has its release and nothing stays down.
			if np, nr := count(evs, "KeyPress"), count(evs, "KeyRelease"); np != nr {
				t.Errorf("%d presses, %d releases", np, nr)
			}
		})
	}
}

func TestTypeTextReusesSpares(t *testing.T) {
	e := newEnv(t, xserver.Config{}, false)
	x := startXev(t, e.c, e.srv.Display())
	focusXev(t, e.c, x)
	// More distinct unmapped characters than Xvfb has spare keycodes, twice.
	var sb strings.Builder
	for r := rune(0x3b1); r < 0x3b1+25; r++ { // Greek α…
		sb.WriteRune(r)
	}
	text := sb.String() + sb.String()
	if err := e.c.TypeText(testCtx(t, 30*time.Second), text, 0); err != nil {
		t.Fatal(err)
	}
	want := []rune(text)
	evs := x.waitFor(t, "presses", func(evs []xevents.Event) bool { return len(presses(evs)) >= len(want) })
	got := presses(evs)
	for i, r := range want {
		if got[i].MbLookup != string(r) {
			t.Errorf("char %d: got %q want %q", i, got[i].MbLookup, string(r))
		}
	}
	t.Logf("spare keycodes: %d", len(e.c.kb.spares))
}

func TestTypeTextBadText(t *testing.T) {
	e := newEnv(t, xserver.Config{}, false)
	for _, s := range []string{"a\x01b", "\r", "a\x7f", "\xff", "x\u0085"} {
		if err := e.c.TypeText(testCtx(t, 5*time.Second), s, 0); !errors.Is(err, ErrBadText) {
			t.Errorf("TypeText(%q) = %v, want ErrBadText", s, err)
		}
	}
}

func TestChordXev(t *testing.T) {
	e := newEnv(t, xserver.Config{}, true)
	x := startXev(t, e.c, e.srv.Display())
	focusXev(t, e.c, x)
	ctx := testCtx(t, 20*time.Second)

	// ctrl+shift+t: Control_L, Shift_L, then t (reported as T: Shift is down).
	if err := e.c.Chord(ctx, []uint32{ksControlL, 0xffe1, 't'}, 1); err != nil {
		t.Fatal(err)
	}
	evs := x.waitFor(t, "ctrl+shift+t", func(evs []xevents.Event) bool { return count(evs, "KeyRelease") >= 3 })
	keys := xevents.Filter(evs, "KeyPress", "KeyRelease")
	want := []string{"KeyPress Control_L", "KeyPress Shift_L", "KeyPress T", "KeyRelease T", "KeyRelease Shift_L", "KeyRelease Control_L"}
	if got := keyNames(keys); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("ctrl+shift+t: got %v, want %v", got, want)
	}
	if keys[2].State&0x5 != 0x5 {
		t.Errorf("T pressed with state %#x, want Shift|Control", keys[2].State)
	}
	x.reset()

	// Combinations a window manager might swallow reach the application, and
	// a keysym that needs Shift gets it (ctrl+T → Shift_L around T).
	chords := [][]uint32{
		{ksAltL, ksTab},
		{ksControlL, ksAltL, ksLeft},
		{ksSuperL, 'e'},
		{ksAltL, 0xffbe /* F1 */},
		{ksControlL, 'T'},
		{ksEscape},
	}
	for _, ch := range chords {
		if err := e.c.Chord(ctx, ch, 2); err != nil {
			t.Fatal(err)
		}
	}
	evs = x.waitFor(t, "all chords", func(evs []xevents.Event) bool {
		n := 0
		for _, e := range evs {
			if e.Type == "KeyRelease" && e.Keysym == ksEscape {
				n++
			}
		}
		return n == 2
	})
	got := keyNames(xevents.Filter(evs, "KeyPress"))
	wantPress := []string{
		"KeyPress Alt_L", "KeyPress Tab", "KeyPress Alt_L", "KeyPress Tab",
		"KeyPress Control_L", "KeyPress Alt_L", "KeyPress Left", "KeyPress Control_L", "KeyPress Alt_L", "KeyPress Left",
		"KeyPress Super_L", "KeyPress e", "KeyPress Super_L", "KeyPress e",
		"KeyPress Alt_L", "KeyPress F1", "KeyPress Alt_L", "KeyPress F1",
		"KeyPress Control_L", "KeyPress Shift_L", "KeyPress T", "KeyPress Control_L", "KeyPress Shift_L", "KeyPress T",
		"KeyPress Escape", "KeyPress Escape",
	}
	if strings.Join(got, ",") != strings.Join(wantPress, ",") {
		t.Errorf("chords:\n got %v\nwant %v", got, wantPress)
	}
	if np, nr := count(evs, "KeyPress"), count(evs, "KeyRelease"); np != nr {
		t.Errorf("%d presses, %d releases", np, nr)
	}
}

func keyNames(evs []xevents.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type + " " + e.KeysymName
	}
	return out
}

func TestKeyDownUpAndModifiersWhileTyping(t *testing.T) {
	e := newEnv(t, xserver.Config{}, true)
	x := startXev(t, e.c, e.srv.Display())
	focusXev(t, e.c, x)
	ctx := testCtx(t, 20*time.Second)
	c := e.c

	if err := c.KeyDown(ctx, 0xffe1); err != nil { // Shift_L
		t.Fatal(err)
	}
	if k, _ := c.Held(); len(k) != 1 || k[0] != 0xffe1 {
		t.Fatalf("Held() = %v", k)
	}
	if err := c.TypeText(ctx, "aB", 0); err != nil {
		t.Fatal(err)
	}
	// A key pressed while Shift is held comes out shifted.
	if err := c.KeyDown(ctx, 'q'); err != nil {
		t.Fatal(err)
	}
	if err := c.KeyUp(ctx, 'q'); err != nil {
		t.Fatal(err)
	}
	if err := c.KeyUp(ctx, 0xffe1); err != nil {
		t.Fatal(err)
	}
	if k, b := c.Held(); len(k) != 0 || len(b) != 0 {
		t.Fatalf("Held() = %v %v after KeyUp", k, b)
	}
	evs := x.waitFor(t, "six key releases", func(evs []xevents.Event) bool { return count(evs, "KeyRelease") >= 6 })
	got := keyNames(xevents.Filter(evs, "KeyPress", "KeyRelease"))
	want := []string{
		"KeyPress Shift_L",
		"KeyRelease Shift_L", // cleared for typing
		"KeyPress a", "KeyRelease a",
		"KeyPress Shift_L", "KeyPress B", "KeyRelease B", "KeyRelease Shift_L", // B needs Shift itself
		"KeyPress Shift_L", // restored
		"KeyPress Q", "KeyRelease Q",
		"KeyRelease Shift_L",
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}

func TestKeyDownUnmappedKeysym(t *testing.T) {
	e := newEnv(t, xserver.Config{}, false)
	x := startXev(t, e.c, e.srv.Display())
	focusXev(t, e.c, x)
	warmKeyboard(t, e.c, x)
	ctx := testCtx(t, 20*time.Second)
	const euro = 0x10020ac
	if err := e.c.KeyDown(ctx, euro); err != nil {
		t.Fatal(err)
	}
	// Typing many other unmapped characters must not steal the held key's
	// keycode.
	if err := e.c.TypeText(ctx, "αβγδεζηθικλμνξοπρστυφχψωАБВГДЕЖЗИЙКЛМН", 0); err != nil {
		t.Fatal(err)
	}
	if err := e.c.KeyUp(ctx, euro); err != nil {
		t.Fatal(err)
	}
	evs := x.waitFor(t, "euro release", func(evs []xevents.Event) bool {
		return len(evs) > 0 && evs[len(evs)-1].Type == "KeyRelease" && evs[len(evs)-1].Keysym == euro
	})
	ke := xevents.Filter(evs, "KeyPress", "KeyRelease")
	if ke[0].Keysym != euro || ke[0].Type != "KeyPress" {
		t.Fatalf("first event %s; xev printed:\n%s", summarize(ke[:1]), x.output())
	}
	var typed []rune
	for _, e := range presses(ke[1:]) {
		typed = append(typed, []rune(e.MbLookup)...)
	}
	if want := "αβγδεζηθικλμνξοπρστυφχψωАБВГДЕЖЗИЙКЛМН"; string(typed) != want {
		t.Errorf("typed %q, want %q", string(typed), want)
	}
}

// TestNoBindingRightAfterFirstKey: the first binding after the Conn's first
// key press waits until reuseAge has passed since it, so that an app that
// loaded the keyboard map on that key has subscribed to its changes.
func TestNoBindingRightAfterFirstKey(t *testing.T) {
	e := newEnv(t, xserver.Config{}, false)
	ctx := testCtx(t, 10*time.Second)
	t0 := time.Now()
	if err := e.c.TypeText(ctx, "x", 0); err != nil {
		t.Fatal(err)
	}
	if err := e.c.TypeText(ctx, "€", 0); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(t0); took < reuseAge {
		t.Errorf("bound € %v after the first key press, want ≥ %v", took, reuseAge)
	}
}

func TestReleaseAll(t *testing.T) {
	e := newEnv(t, xserver.Config{}, false)
	ctx := testCtx(t, 10*time.Second)
	c := e.c
	for _, ks := range []uint32{ksControlL, 'a', 0x10020ac} {
		if err := c.KeyDown(ctx, ks); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ButtonDown(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.ButtonDown(ctx, 3); err != nil {
		t.Fatal(err)
	}
	keys, buttons := c.Held()
	if len(keys) != 3 || len(buttons) != 2 {
		t.Fatalf("Held() = %v %v", keys, buttons)
	}
	if err := c.ReleaseAll(ctx); err != nil {
		t.Fatal(err)
	}
	if keys, buttons := c.Held(); len(keys) != 0 || len(buttons) != 0 {
		t.Fatalf("Held() after ReleaseAll = %v %v", keys, buttons)
	}
	down, mask := serverInputState(t, c)
	if len(down) != 0 || mask&0x1f00 != 0 {
		t.Fatalf("still down after ReleaseAll: keys %v, button mask %#x", down, mask)
	}
}
