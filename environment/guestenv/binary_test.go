package guestenv

import (
	"debug/elf"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/environment"
)

func TestBinary(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script")
	os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	noexec := filepath.Join(dir, "noexec")
	os.WriteFile(noexec, data, 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(exe, link)
	refuse := func(*elf.File) error { return errors.New("the backend refuses it") }

	tests := []struct {
		name  string
		path  string
		check func(*elf.File) error
		want  string // error text; "" for success
	}{
		{"missing", filepath.Join(dir, "missing"), nil, "no such file"},
		{"a script", script, nil, "not a Linux executable"},
		{"not executable", noexec, nil, "not executable"},
		{"the backend's check", exe, refuse, "the backend refuses it"},
		{"this test binary", exe, nil, ""},
		{"through a symlink", link, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Binary(tt.path, tt.check)
			if tt.want == "" {
				if err != nil || !filepath.IsAbs(got) || got == link {
					t.Errorf("Binary(%s) = %q, %v; want an absolute path with links resolved", tt.path, got, err)
				}
				return
			}
			if !errors.Is(err, environment.ErrGuest) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Binary(%s) = %q, %v; want ErrGuest containing %q", tt.path, got, err, tt.want)
			}
		})
	}

	t.Setenv("AGENTBOX_GUEST_BINARY", script)
	if _, err := Binary("", nil); err == nil || !strings.Contains(err.Error(), script) {
		t.Errorf("$AGENTBOX_GUEST_BINARY was not used: %v", err)
	}
}
