package cli

import (
	"errors"
	"strings"
	"testing"
)

// TestParseSize: what --memory, --tmpfs and --log-cap accept (everything
// they took before go-units, and its unit spellings), and that anything
// else is a usage error naming the flag.
func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64 // 0: an error
	}{
		{"512m", 512 << 20},
		{"2g", 2 << 30},
		{"2G", 2 << 30},
		{"64k", 64 << 10},
		{"1024", 1024},
		{" 256m ", 256 << 20},
		{"1.5g", 3 << 29},
		{"512MiB", 512 << 20},
		{"512mb", 512 << 20},
		{"1t", 1 << 40},
		{"", 0},
		{"m", 0},
		{"abc", 0},
		{"-1m", 0},
		{"0", 0},
		{"0.4", 0},
		{"512x", 0},
		{"512 m b", 0},
		{"1e400", 0},
		{"99999999999999999p", 0},
		{"2048p", 0}, // above the 1 PiB bound
	} {
		got, err := parseSize("--memory", c.in)
		if c.want == 0 {
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != ExitUsage || !strings.Contains(err.Error(), `--memory "`+c.in+`": want a size like 512m or 2g`) {
				t.Errorf("parseSize(%q) = %d, %v; want a usage error naming --memory", c.in, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{2000, "1.953 KiB"},
		{8 << 20, "8 MiB"},
		{300 << 20, "300 MiB"},
		{3 << 29, "1.5 GiB"},
	} {
		if got := humanBytes(c.n); got != c.want {
			t.Errorf("humanBytes(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
