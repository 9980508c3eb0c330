package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// names lists a directory.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range entries {
		n = append(n, e.Name())
	}
	return n
}

func TestWriteFile(t *testing.T) {
	old := syscall.Umask(0o077) // perm is exact, whatever the umask
	t.Cleanup(func() { syscall.Umask(old) })
	for _, tc := range []struct {
		name string
		opts []Option
		perm os.FileMode
		prev string // the target's contents before, "" for none
	}{
		{"new file", nil, 0o644, ""},
		{"replaces a file", nil, 0o644, "old contents, longer than the new"},
		{"no sync", []Option{NoSync}, 0o600, "old"},
		{"executable", nil, 0o755, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "run.json")
			var held *os.File
			if tc.prev != "" {
				if err := os.WriteFile(path, []byte(tc.prev), 0o644); err != nil {
					t.Fatal(err)
				}
				var err error
				if held, err = os.Open(path); err != nil {
					t.Fatal(err)
				}
				defer held.Close()
			}
			if err := WriteFile(path, []byte("new"), tc.perm, tc.opts...); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != "new" {
				t.Fatalf("read %q, %v; want new", got, err)
			}
			fi, err := os.Stat(path)
			if err != nil || fi.Mode().Perm() != tc.perm {
				t.Errorf("mode %v, %v; want %v", fi.Mode().Perm(), err, tc.perm)
			}
			if n := names(t, dir); !slices.Equal(n, []string{"run.json"}) {
				t.Errorf("directory holds %q, want only run.json", n)
			}
			if held != nil {
				// A reader that had the old file open still reads all of it.
				b := make([]byte, 100)
				n, _ := held.Read(b)
				if string(b[:n]) != tc.prev {
					t.Errorf("the old file now reads %q", b[:n])
				}
			}
		})
	}
}

// TestFailureLeavesNothing: whatever step fails, the target is unchanged
// and no temporary file is left in the directory.
func TestFailureLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string) string // returns the target
		want  string
	}{
		{"rename over a directory", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "summary.json")
			if err := os.MkdirAll(filepath.Join(p, "inside"), 0o755); err != nil {
				t.Fatal(err)
			}
			return p
		}, "summary.json"},
		{"a directory that is missing", func(t *testing.T, dir string) string {
			return filepath.Join(dir, "missing", "summary.json")
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := tc.setup(t, dir)
			before := names(t, dir)
			if err := WriteFile(path, []byte("data"), 0o644); err == nil {
				t.Fatal("WriteFile succeeded")
			} else {
				t.Logf("error: %v", err)
			}
			if after := names(t, dir); !slices.Equal(after, before) {
				t.Errorf("directory holds %q after the failure, held %q before", after, before)
			}
		})
	}
}

func TestAbort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.mp4")
	f, err := Create(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Match("*.mp4", filepath.Base(f.Name())); m || filepath.Dir(f.Name()) != dir || !strings.HasPrefix(filepath.Base(f.Name()), ".out.mp4.tmp-") {
		t.Errorf("temporary name %s: want .out.mp4.tmp-* in %s", f.Name(), dir)
	}
	if _, err := f.Write([]byte("half")); err != nil {
		t.Fatal(err)
	}
	f.Abort()
	f.Abort() // twice is fine
	if n := names(t, dir); len(n) != 0 {
		t.Errorf("directory holds %q after Abort", n)
	}
	if err := f.Commit(); err == nil {
		t.Error("Commit after Abort succeeded")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("target exists after Abort: %v", err)
	}
}

// TestWrittenByName: a program that writes the temporary file by its name
// (ffmpeg) and truncates it, then Commit.
func TestWrittenByName(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.webm")
	f, err := Create(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Abort()
	if err := os.WriteFile(f.Name(), []byte("video"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	f.Abort() // after Commit: nothing
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "video" {
		t.Fatalf("read %q, %v", got, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
	if err := f.Commit(); err == nil {
		t.Error("a second Commit succeeded")
	}
}

// TestNoReplace: with NoReplace a file that exists by the commit is kept
// as it was and the error says it exists; a new name is written as usual
// (the control).
func TestNoReplace(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "run.mp4")
	if err := os.WriteFile(p, []byte("the user's"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := WriteFile(p, []byte("new"), 0o644, NoReplace)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("WriteFile over an existing file with NoReplace: %v, want an error wrapping fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "the user's" {
		t.Errorf("the existing file now holds %q", b)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"run.mp4"}) {
		t.Errorf("directory holds %q, want only run.mp4 (no temporary file left)", got)
	}
	q := filepath.Join(dir, "new.mp4")
	if err := WriteFile(q, []byte("new"), 0o600, NoReplace); err != nil {
		t.Fatalf("a new name with NoReplace: %v", err)
	}
	if b, _ := os.ReadFile(q); string(b) != "new" {
		t.Errorf("new.mp4 holds %q", b)
	}
}
