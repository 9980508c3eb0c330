package e2e

// The local backend end to end: agentbox run on bubblewrap, with and
// without a Docker daemon.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/environment/local"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
)

// requireLocal needs what the local backend needs here.
func requireLocal(t *testing.T) {
	t.Helper()
	testenv.Require(t, testenv.Probe("the local backend (see `agentbox doctor`)", (&local.Backend{}).Probe))
}

// exampleMover is examples/mover as shipped (its manifest) with the mover
// built from this tree.
func exampleMover(t *testing.T) string {
	t.Helper()
	manifest, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "mover", "agentbox.json"))
	if err != nil {
		t.Fatal(err)
	}
	return moverApp(t, string(manifest))
}

// assertNoSandboxes fails if a bubblewrap process of the run is left.
func assertNoSandboxes(t *testing.T, runID string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left, _ := local.Leftovers(t.Context(), runID)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox processes of run %s left behind: %v", runID, left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLocalMoverDemo: agentbox run examples/mover --backend local.
func TestLocalMoverDemo(t *testing.T) {
	requireLocal(t)
	r := agentbox(t, "run", exampleMover(t), "--backend", "local", "--task", "Move the character right.", "--agent", "demo")
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	tr := openTrace(t, r.dir)
	if tr.Incomplete || tr.Run.Outcome != trace.Success || len(tr.Missing) > 0 {
		t.Fatalf("trace: incomplete=%v outcome=%s missing=%v", tr.Incomplete, tr.Run.Outcome, tr.Missing)
	}
	if b := tr.Run.Env.Backend; b != "local" {
		t.Errorf("run.json says backend %q, want local", b)
	}
	before, n0 := centroid(t, filepath.Join(r.dir, tr.Steps[0].Observation.Screenshot))
	after, n1 := centroid(t, filepath.Join(r.dir, tr.Steps[2].Observation.Screenshot))
	if n0 == 0 || n1 == 0 || after-before < 100 {
		t.Errorf("centroid %.1f → %.1f (%d, %d green pixels), want ≥ 100 px to the right", before, after, n0, n1)
	}
	stdout, _ := os.ReadFile(filepath.Join(r.dir, trace.StdoutFile))
	if !strings.Contains(string(stdout), "mover: key Right down") {
		t.Errorf("stdout.log lacks the app's key report:\n%s", stdout)
	}
	t.Logf("timings %v", tr.Run.Timings)
	assertNoSandboxes(t, tr.Run.ID)
}

// TestLocalScript plays the mover's play-test on the local backend.
func TestLocalScript(t *testing.T) {
	requireLocal(t)
	script := filepath.Join(testenv.RepoRoot(), "examples", "mover", "play.yaml")
	r := agentbox(t, "run", exampleMover(t), "--backend", "local", "--script", script)
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	assertNoSandboxes(t, openTrace(t, r.dir).Run.ID)
}

// TestAutoWithoutDocker: with no Docker daemon reachable, the default
// --backend auto picks the local backend, says so, and the run succeeds.
func TestAutoWithoutDocker(t *testing.T) {
	requireLocal(t)
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	r := agentbox(t, "run", exampleMover(t), "--agent", "demo")
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	if !strings.Contains(r.stderr, "--backend auto: using local") {
		t.Errorf("agentbox did not say it chose local:\n%s", r.stderr)
	}
	tr := openTrace(t, r.dir)
	if b := tr.Run.Env.Backend; b != "local" {
		t.Errorf("run.json says backend %q, want local", b)
	}
	assertNoSandboxes(t, tr.Run.ID)

	// Docker's own flags cannot silently fall back.
	r = agentbox(t, "run", exampleMover(t), "--agent", "demo", "--image", "agentbox/runtime:bookworm")
	if r.code != 3 || !strings.Contains(r.stdout+r.stderr, "Docker daemon") {
		t.Errorf("--image without Docker: want exit 3 naming the daemon:\n%s", r)
	}
}

// TestLocalSIGKILL: a killed agentbox leaves no sandbox behind
// (--die-with-parent and the parent-death signal).
func TestLocalSIGKILL(t *testing.T) {
	requireLocal(t)
	bin := testenv.Build(t, "./cmd/agentbox")
	dir := filepath.Join(t.TempDir(), "trace")
	run := startBackground(t, bin, "run", exampleMover(t), "--backend", "local", "--out", dir, "--agent", "idle", "--agent-opt", "ms=60000")
	run.waitForSteps(t, dir)
	tr := openTrace(t, dir)
	if left, _ := local.Leftovers(t.Context(), tr.Run.ID); len(left) == 0 {
		t.Fatal("control: the running sandbox is not visible")
	}
	run.kill()
	assertNoSandboxes(t, tr.Run.ID)
}
