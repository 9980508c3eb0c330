// Package termsafe renders text that agentbox did not write itself — app
// output, window titles, an agent's messages, names read from a trace —
// for a terminal: control characters are shown, never obeyed.
//
// A terminal obeys what it is sent: ESC and CSI sequences move the cursor
// and erase lines, OSC sequences set the window title or write the
// clipboard (OSC 52), a carriage return overwrites the line, and a raw C1
// byte such as 0x9b is CSI to a terminal in 8-bit mode. An app that could
// put these on agentbox's stdout could erase its "error:" line and print
// "success: …" instead. Everything agentbox prints that came from outside
// goes through Line (one line) or Text (a block agentbox lays out itself).
//
// Escapes are visible and unambiguous enough to read: \x1b, \r, \n, \u009b
// (a C1 control), \u202e (a bidirectional override), \xff (a byte that is
// not UTF-8). Backslashes are left alone, so both functions are idempotent
// and text without controls comes back unchanged (and unallocated).
package termsafe

import (
	"strings"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// Line renders s as part of one line of terminal output: every C0 control
// but tab (newline and carriage return included), DEL, the C1 controls
// U+0080–U+009F, the Unicode bidirectional controls and line separators,
// and every byte that is not valid UTF-8 are replaced by a visible escape.
func Line(s string) string {
	return render(s, false)
}

// Text renders s as a block of lines that agentbox prints itself (an error
// with the app's last output, a message over several lines): like Line,
// except that newlines are kept, and every line after the first that
// starts at the left margin is indented by two spaces, so no line of s can
// pass for a line agentbox printed on its own.
func Text(s string) string {
	return render(s, true)
}

// Safe reports whether s prints as it is: Line(s) == s.
func Safe(s string) bool {
	return safe(s, false)
}

func safe(s string, keepNL bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\t':
		case c == '\n' && keepNL:
			if i+1 < len(s) && !indented(s[i+1]) {
				return false
			}
		case c < 0x20 || c == 0x7f:
			return false
		case c >= 0x80:
			return safeUTF8(s[i:], keepNL)
		}
	}
	return true
}

// safeUTF8 is safe for the rest of s, from its first non-ASCII byte.
func safeUTF8(s string, keepNL bool) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < 0x80 {
			switch {
			case c == '\t':
			case c == '\n' && keepNL:
				if i+1 < len(s) && !indented(s[i+1]) {
					return false
				}
			case c < 0x20 || c == 0x7f:
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || special(r) {
			return false
		}
		i += n
	}
	return true
}

// indented says a line starting with c needs no indent: it is already
// indented, or empty.
func indented(c byte) bool { return c == ' ' || c == '\t' || c == '\n' }

// special lists the non-ASCII runes that are escaped: the C1 controls, and
// the format characters that reorder or break what follows them.
func special(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f: // C1: 0x9b is CSI, 0x9d OSC, 0x90 DCS
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f: // ALM, LRM, RLM
		return true
	case r >= 0x202a && r <= 0x202e: // LRE, RLE, PDF, LRO, RLO
		return true
	case r >= 0x2066 && r <= 0x2069: // LRI, RLI, FSI, PDI
		return true
	case r == 0x2028, r == 0x2029: // line and paragraph separators
		return true
	}
	return false
}

func render(s string, keepNL bool) string {
	if safe(s, keepNL) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		c := s[i]
		if c < 0x80 {
			switch {
			case c == '\t':
				b.WriteByte(c)
			case c == '\n' && keepNL:
				b.WriteByte(c)
				if i+1 < len(s) && !indented(s[i+1]) {
					b.WriteString("  ")
				}
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\r':
				b.WriteString(`\r`)
			case c < 0x20 || c == 0x7f:
				b.WriteString(`\x`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xf])
			default:
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		case special(r):
			b.WriteString(`\u`)
			for shift := 12; shift >= 0; shift -= 4 {
				b.WriteByte(hex[(r>>shift)&0xf])
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
