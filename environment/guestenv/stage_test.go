package guestenv

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func useStageDir(t *testing.T, dir string) {
	t.Helper()
	old := stageDir
	stageMu.Lock()
	stageDir, staged = dir, map[string]string{}
	stageMu.Unlock()
	t.Cleanup(func() {
		stageMu.Lock()
		stageDir, staged = old, map[string]string{}
		stageMu.Unlock()
	})
}

// The guest is mounted from a copy named by its content under agentbox's
// own directory, never from where it was built (a path that can name the
// user's home).
func TestStaged(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home", "alice", "bin")
	os.MkdirAll(home, 0o755)
	exe, err := os.Executable() // a Go binary with a build ID
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(exe)
	bin := filepath.Join(home, "agentbox")
	os.WriteFile(bin, data, 0o755)
	script := filepath.Join(home, "script") // no build ID: hashed
	os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755)
	stage := filepath.Join(t.TempDir(), "stage")
	useStageDir(t, stage)

	got, err := Staged(bin)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(got) != stage || !strings.HasPrefix(filepath.Base(got), "guest-") || strings.Contains(got, "alice") {
		t.Errorf("staged at %s, want %s/guest-…", got, stage)
	}
	if b, _ := os.ReadFile(got); !bytes.Equal(b, data) {
		t.Error("the copy differs from the binary")
	}
	if fi, _ := os.Stat(got); fi.Mode().Perm() != 0o755 {
		t.Errorf("the copy's mode is %v", fi.Mode())
	}
	// Reused: by this process, and by another one (no in-process memory).
	if again, _ := Staged(bin); again != got {
		t.Errorf("second stage %s, first %s", again, got)
	}
	staged = map[string]string{}
	if again, _ := Staged(bin); again != got {
		t.Errorf("stage after a restart %s, first %s", again, got)
	}
	// Another binary gets another copy.
	other, err := Staged(script)
	if err != nil || other == got || !strings.HasPrefix(filepath.Base(other), "guest-") {
		t.Errorf("second binary staged at %s (%v)", other, err)
	}
	// A damaged or foreign copy is replaced.
	os.Chmod(got, 0o777)
	staged = map[string]string{}
	if again, err := Staged(bin); err != nil || again != got {
		t.Fatalf("restage: %s %v", again, err)
	}
	if fi, _ := os.Stat(got); fi.Mode().Perm() != 0o755 {
		t.Errorf("a group-writable copy was reused: %v", fi.Mode())
	}
	// Copies unused for a day are removed; the one in use is not.
	old := time.Now().Add(-2 * stagedKeep)
	os.Chtimes(other, old, old)
	os.Chtimes(got, old, old)
	if _, err := Staged(bin); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Errorf("an unused copy survived pruning: %v", err)
	}
	if _, err := os.Stat(got); err != nil {
		t.Errorf("the copy in use was pruned: %v", err)
	}
}

// A stage directory that others may write to, or that is not a directory
// of this user's, is refused: nobody may swap the guest.
func TestStagedRefusesForeignDir(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "script")
	os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)
	open := filepath.Join(t.TempDir(), "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(t.TempDir(), link)
	for _, dir := range []string{open, link} {
		useStageDir(t, dir)
		if got, err := Staged(bin); err == nil {
			t.Errorf("stage dir %s accepted: %s", dir, got)
		}
	}
}
