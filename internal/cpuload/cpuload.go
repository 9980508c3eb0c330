// Package cpuload saturates the machine's CPUs for tests that must hold on
// a busy machine: parallel evals, a build or a test suite beside agentbox.
// The load is separate busy-looping processes (as stress-ng --cpu would
// start), so the kernel schedules them against the code under test like any
// other job; they are stopped when the test ends.
package cpuload

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
)

// Start starts perCore busy loops for every CPU and stops them when t ends.
func Start(t testing.TB, perCore int) {
	t.Helper()
	n := perCore * runtime.NumCPU()
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		// Killed with the test process too when no cleanup runs (a test
		// binary killed, or ended by -timeout): a loop left behind would
		// load every test and bench after it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatalf("cpuload: start a busy loop: %v", err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	t.Logf("cpuload: %d busy loops on %d CPUs", n, runtime.NumCPU())
}
