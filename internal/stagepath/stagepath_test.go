package stagepath

import "testing"

func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		p  string
		ok bool
	}{
		{"bin/game", true}, {"a", true}, {"a/./b", true}, {"a/b/../c", false},
		{"", false}, {"/etc/passwd", false}, {"a\\b", false}, {"a\x00b", false},
		{"..", false}, {"../x", false}, {".", false}, {"a/..", false}, {"./", false},
	} {
		if err := Check(tt.p); (err == nil) != tt.ok {
			t.Errorf("Check(%q) = %v, want ok=%v", tt.p, err, tt.ok)
		}
	}
}

func TestLinkInside(t *testing.T) {
	for _, tt := range []struct {
		rel, target string
		ok          bool
	}{
		{"data/current", "level1", true},
		{"data/current", "../bin/game", true},
		{"data/current", "../../etc", false},
		{"top", "..", false},
		{"top", ".", true},
		{"top", "/etc/passwd", false},
		{"a/b/c", "../../x", true},
		{"a/b/c", "../../../x", false},
		{"top", "", false},
	} {
		if err := LinkInside(tt.rel, tt.target); (err == nil) != tt.ok {
			t.Errorf("LinkInside(%q, %q) = %v, want ok=%v", tt.rel, tt.target, err, tt.ok)
		}
	}
}
