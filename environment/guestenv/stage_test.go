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

// TestHostsFile: the loopback hosts file is written once into the stage
// directory, readable by the sandbox's user, and written again when it was
// changed or loosened.
func TestHostsFile(t *testing.T) {
	stage := filepath.Join(t.TempDir(), "stage")
	useStageDir(t, stage)
	p, err := HostsFile()
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(p)
		if string(got) != LoopbackHosts || fi.Mode().Perm() != 0o644 || filepath.Dir(p) != stage {
			t.Errorf("%s: %s is %v, %q", what, p, fi.Mode(), got)
		}
	}
	check("first")
	fi, _ := os.Stat(p)
	if p2, err := HostsFile(); err != nil || p2 != p {
		t.Fatalf("again: %s, %v", p2, err)
	}
	if fi2, _ := os.Stat(p); !os.SameFile(fi, fi2) {
		t.Error("a sound file was written again")
	}
	for name, spoil := range map[string]func() error{
		"changed":  func() error { return os.WriteFile(p, []byte("10.0.0.1\tlocalhost\n"+LoopbackHosts[17:]), 0o644) },
		"loosened": func() error { return os.Chmod(p, 0o666) },
	} {
		if err := spoil(); err != nil {
			t.Fatal(err)
		}
		if _, err := HostsFile(); err != nil {
			t.Fatal(err)
		}
		check(name)
	}
	if !strings.HasPrefix(LoopbackHosts, "127.0.0.1\tlocalhost\n::1\tlocalhost ") {
		t.Errorf("LoopbackHosts = %q", LoopbackHosts)
	}
}
