package owner

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// deadPID is the PID of a process that has ended and been waited for.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func TestAlive(t *testing.T) {
	me := os.Getpid()
	start := Start(me)
	if start == 0 {
		t.Fatal("no start time for this process")
	}
	dead := deadPID(t)
	for _, tt := range []struct {
		name  string
		pid   int
		start uint64
		alive bool
		why   string
	}{
		{"this process", me, start, true, ""},
		{"this process, start unknown", me, 0, true, ""},
		{"its PID reused", me, start + 1, false, "was reused by another process"},
		{"gone", dead, 1, false, fmt.Sprintf("owner pid %d is gone", dead)},
		{"none", 0, 0, false, "no owner recorded"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			alive, why := Alive(tt.pid, tt.start)
			if alive != tt.alive || !strings.Contains(why, tt.why) {
				t.Errorf("Alive(%d, %d) = %v, %q; want %v, %q", tt.pid, tt.start, alive, why, tt.alive, tt.why)
			}
		})
	}
}

func TestTempDirName(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dir, err := TempDir("bench-pool")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("agentbox-bench-pool-%d.%d-", os.Getpid(), Start(os.Getpid()))
	if filepath.Dir(dir) != tmp || !strings.HasPrefix(filepath.Base(dir), want) || !nameRE.MatchString(filepath.Base(dir)) {
		t.Fatalf("TempDir made %s, want %s/%s…", dir, tmp, want)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("stat %s: %v, %v", dir, fi, err)
	}
	for _, kind := range []string{"", "Serve", "serve-", "-serve", "a/b", "serve-1", "x.y", "serve--pool"} {
		if d, err := TempDir(kind); err == nil {
			t.Errorf("TempDir(%q) made %s, want an error", kind, d)
		}
	}
}

// TestOrphans: a directory whose owner is gone is listed (and removed with
// what it holds); this process's, a symbolic link and a name of another
// form are not.
func TestOrphans(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	mine, err := TempDir("serve")
	if err != nil {
		t.Fatal(err)
	}
	dead := deadPID(t)
	mk := func(name string) string {
		p := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(p, "uploads"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "uploads", "big"), []byte("data"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	orphan := mk(fmt.Sprintf("agentbox-serve-%d.1-123", dead))
	reused := mk(fmt.Sprintf("agentbox-net-%d.%d-456", os.Getpid(), Start(os.Getpid())+7))
	mk(fmt.Sprintf("agentbox-serve-%d-789", dead))       // the old form: no start, cannot be judged
	mk(fmt.Sprintf("agentbox-serve-%d.1-12x", dead))     // not os.MkdirTemp's
	mk(fmt.Sprintf("someone-else-serve-%d.1-123", dead)) // not ours
	if err := os.Symlink(t.TempDir(), filepath.Join(tmp, fmt.Sprintf("agentbox-exec-%d.1-5", dead))); err != nil {
		t.Fatal(err)
	}
	// Another user's: root collects it (root's agentbox gives a network's
	// directory to the sandbox's user), another user could not.
	other := mk(fmt.Sprintf("agentbox-exec-%d.1-6", dead))
	if os.Geteuid() == 0 {
		if err := os.Chown(other, 12345, 12345); err != nil {
			t.Fatal(err)
		}
	}

	got, err := Orphans("")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, o := range got {
		paths = append(paths, o.Path)
	}
	if len(got) != 3 || !slices.Contains(paths, orphan) || !slices.Contains(paths, reused) || !slices.Contains(paths, other) {
		t.Fatalf("Orphans = %v, want %s, %s and %s", paths, orphan, reused, other)
	}
	for _, o := range got {
		switch o.Path {
		case orphan:
			if o.Kind != "serve" || o.PID != dead || !strings.Contains(o.Reason, "is gone") {
				t.Errorf("orphan %+v", o)
			}
		case reused:
			if o.Kind != "net" || !strings.Contains(o.Reason, "reused") {
				t.Errorf("reused %+v", o)
			}
		}
		if err := o.Remove(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(o.Path); !os.IsNotExist(err) {
			t.Errorf("%s still there after Remove: %v", o.Path, err)
		}
		if err := o.Remove(); err != nil {
			t.Errorf("a second Remove: %v", err)
		}
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("this process's directory: %v", err)
	}
	if got, err := Orphans(""); err != nil || len(got) != 0 {
		t.Errorf("after removal Orphans = %v, %v", got, err)
	}
	if _, err := Orphans(filepath.Join(tmp, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Orphans of a missing directory: %v", err)
	}
}
