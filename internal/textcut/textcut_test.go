package textcut

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	const e = "é" // 2 bytes
	const k = "語" // 3 bytes
	const g = "𝄞" // 4 bytes
	for _, c := range []struct {
		name   string
		f      func(string, int, string) string
		s      string
		n      int
		suffix string
		want   string
	}{
		{"bytes fits", Bytes, "abc", 3, "…", "abc"},
		{"bytes empty", Bytes, "", 0, "…", ""},
		{"bytes ascii", Bytes, "abcdef", 3, "…", "abc…"},
		{"bytes n zero", Bytes, "abc", 0, "…", "…"},
		{"bytes n negative", Bytes, "abc", -5, "…", "…"},
		{"bytes 2-byte rune at the cut", Bytes, "a" + e + "b", 2, "…", "a…"},
		{"bytes 3-byte rune at the cut (1 in)", Bytes, "a" + k, 2, "…", "a…"},
		{"bytes 3-byte rune at the cut (2 in)", Bytes, "a" + k, 3, "…", "a…"},
		{"bytes 3-byte rune just fits", Bytes, "a" + k + "b", 4, "…", "a" + k + "…"},
		{"bytes 4-byte rune at the cut", Bytes, g + g, 7, "", g},
		{"bytes only multi-byte, n inside the first", Bytes, k + k, 1, "…", "…"},
		{"bytes invalid byte at the cut", Bytes, "ab\xffcd", 3, "…", "ab\xff…"},
		{"bytes continuation bytes only", Bytes, "\x80\x80\x80\x80\x80", 3, "", "\x80\x80\x80"},
		{"bytes truncated sequence at the cut", Bytes, "ab\xe8\xaa", 3, "", "ab\xe8"},
		{"bytes invalid lead then continuation", Bytes, "a\xff\x80\x80b", 3, "", "a\xff\x80"},
		{"bytes encoded U+FFFD is a rune", Bytes, "a\uFFFDb", 2, "", "a"},

		{"runes fits", Runes, k + k, 2, "…", k + k},
		{"runes cut", Runes, k + e + "a" + g, 2, "…", k + e + "…"},
		{"runes n zero", Runes, "abc", 0, "…", "…"},
		{"runes n negative", Runes, "abc", -1, "…", "…"},
		{"runes empty", Runes, "", 0, "…", ""},
		{"runes invalid bytes count one each", Runes, "\xff\xfeab", 2, "…", "\xff\xfe…"},

		{"fit fits", Fit, "abcdef", 6, "…", "abcdef"},
		{"fit suffix counts", Fit, "abcdefgh", 6, "…", "abc…"},
		{"fit multi-byte at the cut", Fit, "ab" + k + "cdefgh", 6, "…", "ab…"},
		{"fit n smaller than the suffix", Fit, "abcdef", 2, "…", "ab"},
		{"fit n smaller than the suffix, rune at the cut", Fit, "a" + k, 2, "…", "a"},
		{"fit n equals the suffix", Fit, "abcdef", 3, "…", "…"},
		{"fit n zero", Fit, "abc", 0, "…", ""},
		{"fit n negative", Fit, "abc", -3, "…", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.f(c.s, c.n, c.suffix)
			if got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TestNeverSplits cuts valid text of every width at every length: the
// result is always valid UTF-8, a prefix of the text, and within bounds.
func TestNeverSplits(t *testing.T) {
	s := strings.Repeat("a"+"é"+"語"+"𝄞", 4)
	for n := -1; n <= len(s)+1; n++ {
		for _, suffix := range []string{"", "…", " …[cut]"} {
			for name, got := range map[string]string{
				"Bytes": Bytes(s, n, suffix),
				"Runes": Runes(s, n, suffix),
				"Fit":   Fit(s, n, suffix),
			} {
				if !utf8.ValidString(got) {
					t.Fatalf("%s(n=%d, %q) = %q: not valid UTF-8", name, n, suffix, got)
				}
				body := got
				if got != s {
					body = strings.TrimSuffix(got, suffix)
				}
				if !strings.HasPrefix(s, body) {
					t.Fatalf("%s(n=%d, %q) = %q: not a prefix of the text", name, n, suffix, got)
				}
				switch name {
				case "Bytes":
					if len(body) > max(n, 0) && got != s {
						t.Fatalf("Bytes(n=%d) kept %d bytes", n, len(body))
					}
					if len(body) < n-utf8.UTFMax+1 {
						t.Fatalf("Bytes(n=%d) kept only %d bytes", n, len(body))
					}
				case "Runes":
					if got != s && utf8.RuneCountInString(body) != max(n, 0) {
						t.Fatalf("Runes(n=%d) kept %d runes", n, utf8.RuneCountInString(body))
					}
				case "Fit":
					if len(got) > max(n, 0) {
						t.Fatalf("Fit(n=%d, %q) = %d bytes", n, suffix, len(got))
					}
				}
			}
		}
	}
}
