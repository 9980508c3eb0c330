package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

// TestRootHelpNamesBothBackends: the first thing a user reads names the
// bubblewrap backend as well as Docker.
func TestRootHelpNamesBothBackends(t *testing.T) {
	var so, se bytes.Buffer
	if code := Main([]string{"--help"}, &so, &se); code != 0 {
		t.Fatalf("exit %d: %s", code, se.String())
	}
	for _, want := range []string{"Docker", "bubblewrap", "--backend"} {
		if !strings.Contains(so.String(), want) {
			t.Errorf("agentbox --help does not mention %q:\n%s", want, so.String())
		}
	}
}

// TestRunReportCounts: the run's last line agrees with its count.
func TestRunReportCounts(t *testing.T) {
	for n, want := range map[int]string{0: "0 steps in", 1: "1 step in", 2: "2 steps in"} {
		var b bytes.Buffer
		report(&b, session.Result{Outcome: trace.Success, Message: "ok", Steps: n, Duration: time.Second, TraceDir: "t"})
		if !strings.Contains(b.String(), "\n"+want+" ") {
			t.Errorf("%d steps: %q, want %q", n, b.String(), want)
		}
	}
}

// TestNoParenthesisedPlurals: no message agentbox prints hedges its
// plural as "line(s)": every count goes through internal/plural (or says
// its number's noun itself).
func TestNoParenthesisedPlurals(t *testing.T) {
	literal := regexp.MustCompile("\"(?:[^\"\\\\\\n]|\\\\.)*\"|`[^`]*`")
	hedge := regexp.MustCompile(`[a-z]\(s\)`)
	root := filepath.Join("..")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || strings.HasSuffix(p, "_test.go") || !(strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".js")) {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			for _, lit := range literal.FindAllString(line, -1) {
				if hedge.MatchString(lit) {
					t.Errorf("%s:%d: %s", p, i+1, lit)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
