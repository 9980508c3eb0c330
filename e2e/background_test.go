package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/trace"
)

// background is an agentbox command running while the test acts on it
// (signals, kills, daemon restarts).
type background struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
}

// startBackground starts bin with args. If the test ends first, the
// command is killed and reaped.
func startBackground(t *testing.T, bin string, args ...string) *background {
	t.Helper()
	b := &background{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	b.cmd.Stdout, b.cmd.Stderr = &b.stdout, &b.stderr
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.cmd.Wait(); close(b.done) }()
	t.Cleanup(func() {
		b.cmd.Process.Kill()
		<-b.done
	})
	return b
}

// waitForSteps waits until the trace in each dir has its first step on
// disk: the loop is running.
func (b *background) waitForSteps(t *testing.T, dirs ...string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for _, dir := range dirs {
		for {
			data, _ := os.ReadFile(filepath.Join(dir, trace.StepsFile))
			if bytes.Contains(data, []byte(`"type":"step"`)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never reached its first step:\n%s", dir, b.stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// wait waits up to limit for the command to end and returns its exit code;
// if it does not end, the test fails saying what was waited for.
func (b *background) wait(t *testing.T, limit time.Duration, what string) int {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(limit):
		t.Fatalf("agentbox did not stop within %v %s:\n%s", limit, what, b.stderr.String())
	}
	return b.cmd.ProcessState.ExitCode()
}

// kill kills the command and waits for it.
func (b *background) kill() {
	b.cmd.Process.Kill()
	<-b.done
}
