package fds

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// inheritable makes a pipe whose ends are not close-on-exec, as a shell
// leaves the descriptors it opens for a program.
func inheritable(t *testing.T) [2]int {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	return p
}

// childFDs lists the descriptors a child process has.
func childFDs(t *testing.T, extra ...*os.File) []string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "ls /proc/$$/fd")
	cmd.ExtraFiles = extra
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(out))
}

func TestCloseOnExec(t *testing.T) {
	for _, tt := range []struct {
		name string
		mark func(first int) error
	}{
		{"close_range", CloseOnExec},
		{"each descriptor", closeOnExecEach},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := inheritable(t)
			fd := strconv.Itoa(p[1])
			if got, _ := Inherited(3); !slices.Contains(got, p[1]) {
				t.Fatalf("Inherited = %v, want %d in it", got, p[1])
			}
			// Control: a child gets what is not close-on-exec.
			if got := childFDs(t); !slices.Contains(got, fd) {
				t.Fatalf("control: the child has %v, not descriptor %s", got, fd)
			}
			if err := tt.mark(3); err != nil {
				t.Fatal(err)
			}
			if got, _ := Inherited(3); len(got) != 0 {
				t.Errorf("still inheritable: %v", got)
			}
			if got := childFDs(t); slices.Contains(got, fd) {
				t.Errorf("the child has descriptor %s: %v", fd, got)
			}
			// What a child is given on purpose still reaches it, and this
			// process keeps using its descriptors.
			dup, err := unix.Dup(p[1])
			if err != nil {
				t.Fatal(err)
			}
			f := os.NewFile(uintptr(dup), "pipe")
			defer f.Close()
			if got := childFDs(t, f); !slices.Contains(got, "3") {
				t.Errorf("ExtraFiles did not reach the child: %v", got)
			}
			if _, err := unix.Write(p[1], []byte("x")); err != nil {
				t.Errorf("write after marking: %v", err)
			}
		})
	}
}
