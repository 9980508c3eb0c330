// Package keysym turns key names, as agents, xdotool and humans write them,
// into X11 keysym values and back. It is pure Go: it needs no X connection
// and no cgo.
//
// The name table in zz_table.go is generated from the X11 headers
// keysymdef.h and XF86keysym.h (Debian package x11proto-dev); see gen.go.
// It contains every XK_name (as "name") and XF86XK_name (as "XF86name",
// the spelling XStringToKeysym accepts), deprecated aliases included.
//
// Resolution rules are documented on [Lookup] and [ParseChord]; typing text
// character by character uses [ForRune].
package keysym

//go:generate go run gen.go

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Keysym is an X11 keysym value (a 29-bit code, see the X11 protocol,
// appendix A). The zero value is NoSymbol.
type Keysym uint32

// NoSymbol is the X11 "no keysym" value. No function in this package
// returns it without an error.
const NoSymbol Keysym = 0

// entry is one row of the generated table.
type entry struct {
	name string
	sym  Keysym
	r    rune // Unicode code point from the header comment, 0 if none
}

// Keysyms this package refers to by value. keysym_test.go checks them
// against the generated table.
const (
	xkSpace          Keysym = 0x0020
	xkPlus           Keysym = 0x002b
	xkBackSpace      Keysym = 0xff08
	xkTab            Keysym = 0xff09
	xkReturn         Keysym = 0xff0d
	xkPause          Keysym = 0xff13
	xkScrollLock     Keysym = 0xff14
	xkEscape         Keysym = 0xff1b
	xkHome           Keysym = 0xff50
	xkLeft           Keysym = 0xff51
	xkUp             Keysym = 0xff52
	xkRight          Keysym = 0xff53
	xkDown           Keysym = 0xff54
	xkPrior          Keysym = 0xff55 // also named Page_Up
	xkNext           Keysym = 0xff56 // also named Page_Down
	xkEnd            Keysym = 0xff57
	xkPrint          Keysym = 0xff61
	xkInsert         Keysym = 0xff63
	xkMenu           Keysym = 0xff67
	xkModeSwitch     Keysym = 0xff7e
	xkNumLock        Keysym = 0xff7f
	xkF1             Keysym = 0xffbe // F1..F35 are consecutive
	xkShiftL         Keysym = 0xffe1
	xkControlL       Keysym = 0xffe3
	xkCapsLock       Keysym = 0xffe5
	xkMetaL          Keysym = 0xffe7
	xkAltL           Keysym = 0xffe9
	xkSuperL         Keysym = 0xffeb
	xkHyperR         Keysym = 0xffee
	xkDelete         Keysym = 0xffff
	xkISOLevel3Shift Keysym = 0xfe03
	xkISOLevel5Shift Keysym = 0xfe11

	unicodeBase Keysym = 0x01000000 // keysym = unicodeBase | code point, for code points >= 0x100
	maxKeysym   Keysym = 0x1fffffff // keysyms are 29-bit values
)

// Lookup resolves a key name to a keysym. It tries, in order:
//
//  1. An exact X keysym name, as XStringToKeysym spells it: "Return",
//     "Page_Up", "a", "A", "eacute", "F5", "XF86AudioPlay".
//  2. A case-insensitive alias used by xdotool and computer-use models:
//     "ctrl", "alt", "cmd", "enter", "esc", "pgup", "arrowleft", "f1"…"f35",
//     "CTRL", "ENTER", "ARROWLEFT", … (see the alias table in alias.go).
//     "meta", "super", "cmd", "command", "win" and "windows" all mean
//     Super_L, the key a browser reports as "Meta" (Windows/Command key);
//     see alias.go for why "meta" is not Meta_L.
//  3. A single character names the key that types it, exactly as [ForRune]
//     maps it: "/" is slash, "<" is less, "é" is eacute (0xe9), and every
//     character from U+0100 up is 0x01000000|r, so "€" is 0x10020ac, not the
//     legacy EuroSign keysym 0x20ac (the name "EuroSign" still gives 0x20ac).
//  4. A case-insensitive X keysym name, when that is unambiguous: "RIGHT" is
//     Right, "page_up" is Page_Up, "f5" is F5. When two keysyms differ only
//     in case ("Aacute"/"aacute", "Eth"/"eth") only the exact spelling
//     works and the error is an [*AmbiguousKeyError].
//  5. A numeric keysym: "0xff0d" (any non-zero 29-bit value), or a Unicode
//     character as "U+20AC" or Xlib's "U20AC" (0x10020ac; Latin-1 code
//     points give the Latin-1 keysym, control characters are rejected).
//
// Lookup does not trim spaces: " " is the space key. Any other name returns
// an [*UnknownKeyError] carrying up to three suggestions.
func Lookup(name string) (Keysym, error) {
	if name == "" {
		return NoSymbol, &UnknownKeyError{Name: name}
	}
	lo, hi := foldRange(name)
	for i := lo; i < hi; i++ {
		if table[i].name == name {
			return table[i].sym, nil
		}
	}
	if k, ok := lookupAlias(name); ok {
		return k, nil
	}
	if r, size := utf8.DecodeRuneInString(name); size == len(name) && (r != utf8.RuneError || size > 1) {
		if k, err := ForRune(r); err == nil {
			return k, nil
		}
		return NoSymbol, &UnknownKeyError{Name: name}
	}
	if hi > lo {
		var names []string
		for i := lo; i < hi; i++ {
			if table[i].sym != table[lo].sym {
				for j := lo; j < hi; j++ {
					names = append(names, table[j].name)
				}
				return NoSymbol, &AmbiguousKeyError{Name: name, Candidates: names}
			}
		}
		return table[lo].sym, nil
	}
	if k, ok := parseNumeric(name); ok {
		return k, nil
	}
	return NoSymbol, &UnknownKeyError{Name: name, Suggestions: suggest(name, 3)}
}

// foldRange returns the range of table entries whose names equal name
// under ASCII case folding. Table names are ASCII, so any other input
// yields an empty range.
func foldRange(name string) (lo, hi int) {
	for i := 0; i < len(name); i++ {
		if name[i] >= utf8.RuneSelf {
			return 0, 0
		}
	}
	lo, hi = 0, len(table)
	for lo < hi { // first entry >= name
		m := int(uint(lo+hi) >> 1)
		if compareFold(table[m].name, name) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	hi = lo
	for hi < len(table) && compareFold(table[hi].name, name) == 0 {
		hi++
	}
	return lo, hi
}

// compareFold compares ASCII strings as strings.ToLower would order them,
// which is how gen.go sorts the table.
func compareFold(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		ca, cb := lowerASCII(a[i]), lowerASCII(b[i])
		if ca != cb {
			if ca < cb {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// parseNumeric parses "0x…" keysym values and "U+XXXX"/"UXXXX" code points.
func parseNumeric(name string) (Keysym, bool) {
	if len(name) > 2 && name[0] == '0' && (name[1] == 'x' || name[1] == 'X') {
		v, err := strconv.ParseUint(name[2:], 16, 32)
		if err != nil || v == 0 || Keysym(v) > maxKeysym {
			return NoSymbol, false
		}
		return Keysym(v), true
	}
	var hex string
	switch {
	case len(name) > 2 && (name[0] == 'U' || name[0] == 'u') && name[1] == '+':
		hex = name[2:]
	case len(name) > 1 && name[0] == 'U':
		hex = name[1:]
	default:
		return NoSymbol, false
	}
	if len(hex) > 8 { // ParseUint itself rejects signs and underscores in base 16
		return NoSymbol, false
	}
	v, err := strconv.ParseUint(hex, 16, 32)
	if err != nil || v > unicode.MaxRune {
		return NoSymbol, false
	}
	r := rune(v)
	if r == '\n' || r == '\t' { // ForRune would accept these; Xlib does not
		return NoSymbol, false
	}
	k, err := ForRune(r)
	return k, err == nil
}

// ForRune returns the keysym that types r, the way xdotool's "type" does:
// '\n' is Return, '\t' is Tab, printable Latin-1 (U+0020–U+007E and
// U+00A0–U+00FF) is the keysym with the same value, and every other
// character is 0x01000000|r, which Xlib and xkbcommon turn back into that
// character. Legacy keysyms that also carry a code point (EuroSign 0x20ac,
// checkmark 0xaf3, …) are never returned. Control characters, surrogates and
// values outside Unicode return a [*RuneError].
func ForRune(r rune) (Keysym, error) {
	switch {
	case r == '\n':
		return xkReturn, nil
	case r == '\t':
		return xkTab, nil
	case r >= 0x20 && r <= 0x7e, r >= 0xa0 && r <= 0xff:
		return Keysym(r), nil
	case !utf8.ValidRune(r) || unicode.IsControl(r):
		return NoSymbol, &RuneError{Rune: r}
	}
	return unicodeBase | Keysym(r), nil
}

// Name returns the X name of k: the first non-deprecated name keysymdef.h
// or XF86keysym.h lists for it (so 0xff55 is "Prior", not "Page_Up").
// Keysyms without a name are written as "U+20AC" for Unicode keysyms
// (0x01000100–0x0110ffff) and as "0x1234" otherwise. For every keysym
// except NoSymbol and values above 29 bits, Lookup(Name(k)) returns k.
func Name(k Keysym) string {
	if i, ok := findValue(k); ok {
		return table[byValue[i]].name
	}
	if k >= unicodeBase|0x100 && k <= unicodeBase|unicode.MaxRune {
		if r := rune(k &^ unicodeBase); utf8.ValidRune(r) {
			return fmt.Sprintf("U+%04X", r)
		}
	}
	return fmt.Sprintf("0x%x", uint32(k))
}

// String returns Name(k).
func (k Keysym) String() string { return Name(k) }

// Rune returns the character k types, and false if it types none. It knows
// Latin-1 keysyms (identity), Unicode keysyms (0x01000000|r), every keysym
// whose header comment gives a code point (EuroSign is '€', checkmark is
// '✓'), and, like xkbcommon and XLookupString, the keys that type ASCII
// control characters and keypad characters: BackSpace '\b', Tab '\t',
// Linefeed '\n', Clear '\v', Return '\r', Escape 0x1b, Delete 0x7f,
// KP_Space ' ', KP_Tab '\t', KP_Enter '\r', KP_Equal '=', KP_Multiply…KP_9.
// Note that Rune(Return) is '\r' although ForRune('\n') is Return.
func (k Keysym) Rune() (rune, bool) {
	switch {
	case k >= 0x20 && k <= 0x7e, k >= 0xa0 && k <= 0xff:
		return rune(k), true
	case k&0xff000000 == unicodeBase:
		if r := rune(k &^ unicodeBase); utf8.ValidRune(r) {
			return r, true
		}
		return 0, false
	case k == 0xff80: // KP_Space
		return ' ', true
	case k >= 0xff08 && k <= 0xff0b, // BackSpace, Tab, Linefeed, Clear
		k >= 0xffaa && k <= 0xffb9, // KP_Multiply … KP_9
		k == xkReturn, k == xkEscape, k == xkDelete,
		k == 0xff89, k == 0xff8d, k == 0xffbd: // KP_Tab, KP_Enter, KP_Equal
		return rune(k & 0x7f), true
	}
	if i, ok := findValue(k); ok {
		if r := table[byValue[i]].r; r != 0 {
			return r, true
		}
	}
	return 0, false
}

// findValue returns the first index into byValue whose entry has value k.
func findValue(k Keysym) (int, bool) {
	lo, hi := 0, len(byValue)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if table[byValue[m]].sym < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(byValue) && table[byValue[lo]].sym == k
}

// IsModifier reports whether k is a modifier or lock key: Shift, Control,
// Alt, Meta, Super and Hyper (left and right), Caps_Lock, Shift_Lock,
// Num_Lock, ISO_Level3_Shift (AltGr), ISO_Level5_Shift and Mode_switch.
func IsModifier(k Keysym) bool {
	switch {
	case k >= xkShiftL && k <= xkHyperR: // Shift_L … Hyper_R, incl. Caps_Lock, Shift_Lock
		return true
	case k == xkISOLevel3Shift, k == xkISOLevel5Shift, k == xkModeSwitch, k == xkNumLock:
		return true
	}
	return false
}

// UnknownKeyError is returned by Lookup (and wrapped by ParseChord) for a
// name that resolves to no keysym.
type UnknownKeyError struct {
	Name        string   // the name as given
	Suggestions []string // up to three close names, best first; may be empty
}

func (e *UnknownKeyError) Error() string {
	if e.Name == "" {
		return "empty key name"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "unknown key %q", e.Name)
	if len(e.Suggestions) > 0 {
		b.WriteString(" (did you mean ")
		for i, s := range e.Suggestions {
			switch {
			case i == 0:
			case i == len(e.Suggestions)-1:
				b.WriteString(" or ")
			default:
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", s)
		}
		b.WriteString("?)")
	}
	return b.String()
}

// AmbiguousKeyError is returned by Lookup for a name that matches several
// keysym names differing only in case, such as "AACUTE" (Aacute, aacute).
type AmbiguousKeyError struct {
	Name       string   // the name as given
	Candidates []string // the exact names it could mean
}

func (e *AmbiguousKeyError) Error() string {
	q := make([]string, len(e.Candidates))
	for i, c := range e.Candidates {
		q[i] = strconv.Quote(c)
	}
	return fmt.Sprintf("ambiguous key %q: keysym names %s differ only in case; use the exact spelling",
		e.Name, strings.Join(q, ", "))
}

// RuneError is returned by ForRune for a character no key types: control
// characters other than '\n' and '\t', surrogates and invalid code points.
type RuneError struct {
	Rune rune
}

func (e *RuneError) Error() string {
	if !utf8.ValidRune(e.Rune) {
		return fmt.Sprintf("no keysym for invalid code point %#x", e.Rune)
	}
	return fmt.Sprintf("no keysym types control character %U", e.Rune)
}
