package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
)

// smallDisk mounts a tmpfs of size (mount's -o size=…) in a temporary
// directory, unmounted when the test ends. It needs root (CI runs as
// root: there it fails, not skips, without it).
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	testenv.Require(t, testenv.Root("mounting a small tmpfs"))
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0755", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a %s tmpfs: %v\n%s", size, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", dir, err, out)
		}
	})
	return dir
}

// TestFullDiskTrace runs the 100-step mover script into a trace directory
// on a disk too small for it: the run ends with the environment error
// (exit 3) when a write fails, run.json says so (the trace's reserve gave
// it room), and what was written before stays whole: the trace validates,
// with no torn line and every step before the last with its result.
func TestFullDiskTrace(t *testing.T) {
	requireLocal(t)
	disk := smallDisk(t, "160k")
	app := exampleMover(t)
	script := moverScript100(t)
	dir := filepath.Join(disk, "run")
	r := agentbox(t, "run", app, "--backend", "local", "--script", script, "--max-rate", "20", "--no-index", "--out", dir, "--", "-speed", "20")
	if r.code != 3 || !strings.Contains(r.stdout+r.stderr, "no space left on device") {
		t.Fatalf("a full disk: want exit 3 naming it\n%s", r)
	}
	tr := openTrace(t, dir)
	if tr.Run.Status != trace.StatusComplete || tr.Run.Outcome != trace.Error || tr.Run.Reason != trace.ReasonEnvironment || tr.Run.ExitCode != 3 {
		t.Fatalf("run.json: status %s, outcome %s, reason %s, exit %d; want complete, error, environment, 3",
			tr.Run.Status, tr.Run.Outcome, tr.Run.Reason, tr.Run.ExitCode)
	}
	if tr.TornTail {
		t.Error("steps.jsonl ends in a torn line")
	}
	if bad := trace.Validate(tr); bad != nil {
		t.Fatalf("the trace written before the disk filled does not validate: %v", bad)
	}
	if n := trace.LastCompleted(tr); n < 10 || n >= 101 {
		t.Fatalf("%d steps completed; the disk should fill in the middle of the run", n)
	}
	if _, err := os.Stat(filepath.Join(dir, trace.ReserveFile)); !os.IsNotExist(err) {
		t.Errorf("the trace's reserve is left: %v", err)
	}
	t.Logf("the disk filled after step %d: %s", trace.LastCompleted(tr), tr.Run.Message)
}
