package faketime

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheck: dynamically linked programs and scripts run by one pass; a
// static executable, a Go program, a script of a static interpreter and
// a file that is no program are refused, each naming why.
func TestCheck(t *testing.T) {
	self, err := os.Executable() // this test binary: a Go program
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, path, want string
	}{
		{"dynamic ELF", "/bin/sh", ""},
		{"script", write("ok.sh", "#!/bin/sh\necho hi\n"), ""},
		{"env script", write("env.sh", "#!/usr/bin/env sh\necho hi\n"), ""},
		{"Go program", self, "cannot run on a virtual clock"},
		{"script of a Go program", write("go.sh", "#!"+self+"\n"), "cannot run on a virtual clock"},
		{"text", write("notes.txt", "hello\n"), "neither an ELF executable nor a #! script"},
		{"empty #!", write("empty.sh", "#!\n"), "without an interpreter"},
		{"loop", write("loop.sh", "#!"+filepath.Join(dir, "loop.sh")+"\n"), "too many levels"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Check(c.path)
			if c.want == "" {
				if err != nil {
					t.Fatalf("Check(%s) = %v, want nil", c.path, err)
				}
				return
			}
			if !errors.Is(err, ErrNotFakeable) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Check(%s) = %v, want ErrNotFakeable naming %q", c.path, err, c.want)
			}
		})
	}
}

// TestCheckStatic: an ELF without PT_INTERP is refused as statically
// linked (this test binary, built with CGO_ENABLED=0, is one when the
// build is static; a dynamic one is judged a Go program above).
func TestCheckStatic(t *testing.T) {
	self, _ := os.Executable()
	err := Check(self)
	if err == nil {
		t.Fatal("a Go test binary passed")
	}
	if !strings.Contains(err.Error(), "statically linked") && !strings.Contains(err.Error(), "Go program") {
		t.Fatalf("Check = %v", err)
	}
}

// TestSpec: the clock file holds seconds and nanoseconds, as
// libfaketime reads them with FAKETIME_FMT=%s.
func TestSpec(t *testing.T) {
	for ns, want := range map[int64]string{
		1735689600_000000000: "1735689600.000000000\n",
		1735689600_300000000: "1735689600.300000000\n",
		1_000000001:          "1.000000001\n",
	} {
		if got := Spec(ns); got != want {
			t.Errorf("Spec(%d) = %q, want %q", ns, got, want)
		}
	}
}
