package script

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/observe"
)

// TestHeaderGrade: a script's header may carry a grade, parsed with the
// script (errors at its line; host paths beside the script).
func TestHeaderGrade(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "want.csv"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "play.yaml")
	s, err := Parse(path, []byte("task: t\ngrade:\n  - {table: out.csv, expected: want.csv}\nsteps:\n  - {action: wait, ms: 1}\n"), observe.DefaultScreen)
	if err != nil {
		t.Fatal(err)
	}
	if s.Grade == nil || s.Grade.Checks[0].Expected != filepath.Join(dir, "want.csv") {
		t.Fatalf("grade %+v", s.Grade)
	}
	_, err = Parse(path, []byte("task: t\ngrade:\n  - {table: out.csv, expectd: want.csv}\nsteps:\n  - {action: wait, ms: 1}\n"), observe.DefaultScreen)
	if err == nil || !strings.Contains(err.Error(), `play.yaml:3: grade check 1: unknown field "expectd" (did you mean expected?)`) {
		t.Errorf("error %v", err)
	}
}
