package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunGradeUsage: a bad --grade file, or a grade in both --grade and
// the script, is a usage error naming the file and line before anything
// starts.
func TestRunGradeUsage(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.yaml", "- {exists: a.txt, nmae: x}\n")
	good := write("good.yaml", "- exists: a.txt\n")
	play := write("play.yaml", "task: t\ngrade:\n  - exists: b.txt\nsteps:\n  - {action: wait, ms: 10}\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "/nonexistent", "--agent", "idle", "--grade", bad}, `--grade: invalid grade: ` + bad + `:1: grade check 1: unknown field "nmae" (did you mean name?)`},
		{[]string{"run", "/nonexistent", "--agent", "idle", "--grade", filepath.Join(dir, "none.yaml")}, `--grade: invalid grade: open`},
		{[]string{"run", "/nonexistent", "--script", play, "--grade", good}, `--grade and the grade of ` + play + ` are exclusive`},
	} {
		args := append(c.args, "--backend", "none-such")
		var so, se bytes.Buffer
		code := Main(args, &so, &se)
		if code != ExitUsage || !strings.Contains(se.String(), c.want) {
			t.Errorf("%q: exit %d, %q; want exit 2 and %q", args, code, se.String(), c.want)
		}
	}
}
