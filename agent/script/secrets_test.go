package script

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/observe"
)

func TestCheckSecrets(t *testing.T) {
	p := filepath.Join(t.TempDir(), "login.yaml")
	text := "steps:\n  - action: type_secret\n    secret: PW\n  - action: type_secret\n    secret: OTP\n"
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := Load(p, observe.Screen{Width: 640, Height: 480})
	if err != nil {
		t.Fatal(err)
	}
	only := func(names ...string) func(string) bool {
		return func(n string) bool {
			for _, m := range names {
				if n == m {
					return true
				}
			}
			return false
		}
	}
	tests := []struct {
		name string
		has  func(string) bool
		err  string
	}{
		{"all held", only("PW", "OTP"), ""},
		{"one missing", only("PW"), p + ":4: step 2"},
		{"no vault", nil, p + ":2: step 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sc.CheckSecrets(tt.has)
			if tt.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
				t.Fatalf("err = %v, want it to begin %q", err, tt.err)
			}
		})
	}
}
