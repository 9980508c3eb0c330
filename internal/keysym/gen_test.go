package keysym

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// headerDir is where gen.go reads the X11 headers by default (Debian
// package x11proto-dev).
const headerDir = "/usr/include/X11"

// TestTableUpToDate regenerates zz_table.go from the installed headers into
// a temporary directory and compares it with the committed file.
func TestTableUpToDate(t *testing.T) {
	for _, h := range []string{"keysymdef.h", "XF86keysym.h"} {
		if _, err := os.Stat(filepath.Join(headerDir, h)); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true but %s is missing (install x11proto-dev): %v", h, err)
			}
			t.Skipf("skipping: %s not found (install x11proto-dev to check zz_table.go against the headers): %v", filepath.Join(headerDir, h), err)
		}
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but the go command is not on PATH: %v", err)
		}
		t.Skipf("skipping: go command not on PATH: %v", err)
	}
	out := filepath.Join(t.TempDir(), "zz_table.go")
	cmd := exec.Command(goTool, "run", "gen.go", "-dir", headerDir, "-o", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run gen.go: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("zz_table.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("zz_table.go is out of date with %s; run \"go generate ./internal/keysym/\" and commit the result", headerDir)
	}
}
