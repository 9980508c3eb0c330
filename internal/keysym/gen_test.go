package keysym

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/codegirl-games/agentbox/internal/testenv"
)

// headerDir is where gen.go reads the X11 headers by default (Debian
// package x11proto-dev).
const headerDir = "/usr/include/X11"

// TestTableUpToDate regenerates zz_table.go from the installed headers into
// a temporary directory and compares it with the committed file.
func TestTableUpToDate(t *testing.T) {
	headers := testenv.Probe("the X11 headers in "+headerDir+" (apt-get install x11proto-dev)", func(context.Context) error {
		for _, h := range []string{"keysymdef.h", "XF86keysym.h"} {
			if _, err := os.Stat(filepath.Join(headerDir, h)); err != nil {
				return err
			}
		}
		return nil
	})
	testenv.Require(t, headers, testenv.Programs("go"))
	out := filepath.Join(t.TempDir(), "zz_table.go")
	cmd := exec.Command("go", "run", "gen.go", "-dir", headerDir, "-o", out)
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
