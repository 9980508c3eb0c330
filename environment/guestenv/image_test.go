package guestenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImageBinaries: a guest image carries agentbox-guest beside agentbox
// only when it is of that agentbox's build — judged from the two files,
// not from the running process — and says why not otherwise.
func TestImageBinaries(t *testing.T) {
	dir, whole, data := copySelf(t)
	t.Setenv("AGENTBOX_GUEST_BINARY", "")
	sib := filepath.Join(dir, GuestName)
	check := func(name, wantSmall, wantWhy string) {
		t.Helper()
		g, err := ImageBinaries(whole, nil)
		if err != nil || g.Whole != whole || g.Small != wantSmall || !strings.Contains(g.Why, wantWhy) || (wantSmall != "") != (g.Why == "") {
			t.Errorf("%s: ImageBinaries = %+v, %v; want Small %q and a reason containing %q", name, g, err, wantSmall, wantWhy)
		}
	}
	check("no agentbox-guest", "", "no "+GuestName+" beside "+whole)

	if err := os.WriteFile(sib, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	check("a script", "", sib+" is not of the build of "+whole)

	// Another Go program (gofmt: another main module, another build).
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		if other, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "bin", "gofmt")); err == nil {
			os.Remove(sib)
			if err := os.WriteFile(sib, other, 0o755); err != nil {
				t.Fatal(err)
			}
			check("another build", "", sib+" is not of the build of "+whole)
		}
	}

	// Of the same build: carried (a new file is judged anew).
	os.Remove(sib)
	if err := os.WriteFile(sib, data, 0o755); err != nil {
		t.Fatal(err)
	}
	check("the same build", sib, "")

	// Of the same build but not executable: the backend's check fails it.
	if err := os.Chmod(sib, 0o644); err != nil {
		t.Fatal(err)
	}
	check("not executable", "", "not executable")
	os.Chmod(sib, 0o755)

	// Through a symlink to agentbox: the pair is the target's.
	link := filepath.Join(t.TempDir(), "agentbox")
	if err := os.Symlink(whole, link); err != nil {
		t.Fatal(err)
	}
	if g, err := ImageBinaries(link, nil); err != nil || g.Whole != whole || g.Small != sib {
		t.Errorf("through a symlink: ImageBinaries = %+v, %v; want %s and %s", g, err, whole, sib)
	}
	// A bad agentbox is an error, as WholeBinary's.
	if _, err := ImageBinaries(filepath.Join(dir, "missing"), nil); err == nil {
		t.Error("ImageBinaries of a missing agentbox succeeded")
	}
}
