//go:build disruptive

package e2e

// Tests that disturb the whole machine (they restart the Docker daemon),
// so they never run alongside others: `make test-disruptive`, which CI runs
// after the main suite.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
)

// restartDockerd stops the running dockerd and starts it again with the
// same command line.
func restartDockerd(t *testing.T) {
	t.Helper()
	var out []byte
	testenv.Require(t, testenv.Probe("a dockerd process of this machine to restart", func(ctx context.Context) (err error) {
		out, err = exec.CommandContext(ctx, "pgrep", "-x", "dockerd").Output()
		return err
	}))
	pid, _ := strconv.Atoi(strings.Fields(string(out))[0])
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 300; i++ {
		if syscall.Kill(pid, 0) != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	logf, _ := os.OpenFile("/var/log/dockerd.log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("restart dockerd: %v", err)
	}
	cmd.Process.Release()
	for i := 0; i < 120; i++ {
		if exec.Command("docker", "info").Run() == nil {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatal("dockerd did not come back")
}

// 14. The Docker daemon restarts mid-run: the run ends with outcome error,
// the trace is saved, nothing hangs, and nothing is left behind.
func TestDockerRestartMidRun(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	bin := testenv.Build(t, "./cmd/agentbox")
	dir := filepath.Join(t.TempDir(), "trace")
	run := startBackground(t, bin, "run", moverApp(t, ""), "--out", dir, "--agent", "idle", "--agent-opt", "ms=120000")
	run.waitForSteps(t, dir)
	start := time.Now()
	restartDockerd(t)
	code := run.wait(t, 90*time.Second, "after the daemon restarted")
	t.Logf("the run ended %v after the restart began", time.Since(start).Round(time.Millisecond))
	if code != 3 {
		t.Errorf("exit %d, want 3 (error)\n%s", code, run.stderr.String())
	}
	tr := openTrace(t, dir)
	if tr.Incomplete || tr.Run.Outcome != trace.Error || tr.Run.Reason != trace.ReasonEnvironment {
		t.Errorf("trace: incomplete %v, outcome %s/%s (%s)", tr.Incomplete, tr.Run.Outcome, tr.Run.Reason, tr.Run.Message)
	}
	r := agentbox(t, "gc")
	if r.code != 0 {
		t.Fatalf("gc after the restart:\n%s", r)
	}
	assertNoContainers(t, tr.Run.ID)
}
