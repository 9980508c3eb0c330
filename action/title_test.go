package action

import "testing"

func TestTitleMatcher(t *testing.T) {
	tests := []struct {
		pattern, title string
		want           bool
	}{
		{"", "anything", true},
		{"mover", "mover", true},
		{"mover", "mover 2", false},
		{"mover*", "mover 2", true},
		{"m?ver", "mover", true},
		{"a.b", "axb", false},
		{"/^xterm/", "xterm: bash", true},
		{"/calc$/", "xcalc", true},
	}
	for _, tt := range tests {
		m, err := TitleMatcher(tt.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := m(tt.title); got != tt.want {
			t.Errorf("TitleMatcher(%q)(%q) = %v", tt.pattern, tt.title, got)
		}
	}
}
