package local

import (
	"os"
	"os/exec"
	"testing"
)

// TestNSEmptyAfterInitEnds: a sandbox whose PID namespace's init has ended
// has no process left, even when its namespace's inode number now names
// another namespace with live processes (the kernel reuses the number of a
// freed namespace for the next one made: on a busy machine, another
// sandbox's). Stood in for here by this process's own namespace; the init
// by a child that has exited.
func TestNSEmptyAfterInitEnds(t *testing.T) {
	self := os.Getpid()
	ns := pidNS(self)
	if ns == "" {
		t.Skip("no /proc/self/ns/pid")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dead, deadStart := cmd.Process.Pid, processStart(cmd.Process.Pid)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		init  int
		start uint64
		ns    string
		want  bool
	}{
		{"init ended, its namespace's number reused", dead, deadStart, ns, true},
		{"init alive", self, processStart(self), ns, false},
		{"init unknown: the namespace is scanned", 0, 0, ns, false},
		{"init unknown, no namespace", 0, 0, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.start == 0 && tc.init != 0 {
				t.Skip("the child's start time could not be read before it ended")
			}
			if got := nsEmpty(tc.init, tc.start, tc.ns); got != tc.want {
				t.Errorf("nsEmpty(%d, %d, %q) = %v, want %v", tc.init, tc.start, tc.ns, got, tc.want)
			}
		})
	}
}
