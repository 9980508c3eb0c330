package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/internal/testenv"
)

// TestEvalIndexesLive: eval --parallel writes every episode and the eval
// into the index as it goes — agentbox index then finds nothing to add —
// and ls answers from the index what it reads from the traces.
func TestEvalIndexesLive(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	db := filepath.Join(t.TempDir(), "index.db")
	out := filepath.Join(t.TempDir(), "out")
	r := agentbox(t, "eval", evalDir(t, suite8), "--parallel", "4", "--out", out, "--index", db)
	if r.code != 1 || strings.Contains(r.stderr, "index") {
		t.Fatalf("want exit 1 (a task failed) and no word of the index:\n%s", r)
	}
	r = agentbox(t, "index", "--index", db, out)
	if r.code != 0 || !strings.Contains(r.stdout, "indexed 0 runs and 0 evals (9 unchanged, 0 removed)") {
		t.Fatalf("the live index missed something:\n%s", r)
	}
	for _, args := range [][]string{{out}, {out, "--outcome", "failure"}, {out, "--json"}} {
		walked := agentbox(t, append([]string{"ls", "--index", "off"}, args...)...)
		indexed := agentbox(t, append([]string{"ls", "--index", db}, args...)...)
		if walked.code != 0 || indexed.code != 0 || walked.stdout != indexed.stdout || indexed.stderr != "" {
			t.Errorf("ls %q from the index:\n%s\nreading the traces:\n%s", args, indexed, walked)
		}
	}
}
