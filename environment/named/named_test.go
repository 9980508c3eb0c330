package named

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name, err string
	}{
		{"work", ""},
		{"a", ""},
		{"proj-1.x_y", ""},
		{strings.Repeat("a", MaxLen), ""},
		{"", "must not be empty"},
		{strings.Repeat("a", MaxLen+1), "at most 63"},
		{"Work", "lower-case"},
		{".hidden", "starting with a letter or digit"},
		{"-x", "starting with"},
		{"..", "starting with"},
		{"a/b", "lower-case letters"},
		{"a b", "lower-case letters"},
		{"é", "lower-case letters"},
	} {
		err := Validate(tc.name)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Validate(%q) = %v, want %q", tc.name, err, tc.err)
		}
	}
}

func TestRoot(t *testing.T) {
	t.Setenv(EnvRoot, "/x/y")
	if r, err := Root(); err != nil || r != "/x/y" {
		t.Fatalf("Root() = %q, %v", r, err)
	}
	t.Setenv(EnvRoot, "rel")
	if _, err := Root(); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("a relative $%s: %v", EnvRoot, err)
	}
	t.Setenv(EnvRoot, "")
	t.Setenv("XDG_STATE_HOME", "/state")
	want := "/state/agentbox/sandboxes"
	if os.Geteuid() == 0 {
		want = "/var/lib/agentbox/sandboxes"
	}
	if r, _ := Root(); r != want {
		t.Fatalf("Root() = %q, want %q", r, want)
	}
}

// TestLock: a name is held by one run at a time; the second is refused
// at once, naming the holder; released, it is taken again, with the
// record of the last run; a name is its first backend's.
func TestLock(t *testing.T) {
	root := t.TempDir()
	l, err := Acquire(root, "w", "local", "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if l.Meta().Backend != "local" || l.Meta().SizeBytes != -1 {
		t.Fatalf("first meta %+v", l.Meta())
	}
	_, err = Acquire(root, "w", "local", "run-2")
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "run run-1 (agentbox pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second Acquire: %v", err)
	}
	e, err := Get(root, "w")
	if err != nil || e.Holder == nil || e.Holder.RunID != "run-1" {
		t.Fatalf("Get while held: %+v, %v", e, err)
	}
	if err := Remove(root, "w", nil); !errors.Is(err, ErrLocked) {
		t.Fatalf("Remove while held: %v", err)
	}
	if err := l.Release(1234); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(1); err != nil { // idempotent
		t.Fatal(err)
	}
	e, err = Get(root, "w")
	if err != nil || e.Holder != nil || e.SizeBytes != 1234 || e.LastRun != "run-1" || e.LastUsed.IsZero() {
		t.Fatalf("Get after release: %+v, %v", e, err)
	}
	if _, err := Acquire(root, "w", "docker", "run-3"); !errors.Is(err, ErrBackend) || !strings.Contains(err.Error(), "--backend local") {
		t.Fatalf("another backend: %v", err)
	}
	l2, err := Acquire(root, "w", "local", "run-4")
	if err != nil {
		t.Fatal(err)
	}
	if l2.Meta().SizeBytes != 1234 {
		t.Fatalf("the record was lost: %+v", l2.Meta())
	}
	l2.Abandon()
	list, err := List(root)
	if err != nil || len(list) != 1 || list[0].Name != "w" || list[0].LastRun != "run-1" {
		t.Fatalf("List: %+v, %v", list, err)
	}
	if _, err := Acquire(root, "../x", "local", "r"); err == nil {
		t.Fatal("a bad name was taken")
	}
}

// TestStaleLock: a holder killed with SIGKILL leaves its record in the
// lock file but no lock: the next run takes the name over.
func TestStaleLock(t *testing.T) {
	if os.Getenv("NAMED_HOLDER") != "" {
		l, err := Acquire(os.Getenv("NAMED_ROOT"), "w", "local", "crashed")
		if err != nil {
			os.Exit(3)
		}
		_ = l
		os.Stdout.WriteString("held\n")
		time.Sleep(time.Hour)
		return
	}
	root := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStaleLock$")
	cmd.Env = append(os.Environ(), "NAMED_HOLDER=1", "NAMED_ROOT="+root)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := out.Read(buf); err != nil || string(buf) != "held\n" {
		t.Fatalf("holder: %q %v", buf, err)
	}
	if _, err := Acquire(root, "w", "local", "r2"); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "run crashed") {
		t.Fatalf("while the holder lives: %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if e, err := Get(root, "w"); err != nil || e.Holder != nil {
		t.Fatalf("a dead holder is listed: %+v %v", e, err)
	}
	l, err := Acquire(root, "w", "local", "r3")
	if err != nil {
		t.Fatalf("the stale lock was not taken over: %v", err)
	}
	l.Release(0)
}

func TestRemoveAndHome(t *testing.T) {
	root := t.TempDir()
	l, err := Acquire(root, "w", "local", "r")
	if err != nil {
		t.Fatal(err)
	}
	home, err := l.HostHome(os.Geteuid(), os.Getegid())
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(home); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("home %v %v", fi, err)
	}
	// An app's directory it cannot empty itself, and a file.
	locked := filepath.Join(home, "ro")
	os.MkdirAll(filepath.Join(locked, "d"), 0o755)
	os.WriteFile(filepath.Join(locked, "d", "f"), []byte("12345"), 0o644)
	os.Chmod(filepath.Join(locked, "d"), 0o500)
	if n := DirSize(home); n != 5 {
		t.Fatalf("DirSize = %d", n)
	}
	if err := l.CheckSize(6, 5); !errors.Is(err, ErrTooBig) || !strings.Contains(err.Error(), "sandboxes rm w") {
		t.Fatalf("CheckSize: %v", err)
	}
	if err := l.CheckSize(5, 5); err != nil {
		t.Fatal(err)
	}
	l.Release(5)
	var dropped string
	if err := Remove(root, "w", func(m Meta) error { dropped = m.Name; return nil }); err != nil {
		t.Fatal(err)
	}
	if dropped != "w" {
		t.Fatalf("drop got %q", dropped)
	}
	if _, err := os.Stat(filepath.Join(root, "w")); !os.IsNotExist(err) {
		t.Fatalf("left behind: %v", err)
	}
	if err := Remove(root, "w", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Remove of none: %v", err)
	}
	if err := Remove(root, "v", func(Meta) error { return errors.New("x") }); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
}

// TestHostHomeRefusesLink: a home that is a link (or another's) is refused.
func TestHostHomeRefusesLink(t *testing.T) {
	root := t.TempDir()
	l, err := Acquire(root, "w", "local", "r")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Abandon()
	if err := os.Symlink(t.TempDir(), l.HomeDir()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.HostHome(os.Geteuid(), os.Getegid()); err == nil || !strings.Contains(err.Error(), "not a directory owned by") {
		t.Fatalf("a link home: %v", err)
	}
}

// TestHold: a hold keeps the name between its sandboxes, lending it to
// one Acquire of this process at a time; others find it locked until
// the hold is released.
func TestHold(t *testing.T) {
	root := t.TempDir()
	h, err := TakeHold(root, "work", "docker", "env-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := TakeHold(root, "work", "docker", "env-2"); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "env-1") {
		t.Fatalf("a second hold: %v, want ErrLocked naming env-1", err)
	}
	if _, err := Acquire(root, "work", "local", "run-x"); !errors.Is(err, ErrBackend) {
		t.Fatalf("lent to another backend: %v, want ErrBackend", err)
	}
	for i := range 2 { // one sandbox after another, the name held between
		l, err := Acquire(root, "work", "docker", "run-"+strconv.Itoa(i))
		if err != nil {
			t.Fatalf("sandbox %d: %v", i, err)
		}
		if _, err := Acquire(root, "work", "docker", "run-y"); !errors.Is(err, ErrLocked) {
			t.Fatalf("lent twice: %v, want ErrLocked", err)
		}
		if err := l.Release(42); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(42); err != nil { // idempotent
			t.Fatal(err)
		}
		if e, err := Get(root, "work"); err != nil || e.LastRun != "run-"+strconv.Itoa(i) || e.SizeBytes != 42 {
			t.Fatalf("after sandbox %d: %+v, %v", i, e, err)
		}
	}
	if err := Remove(root, "work", func(Meta) error { return nil }); !errors.Is(err, ErrLocked) {
		t.Fatalf("remove while held: %v, want ErrLocked", err)
	}
	h.Release()
	h.Release() // idempotent
	l, err := Acquire(root, "work", "docker", "run-z")
	if err != nil {
		t.Fatalf("after the hold: %v", err)
	}
	if l.lent != nil {
		t.Fatal("lent by a released hold")
	}
	l.Abandon()
}
