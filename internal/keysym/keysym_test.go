package keysym

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// mustName resolves an exact X name through the table only, so tests do
// not depend on the code under test for their expectations.
func mustName(t *testing.T, name string) Keysym {
	t.Helper()
	for _, e := range table {
		if e.name == name {
			return e.sym
		}
	}
	t.Fatalf("keysym %q is not in the generated table", name)
	return NoSymbol
}

func TestInternalConstants(t *testing.T) {
	for name, want := range map[string]Keysym{
		"space":            xkSpace,
		"plus":             xkPlus,
		"BackSpace":        xkBackSpace,
		"Tab":              xkTab,
		"Return":           xkReturn,
		"Pause":            xkPause,
		"Scroll_Lock":      xkScrollLock,
		"Escape":           xkEscape,
		"Home":             xkHome,
		"Left":             xkLeft,
		"Up":               xkUp,
		"Right":            xkRight,
		"Down":             xkDown,
		"Prior":            xkPrior,
		"Page_Up":          xkPrior,
		"Next":             xkNext,
		"Page_Down":        xkNext,
		"End":              xkEnd,
		"Print":            xkPrint,
		"Insert":           xkInsert,
		"Menu":             xkMenu,
		"Mode_switch":      xkModeSwitch,
		"Num_Lock":         xkNumLock,
		"F1":               xkF1,
		"F35":              xkF1 + 34,
		"Shift_L":          xkShiftL,
		"Control_L":        xkControlL,
		"Caps_Lock":        xkCapsLock,
		"Meta_L":           xkMetaL,
		"Alt_L":            xkAltL,
		"Super_L":          xkSuperL,
		"Hyper_R":          xkHyperR,
		"Delete":           xkDelete,
		"ISO_Level3_Shift": xkISOLevel3Shift,
		"ISO_Level5_Shift": xkISOLevel5Shift,
		"KP_Space":         0xff80,
		"KP_Tab":           0xff89,
		"KP_Enter":         0xff8d,
		"KP_Multiply":      0xffaa,
		"KP_9":             0xffb9,
		"KP_Equal":         0xffbd,
	} {
		if got := mustName(t, name); got != want {
			t.Errorf("table %s = %#x, constant says %#x", name, uint32(got), uint32(want))
		}
	}
}

func TestTableInvariants(t *testing.T) {
	if len(table) != numNames || len(byValue) != numNames {
		t.Fatalf("len(table)=%d len(byValue)=%d numNames=%d", len(table), len(byValue), numNames)
	}
	if numNames < 2400 {
		t.Errorf("only %d names generated; expected the full keysymdef.h + XF86keysym.h set", numNames)
	}
	seen := map[string]bool{}
	values := map[Keysym]bool{}
	for i, e := range table {
		if seen[e.name] {
			t.Errorf("duplicate name %q", e.name)
		}
		seen[e.name] = true
		values[e.sym] = true
		if i > 0 && compareFold(table[i-1].name, e.name) > 0 {
			t.Errorf("table not sorted: %q before %q", table[i-1].name, e.name)
		}
		if e.sym == NoSymbol || e.sym > maxKeysym {
			t.Errorf("%s has bad value %#x", e.name, uint32(e.sym))
		}
		for _, c := range []byte(e.name) {
			if c >= 0x80 {
				t.Errorf("non-ASCII name %q", e.name)
			}
		}
		// Unicode keysyms must carry their own code point.
		if e.sym&0xff000000 == unicodeBase && e.r != 0 && Keysym(e.r) != e.sym&^unicodeBase {
			t.Errorf("%s = %#x has code point %U", e.name, uint32(e.sym), e.r)
		}
		// Latin-1 keysyms are their own code points.
		if e.sym >= 0x20 && e.sym <= 0xff && e.r != 0 && Keysym(e.r) != e.sym {
			t.Errorf("%s = %#x has code point %U", e.name, uint32(e.sym), e.r)
		}
	}
	if len(values) != numValues {
		t.Errorf("%d distinct values, numValues = %d", len(values), numValues)
	}
	for i := 1; i < len(byValue); i++ {
		if table[byValue[i-1]].sym > table[byValue[i]].sym {
			t.Errorf("byValue not sorted at %d", i)
		}
	}
	for _, name := range []string{"XF86AudioPlay", "XF86MonBrightnessUp", "XF86Info", "XF86Switch_VT_1", "VoidSymbol", "EuroSign", "Babovedot", "braille_dots_12345678"} {
		mustName(t, name)
	}
	if got := mustName(t, "XF86Info"); got != 0x10081166 { // _EVDEVK(0x166)
		t.Errorf("XF86Info = %#x, want 0x10081166", uint32(got))
	}
}

func TestLookupExact(t *testing.T) {
	tests := []struct {
		name string
		want Keysym
	}{
		{"Return", 0xff0d},
		{"Page_Up", 0xff55},
		{"Prior", 0xff55},
		{"Page_Down", 0xff56},
		{"a", 0x61},
		{"A", 0x41},
		{"eacute", 0xe9},
		{"Eacute", 0xc9},
		{"Aacute", 0xc1},
		{"aacute", 0xe1},
		{"F5", 0xffc2},
		{"XF86AudioPlay", 0x1008ff14},
		{"XF86AudioRaiseVolume", 0x1008ff13},
		{"EuroSign", 0x20ac},
		{"checkmark", 0xaf3},
		{"Meta_L", 0xffe7},
		{"KP_Enter", 0xff8d},
		{"quoteright", 0x27}, // deprecated alias still resolves
		{"Eth", 0xd0},        // deprecated alias still resolves
		{"Henkan", 0xff23},
		{"script_switch", 0xff7e},
		{"VoidSymbol", 0xffffff},
		{"space", 0x20},
		{" ", 0x20},
		{"plus", 0x2b},
	}
	for _, tt := range tests {
		got, err := Lookup(tt.name)
		if err != nil || got != tt.want {
			t.Errorf("Lookup(%q) = %#x, %v; want %#x", tt.name, uint32(got), err, uint32(tt.want))
		}
	}
}

func TestLookupAliases(t *testing.T) {
	ctrl, alt, shift, super := Keysym(0xffe3), Keysym(0xffe9), Keysym(0xffe1), Keysym(0xffeb)
	groups := []struct {
		names []string
		want  Keysym
	}{
		{[]string{"ctrl", "control", "CTRL", "Ctrl", "CONTROL"}, ctrl},
		{[]string{"alt", "option", "ALT", "Alt", "OPTION"}, alt},
		{[]string{"shift", "SHIFT", "Shift"}, shift},
		{[]string{"super", "cmd", "command", "win", "windows", "meta", "SUPER", "CMD", "WIN", "META", "Command", "Windows"}, super},
		{[]string{"enter", "return", "ENTER", "RETURN", "Enter"}, 0xff0d},
		{[]string{"esc", "escape", "ESC", "ESCAPE", "Esc"}, 0xff1b},
		{[]string{"backspace", "BACKSPACE", "Backspace", "BackSpace"}, 0xff08},
		{[]string{"tab", "TAB", "Tab"}, 0xff09},
		{[]string{"space", "SPACE", "Space"}, 0x20},
		{[]string{"delete", "del", "DELETE", "DEL", "Delete"}, 0xffff},
		{[]string{"insert", "ins", "INSERT", "Insert"}, 0xff63},
		{[]string{"home", "HOME", "Home"}, 0xff50},
		{[]string{"end", "END", "End"}, 0xff57},
		{[]string{"pageup", "page_up", "pgup", "prior", "PAGEUP", "PageUp", "PGUP", "Page_Up", "Prior"}, 0xff55},
		{[]string{"pagedown", "page_down", "pgdn", "next", "PAGEDOWN", "PageDown", "PGDN", "Page_Down", "Next"}, 0xff56},
		{[]string{"up", "arrowup", "ARROWUP", "ArrowUp", "UP", "Up", "arrow_up"}, 0xff52},
		{[]string{"down", "arrowdown", "ARROWDOWN", "ArrowDown", "DOWN", "Down", "arrow_down"}, 0xff54},
		{[]string{"left", "arrowleft", "ARROWLEFT", "ArrowLeft", "LEFT", "Left", "arrow_left"}, 0xff51},
		{[]string{"right", "arrowright", "ARROWRIGHT", "ArrowRight", "RIGHT", "Right", "arrow_right"}, 0xff53},
		{[]string{"capslock", "CAPSLOCK", "CapsLock", "Caps_Lock", "caps_lock"}, 0xffe5},
		{[]string{"numlock", "NUMLOCK", "NumLock", "Num_Lock"}, 0xff7f},
		{[]string{"scrolllock", "Scroll_Lock"}, 0xff14},
		{[]string{"printscreen", "print", "PRINTSCREEN", "PrintScreen", "Print", "PRINT"}, 0xff61},
		{[]string{"menu", "MENU", "Menu", "contextmenu", "ContextMenu"}, 0xff67},
		{[]string{"pause", "PAUSE", "Pause"}, 0xff13},
		{[]string{"altgr", "AltGr", "ISO_Level3_Shift"}, 0xfe03},
	}
	for _, g := range groups {
		for _, name := range g.names {
			got, err := Lookup(name)
			if err != nil || got != g.want {
				t.Errorf("Lookup(%q) = %v (%#x), %v; want %v (%#x)", name, got, uint32(got), err, g.want, uint32(g.want))
			}
		}
	}
	for i := 1; i <= 35; i++ {
		want := Keysym(0xffbe + i - 1)
		for _, name := range []string{fmt.Sprintf("f%d", i), fmt.Sprintf("F%d", i)} {
			got, err := Lookup(name)
			if err != nil || got != want {
				t.Errorf("Lookup(%q) = %#x, %v; want %#x", name, uint32(got), err, uint32(want))
			}
		}
		if got := Name(want); got != fmt.Sprintf("F%d", i) {
			t.Errorf("Name(%#x) = %q, want F%d", uint32(want), got, i)
		}
	}
	for _, name := range []string{"f0", "f36", "F36", "f01", "f+1", "f-1", "F0"} {
		if _, err := Lookup(name); err == nil {
			t.Errorf("Lookup(%q) succeeded, want error", name)
		}
	}
	// Every alias resolves to its table value (no exact X name shadows it
	// with a different keysym) and is lower-case.
	for a, want := range aliases {
		if a != strings.ToLower(a) {
			t.Errorf("alias %q is not lower-case", a)
		}
		for _, name := range []string{a, strings.ToUpper(a)} {
			if got, err := Lookup(name); err != nil || got != want {
				t.Errorf("Lookup(%q) = %v, %v; want alias value %v", name, got, err, want)
			}
		}
	}
}

// The printable ASCII characters and their keysymdef.h names, in order.
var asciiNames = []string{
	"space", "exclam", "quotedbl", "numbersign", "dollar", "percent",
	"ampersand", "apostrophe", "parenleft", "parenright", "asterisk", "plus",
	"comma", "minus", "period", "slash",
	"0", "1", "2", "3", "4", "5", "6", "7", "8", "9",
	"colon", "semicolon", "less", "equal", "greater", "question", "at",
	"A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K", "L", "M",
	"N", "O", "P", "Q", "R", "S", "T", "U", "V", "W", "X", "Y", "Z",
	"bracketleft", "backslash", "bracketright", "asciicircum", "underscore", "grave",
	"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m",
	"n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x", "y", "z",
	"braceleft", "bar", "braceright", "asciitilde",
}

func TestPrintableASCII(t *testing.T) {
	if len(asciiNames) != 0x7f-0x20 {
		t.Fatalf("asciiNames has %d entries", len(asciiNames))
	}
	for i, name := range asciiNames {
		r := rune(0x20 + i)
		want := mustName(t, name)
		if want != Keysym(r) {
			t.Errorf("header %s = %#x, want %#x", name, uint32(want), r)
		}
		if got, err := Lookup(string(r)); err != nil || got != want {
			t.Errorf("Lookup(%q) = %#x, %v; want %s", string(r), uint32(got), err, name)
		}
		if got, err := Lookup(name); err != nil || got != want {
			t.Errorf("Lookup(%q) = %#x, %v; want %#x", name, uint32(got), err, uint32(want))
		}
		if got, err := ForRune(r); err != nil || got != want {
			t.Errorf("ForRune(%q) = %#x, %v; want %s", r, uint32(got), err, name)
		}
		if got := Name(want); got != name {
			t.Errorf("Name(%#x) = %q, want %q", uint32(want), got, name)
		}
		if got, ok := want.Rune(); !ok || got != r {
			t.Errorf("%s.Rune() = %q, %v; want %q", name, got, ok, r)
		}
	}
}

func TestUnicode(t *testing.T) {
	tests := []struct {
		s    string
		want Keysym
		name string
	}{
		{"é", 0xe9, "eacute"},
		{"É", 0xc9, "Eacute"},
		{"ß", 0xdf, "ssharp"},
		{"\u00a0", 0xa0, "nobreakspace"},
		{"ÿ", 0xff, "ydiaeresis"},
		{"€", 0x10020ac, "U+20AC"}, // not EuroSign (0x20ac): same as ForRune
		{"✓", 0x1002713, "U+2713"}, // not checkmark (0xaf3)
		{"日", 0x10065e5, "U+65E5"},
		{"本", 0x100672c, "U+672C"},
		{"Ḃ", 0x1001e02, "Babovedot"}, // keysymdef.h names this Unicode keysym
		{"😀", 0x101f600, "U+1F600"},
		{"\u200d", 0x100200d, "U+200D"}, // zero-width joiner (emoji sequences)
	}
	for _, tt := range tests {
		r := []rune(tt.s)[0]
		got, err := Lookup(tt.s)
		if err != nil || got != tt.want {
			t.Errorf("Lookup(%q) = %#x, %v; want %#x", tt.s, uint32(got), err, uint32(tt.want))
		}
		if got, err := ForRune(r); err != nil || got != tt.want {
			t.Errorf("ForRune(%q) = %#x, %v; want %#x", r, uint32(got), err, uint32(tt.want))
		}
		if got := Name(tt.want); got != tt.name {
			t.Errorf("Name(%#x) = %q, want %q", uint32(tt.want), got, tt.name)
		}
		if got, ok := tt.want.Rune(); !ok || got != r {
			t.Errorf("Keysym(%#x).Rune() = %q, %v; want %q", uint32(tt.want), got, ok, r)
		}
	}
	// The legacy keysyms still produce their characters.
	for name, want := range map[string]rune{"EuroSign": '€', "checkmark": '✓', "Greek_alpha": 'α', "Cyrillic_zhe": 'ж', "horizconnector": '─'} {
		if got, ok := mustName(t, name).Rune(); !ok || got != want {
			t.Errorf("%s.Rune() = %q, %v; want %q", name, got, ok, want)
		}
	}
}

func TestForRune(t *testing.T) {
	ok := []struct {
		r    rune
		want Keysym
	}{
		{'\n', 0xff0d},
		{'\t', 0xff09},
		{' ', 0x20},
		{'~', 0x7e},
		{0xa0, 0xa0},
		{0xad, 0xad}, // soft hyphen: Latin-1 keysym "hyphen"
		{0xff, 0xff},
		{0x100, 0x1000100},
		{0xfffd, 0x100fffd},
		{0x10ffff, 0x110ffff},
	}
	for _, tt := range ok {
		if got, err := ForRune(tt.r); err != nil || got != tt.want {
			t.Errorf("ForRune(%U) = %#x, %v; want %#x", tt.r, uint32(got), err, uint32(tt.want))
		}
	}
	for _, r := range []rune{0, '\r', 0x07, 0x1b, 0x7f, 0x80, 0x85, 0x9f, 0xd800, 0xdfff, 0x110000, -1} {
		k, err := ForRune(r)
		var re *RuneError
		if !errors.As(err, &re) || re.Rune != r || k != NoSymbol {
			t.Errorf("ForRune(%#x) = %#x, %v; want *RuneError", r, uint32(k), err)
		}
	}
	// Every non-control rune in the BMP maps to a keysym that types it back,
	// except '\n' (Return types '\r').
	for r := rune(0); r < 0x10000; r++ {
		k, err := ForRune(r)
		if err != nil {
			if r == '\n' || r == '\t' || !unicode.IsControl(r) && (r < 0xd800 || r > 0xdfff) {
				t.Errorf("ForRune(%U): %v", r, err)
			}
			continue
		}
		if got, ok := k.Rune(); r != '\n' && (!ok || got != r) {
			t.Errorf("ForRune(%U).Rune() = %U, %v", r, got, ok)
		}
	}
}

func TestLookupCaseInsensitive(t *testing.T) {
	tests := []struct {
		name string
		want Keysym
	}{
		{"RIGHT", 0xff53},
		{"page_up", 0xff55},
		{"PAGE_DOWN", 0xff56},
		{"f5", 0xffc2},
		{"RETURN", 0xff0d},
		{"kp_enter", 0xff8d},
		{"KP_ENTER", 0xff8d},
		{"xf86audioplay", 0x1008ff14},
		{"XF86AUDIOMUTE", 0x1008ff12},
		{"EUROSIGN", 0x20ac},
		{"meta_l", 0xffe7},
		{"SUPER_R", 0xffec},
		{"scroll_lock", 0xff14},
		{"ETH", 0xd0},   // exact
		{"eth", 0xf0},   // exact
		{"Thorn", 0xde}, // exact (deprecated spelling)
	}
	for _, tt := range tests {
		got, err := Lookup(tt.name)
		if err != nil || got != tt.want {
			t.Errorf("Lookup(%q) = %#x, %v; want %#x", tt.name, uint32(got), err, uint32(tt.want))
		}
	}
}

func TestLookupAmbiguous(t *testing.T) {
	tests := []struct {
		name       string
		candidates []string
	}{
		{"AACUTE", []string{"Aacute", "aacute"}},
		{"aAcute", []string{"Aacute", "aacute"}},
		{"EACUTE", []string{"Eacute", "eacute"}},
		{"eTh", []string{"ETH", "Eth", "eth"}},
		{"THorn", []string{"THORN", "Thorn", "thorn"}},
		{"GREEK_ALPHA", []string{"Greek_ALPHA", "Greek_alpha"}},
		{"cyrillic_ZHE", []string{"Cyrillic_ZHE", "Cyrillic_zhe"}},
	}
	for _, tt := range tests {
		k, err := Lookup(tt.name)
		var ae *AmbiguousKeyError
		if !errors.As(err, &ae) {
			t.Errorf("Lookup(%q) = %#x, %v; want *AmbiguousKeyError", tt.name, uint32(k), err)
			continue
		}
		if ae.Name != tt.name || !slices.Equal(ae.Candidates, tt.candidates) {
			t.Errorf("Lookup(%q) error = %+v, want candidates %q", tt.name, ae, tt.candidates)
		}
		msg := err.Error()
		if !strings.Contains(msg, "differ only in case") || !strings.Contains(msg, fmt.Sprintf("%q", tt.name)) {
			t.Errorf("Lookup(%q) error %q does not explain the ambiguity", tt.name, msg)
		}
		for _, c := range tt.candidates {
			if got, err := Lookup(c); err != nil || got != mustName(t, c) {
				t.Errorf("exact Lookup(%q) = %#x, %v", c, uint32(got), err)
			}
		}
	}
	// Single letters are exact names and never ambiguous.
	if a, _ := Lookup("a"); a != 'a' {
		t.Errorf(`Lookup("a") = %#x`, uint32(a))
	}
	if a, _ := Lookup("A"); a != 'A' {
		t.Errorf(`Lookup("A") = %#x`, uint32(a))
	}
}

func TestLookupUnknown(t *testing.T) {
	tests := []struct {
		name        string
		suggestions []string
		msg         string
	}{
		{"Retrun", []string{"Return"}, `unknown key "Retrun" (did you mean "Return"?)`},
		{"ctlr", []string{"ctrl"}, `unknown key "ctlr" (did you mean "ctrl"?)`},
		{"shft", []string{"shift"}, ""},
		{"Escpe", []string{"Escape", "esc"}, `unknown key "Escpe" (did you mean "Escape" or "esc"?)`},
		{"XF86AudioPlya", []string{"XF86AudioPlay", "XF86AudioPrev"}, ""},
		{"page up", []string{"Page_Up", "pageup"}, ""},
		{"f36", []string{"F3", "F6", "F16"}, `unknown key "f36" (did you mean "F3", "F6" or "F16"?)`},
		// A common name first, and an obscure one farther away not at all.
		{"Rihgt", []string{"Right"}, `unknown key "Rihgt" (did you mean "Right"?)`},
		{"left_", []string{"Left", "leftt"}, ""}, // leftt as close as Left
		{"Delte", []string{"Delete", "del"}, ""},
		{"arrowlft", []string{"arrowleft", "arrow_left"}, ""},
		{"no_such_key_at_all", nil, `unknown key "no_such_key_at_all"`},
		{"", nil, "empty key name"},
		{"\x01", nil, ""},
		{"\x7f", nil, ""},
		{"\xff", nil, ""},
		{"ab\xffcd", nil, ""},
		{"0x0", nil, ""},
		{"0x", nil, ""},
		{"0x20000000", nil, ""},
		{"0xfffffffff", nil, ""},
		{"0xgg", nil, ""},
		{"U+0007", nil, ""},
		{"U+000A", nil, ""},
		{"U+D800", nil, ""},
		{"U+110000", nil, ""},
		{"U+", nil, ""},
		{"U+-1", nil, ""},
		{"Ctrl+C", nil, ""}, // chords are ParseChord's job
		{strings.Repeat("x", 1000), nil, ""},
	}
	for _, tt := range tests {
		k, err := Lookup(tt.name)
		var ue *UnknownKeyError
		if !errors.As(err, &ue) || k != NoSymbol {
			t.Errorf("Lookup(%q) = %#x, %v; want *UnknownKeyError", tt.name, uint32(k), err)
			continue
		}
		if ue.Name != tt.name {
			t.Errorf("Lookup(%q): error names %q", tt.name, ue.Name)
		}
		if tt.suggestions != nil && !slices.Equal(ue.Suggestions, tt.suggestions) {
			t.Errorf("Lookup(%q) suggestions = %q, want %q", tt.name, ue.Suggestions, tt.suggestions)
		}
		if len(ue.Suggestions) > 3 {
			t.Errorf("Lookup(%q): %d suggestions", tt.name, len(ue.Suggestions))
		}
		if tt.msg != "" && err.Error() != tt.msg {
			t.Errorf("Lookup(%q) error = %q, want %q", tt.name, err, tt.msg)
		}
	}
}

func TestLookupNumeric(t *testing.T) {
	tests := []struct {
		name string
		want Keysym
	}{
		{"0xff0d", 0xff0d},
		{"0XFF0D", 0xff0d},
		{"0x1008ff14", 0x1008ff14},
		{"0x20ac", 0x20ac},
		{"0x10020ac", 0x10020ac},
		{"0x1fffffff", 0x1fffffff},
		{"0x1", 0x1},
		{"U+20AC", 0x10020ac},
		{"u+20ac", 0x10020ac},
		{"U20AC", 0x10020ac}, // Xlib's XStringToKeysym spelling
		{"U+00E9", 0xe9},     // Latin-1 stays Latin-1, as in Xlib
		{"U00E9", 0xe9},
		{"U+0041", 0x41},
		{"U+1F600", 0x101f600},
	}
	for _, tt := range tests {
		got, err := Lookup(tt.name)
		if err != nil || got != tt.want {
			t.Errorf("Lookup(%q) = %#x, %v; want %#x", tt.name, uint32(got), err, uint32(tt.want))
		}
	}
}

func TestName(t *testing.T) {
	tests := []struct {
		k    Keysym
		want string
	}{
		{0xff0d, "Return"},
		{0xff55, "Prior"}, // first listed; Page_Up comes second
		{0xff56, "Next"},
		{0x27, "apostrophe"}, // not quoteright (deprecated)
		{0x60, "grave"},      // not quoteleft (deprecated)
		{0xd0, "ETH"},        // not Eth (deprecated)
		{0xde, "THORN"},      // not Thorn (deprecated)
		{0xff7e, "Mode_switch"},
		{0xff23, "Henkan_Mode"},
		{0xfe53, "dead_tilde"},
		{0x20ac, "EuroSign"},
		{0x1008ff14, "XF86AudioPlay"},
		{0x10020ac, "U+20AC"},
		{0x1000100, "U+0100"},
		{0x10000e9, "0x10000e9"}, // Latin-1 range of the Unicode block: no U+ form
		{0x100d800, "0x100d800"}, // surrogate
		{0x12345, "0x12345"},
		{0, "0x0"},
	}
	for _, tt := range tests {
		if got := Name(tt.k); got != tt.want {
			t.Errorf("Name(%#x) = %q, want %q", uint32(tt.k), got, tt.want)
		}
		if got := tt.k.String(); got != tt.want {
			t.Errorf("Keysym(%#x).String() = %q, want %q", uint32(tt.k), got, tt.want)
		}
		if got := fmt.Sprint(tt.k); got != tt.want {
			t.Errorf("fmt.Sprint(Keysym(%#x)) = %q, want %q", uint32(tt.k), got, tt.want)
		}
	}
}

func TestNameRoundTrip(t *testing.T) {
	check := func(k Keysym) {
		t.Helper()
		if got, err := Lookup(Name(k)); err != nil || got != k {
			t.Errorf("Lookup(Name(%#x) = %q) = %#x, %v", uint32(k), Name(k), uint32(got), err)
		}
	}
	for _, e := range table {
		check(e.sym)
		// Every name resolves to its own value by exact lookup.
		if got, err := Lookup(e.name); err != nil || got != e.sym {
			t.Errorf("Lookup(%q) = %#x, %v; want %#x", e.name, uint32(got), err, uint32(e.sym))
		}
	}
	for _, k := range []Keysym{0x10020ac, 0x1000100, 0x110ffff, 0x10000e9, 0x100d800, 0x1, 0x12345, 0x1fffffff} {
		check(k)
	}
}

func TestRune(t *testing.T) {
	tests := []struct {
		k    Keysym
		want rune
		ok   bool
	}{
		{0x61, 'a', true},
		{0xe9, 'é', true},
		{0xa0, 0xa0, true},
		{0x20ac, '€', true},    // EuroSign, from the header comment
		{0x10020ac, '€', true}, // Unicode keysym
		{0xaf3, '✓', true},     // checkmark
		{0x6c0, 'ю', true},     // Cyrillic_yu
		{0x8a3, '─', true},     // horizconnector: "(U+2500 …)" legacy mapping
		{0xff08, '\b', true},   // BackSpace
		{0xff09, '\t', true},   // Tab
		{0xff0a, '\n', true},   // Linefeed
		{0xff0d, '\r', true},   // Return
		{0xff1b, 0x1b, true},   // Escape
		{0xffff, 0x7f, true},   // Delete
		{0xff80, ' ', true},    // KP_Space
		{0xff8d, '\r', true},   // KP_Enter
		{0xffb5, '5', true},    // KP_5
		{0xffab, '+', true},    // KP_Add
		{0xffbd, '=', true},    // KP_Equal
		{0xff55, 0, false},     // Prior
		{0xffe3, 0, false},     // Control_L
		{0x1008ff14, 0, false}, // XF86AudioPlay
		{0x100d800, 0, false},  // surrogate
		{0x1110000, 0, false},  // beyond Unicode
		{0x7f, 0, false},
		{0x85, 0, false},
		{0, 0, false},
	}
	for _, tt := range tests {
		got, ok := tt.k.Rune()
		if got != tt.want || ok != tt.ok {
			t.Errorf("Keysym(%#x).Rune() = %q, %v; want %q, %v", uint32(tt.k), got, ok, tt.want, tt.ok)
		}
	}
}

func TestIsModifier(t *testing.T) {
	mods := []string{
		"Shift_L", "Shift_R", "Control_L", "Control_R", "Alt_L", "Alt_R",
		"Meta_L", "Meta_R", "Super_L", "Super_R", "Hyper_L", "Hyper_R",
		"ISO_Level3_Shift", "ISO_Level5_Shift", "Mode_switch", "ISO_Group_Shift",
		"Caps_Lock", "Shift_Lock", "Num_Lock",
	}
	for _, name := range mods {
		if !IsModifier(mustName(t, name)) {
			t.Errorf("IsModifier(%s) = false", name)
		}
	}
	for _, name := range []string{"ctrl", "shift", "alt", "meta", "cmd", "super", "win", "altgr", "capslock", "numlock"} {
		k, err := Lookup(name)
		if err != nil || !IsModifier(k) {
			t.Errorf("IsModifier(Lookup(%q)) = false (%v)", name, err)
		}
	}
	for _, name := range []string{"a", "A", "Return", "space", "Escape", "Tab", "F1", "Scroll_Lock", "Multi_key", "ISO_Left_Tab", "Menu", "XF86AudioPlay", "VoidSymbol"} {
		if IsModifier(mustName(t, name)) {
			t.Errorf("IsModifier(%s) = true", name)
		}
	}
	if IsModifier(NoSymbol) {
		t.Error("IsModifier(NoSymbol) = true")
	}
}
