package termsafe

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLine(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"empty", "", ""},
		{"plain", "hello, world", "hello, world"},
		{"tab kept", "a\tb", "a\tb"},
		{"unicode kept", "naïve ✓ 日本 🙂", "naïve ✓ 日本 🙂"},
		{"backslash kept", `C:\x1b\n`, `C:\x1b\n`},
		{"newline", "a\nb", `a\nb`},
		{"carriage return", "50%\r100%", `50%\r100%`},
		{"erase line and forge", "\x1b[1A\x1b[2K\rsuccess: all good", `\x1b[1A\x1b[2K\rsuccess: all good`},
		{"OSC 0 title (BEL)", "\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},
		{"OSC 52 clipboard (ST)", "\x1b]52;c;cm0gLXJmIH4K\x1b\\", `\x1b]52;c;cm0gLXJmIH4K\x1b\`},
		{"NUL BEL BS", "\x00\x07\x08", `\x00\x07\x08`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"C1 CSI as UTF-8", "a\u009b2Jb", `a\u009b2Jb`},
		{"C1 NEL and OSC", "\u0085\u009d", `\u0085\u009d`},
		{"raw C1 byte", "a\x9b2J", `a\x9b2J`},
		{"invalid UTF-8", "\xff\xfe ok \xc3", `\xff\xfe ok \xc3`},
		{"bidi override", "user\u202egnp.exe", `user\u202egnp.exe`},
		{"bidi isolates", "\u2066x\u2069", `\u2066x\u2069`},
		{"line separator", "a\u2028b", `a\u2028b`},
		{"U+00A0 is printable", "a\u00a0b", "a\u00a0b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Line(c.in); got != c.want {
				t.Errorf("Line(%q) = %q, want %q", c.in, got, c.want)
			}
			if got := Safe(c.in); got != (c.in == c.want) {
				t.Errorf("Safe(%q) = %v", c.in, got)
			}
		})
	}
}

func TestText(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"one line", "error: x", "error: x"},
		{"agentbox's own layout is kept", "the app exited; the app's last output:\n  stderr: boom\n  stdout: bye", "the app exited; the app's last output:\n  stderr: boom\n  stdout: bye"},
		{"a forged line is indented", "gave up\nsuccess: all good", "gave up\n  success: all good"},
		{"empty lines stay empty", "a\n\nb\n", "a\n\n  b\n"},
		{"tab-indented is indented", "a\n\tb", "a\n\tb"},
		{"controls escaped, newline kept", "x\n  stderr: \x1b[1A\x1b[2K\rsuccess\x1b]0;t\x07", `x` + "\n  " + `stderr: \x1b[1A\x1b[2K\rsuccess\x1b]0;t\x07`},
		{"a line that starts with a control", "x\n\rsuccess", "x\n  " + `\rsuccess`},
		{"a line that starts with C1", "x\n\u009b2J", "x\n  " + `\u009b2J`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Text(c.in); got != c.want {
				t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestNoAllocationWhenSafe(t *testing.T) {
	s := strings.Repeat("plain text ✓\t", 100)
	if n := testing.AllocsPerRun(100, func() { _ = Line(s) }); n != 0 {
		t.Errorf("Line allocated %v times for safe text", n)
	}
}

// check holds for everything Line and Text return.
func check(t *testing.T, in, out string, keepNL bool) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("%q: output %q is not UTF-8", in, out)
	}
	for i, r := range out {
		switch {
		case r == '\t':
		case r == '\n' && keepNL:
			if rest := out[i+1:]; rest != "" && !indented(rest[0]) {
				t.Fatalf("%q: output %q has a line at the left margin", in, out)
			}
		case r < 0x20 || r == 0x7f || special(r):
			t.Fatalf("%q: output %q holds %U", in, out, r)
		}
	}
	again := render(out, keepNL)
	if again != out {
		t.Fatalf("not idempotent: %q → %q → %q", in, out, again)
	}
	if safe(in, keepNL) != (in == out) {
		t.Fatalf("%q: safe=%v but output %q", in, safe(in, keepNL), out)
	}
	// Nothing is dropped: every printable rune of the input is in the
	// output, in order.
	var kept strings.Builder
	for _, r := range in {
		if r != utf8.RuneError && r >= 0x20 && r != 0x7f && !special(r) {
			kept.WriteRune(r)
		}
	}
	j := 0
	k := kept.String()
	for _, r := range out {
		if j < len(k) {
			if kr, n := utf8.DecodeRuneInString(k[j:]); kr == r {
				j += n
			}
		}
	}
	if j != len(k) {
		t.Fatalf("%q: output %q lost printable text", in, out)
	}
}

func FuzzLine(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b]52;c;eA==\x07", "a\nb\r\n", "\u009b\u202e\xff", "x\n\ty", "\xc2", "\xe2\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		check(t, s, Line(s), false)
		check(t, s, Text(s), true)
		if strings.Contains(Line(s), "\n") {
			t.Fatalf("Line(%q) holds a newline", s)
		}
	})
}

func BenchmarkLine(b *testing.B) {
	for _, c := range []struct{ name, s string }{
		{"clean 1 KiB", strings.Repeat("abcdefghijklmnopqrstuvwxyz ✓ 0123", 32)},
		{"hostile 1 KiB", strings.Repeat("\x1b]52;c;eA==\x07\u009b2J\xff ok ", 64)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.s)))
			for b.Loop() {
				_ = Line(c.s)
			}
		})
	}
}
