package suggest

import (
	"slices"
	"testing"
)

func TestClosest(t *testing.T) {
	for _, tt := range []struct {
		name       string
		candidates []string
		want       []string
	}{
		{"antropic", []string{"anthropic", "demo", "exec", "human", "idle", "openai"}, []string{"anthropic"}},
		{"humna", []string{"anthropic", "demo", "exec", "human", "idle", "openai"}, []string{"human"}},
		{"DEMO", []string{"demo", "memo"}, []string{"demo", "memo"}},
		{"dmeo", []string{"memo", "demo"}, []string{"demo"}}, // a transposition is one edit
		{"ab", []string{"abc", "ab"}, []string{"ab", "abc"}},
		{"xyz", []string{"anthropic"}, nil},
		{"", []string{"a", "bb"}, []string{"a"}},
		{"agnet", []string{"agent", "agent-opt", "a11y"}, []string{"agent"}},
	} {
		if got := Closest(tt.name, tt.candidates); !slices.Equal(got, tt.want) {
			t.Errorf("Closest(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
	if b := Best("opneai", []string{"exec", "openai"}); b != "openai" {
		t.Errorf("Best = %q", b)
	}
	if h := Hint("--agnet", []string{"--agent", "--a11y"}); h != " (did you mean --agent?)" {
		t.Errorf("Hint = %q", h)
	}
	if b := Best("zzzzzz", []string{"openai"}); b != "" {
		t.Errorf("Best = %q", b)
	}
}
