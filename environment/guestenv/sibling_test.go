package guestenv

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestSibling: agentbox-guest beside the executable is the guest when it
// is of the same build, and only then; the executable itself otherwise.
func TestSibling(t *testing.T) {
	dir, exe, data := copySelf(t)
	executable = func() (string, error) { return exe, nil }
	t.Cleanup(func() { executable = os.Executable })
	t.Setenv("AGENTBOX_GUEST_BINARY", "")
	sib := filepath.Join(dir, GuestName)

	if got, err := Binary("", nil); err != nil || got != exe {
		t.Errorf("no %s: Binary = %q, %v; want the executable %s", GuestName, got, err, exe)
	}

	// Not a Go binary (nor an ELF file): not used.
	if err := os.WriteFile(sib, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := Binary("", nil); err != nil || got != exe {
		t.Errorf("%s a script: Binary = %q, %v; want the executable", GuestName, got, err)
	}
	if p, ok := Sibling(exe); ok || p != sib {
		t.Errorf("Sibling with a script = %q, %v; want %q, false", p, ok, sib)
	}
	if n := SiblingNote(""); !strings.Contains(n, sib) {
		t.Errorf("SiblingNote with a script = %q; want it named", n)
	}

	// Of the same build (this very binary): used. A new file (other size
	// and time) is read again, not taken from the first verdict.
	os.Remove(sib)
	if err := os.WriteFile(sib, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := Binary("", nil); err != nil || got != sib {
		t.Errorf("%s of the same build: Binary = %q, %v; want %s", GuestName, got, err, sib)
	}
	if n := SiblingNote(""); n != "" {
		t.Errorf("SiblingNote with %s of the same build = %q; want none", GuestName, n)
	}
	// A guest image carries the whole agentbox (serve runs from it).
	if got, err := WholeBinary("", nil); err != nil || got != exe {
		t.Errorf("WholeBinary = %q, %v; want the executable %s, not %s", got, err, exe, GuestName)
	}
	// Through a symlink to the executable: its directory is the target's.
	link := filepath.Join(t.TempDir(), "agentbox")
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	if p, ok := Sibling(link); !ok || p != sib {
		t.Errorf("Sibling(a symlink to %s) = %q, %v; want %s, true", exe, p, ok, sib)
	}
	// An explicit binary wins.
	t.Setenv("AGENTBOX_GUEST_BINARY", exe)
	if got, err := Binary("", nil); err != nil || got != exe {
		t.Errorf("$AGENTBOX_GUEST_BINARY set: Binary = %q, %v; want %s", got, err, exe)
	}
}

// TestSameBuild: what makes two binaries' builds differ.
func TestSameBuild(t *testing.T) {
	base := func() *debug.BuildInfo {
		return &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Path:      "github.com/codegirl-games/agentbox/cmd/agentbox",
			Main:      debug.Module{Path: "github.com/codegirl-games/agentbox", Version: "(devel)"},
			Deps: []*debug.Module{
				{Path: "github.com/jezek/xgb", Version: "v1.1.1", Sum: "h1:a"},
				{Path: "k8s.io/client-go", Version: "v0.34.0", Sum: "h1:b"},
			},
			Settings: []debug.BuildSetting{
				{Key: "-ldflags", Value: "-X github.com/codegirl-games/agentbox/internal/version.Version=v1"},
				{Key: "CGO_ENABLED", Value: "0"},
				{Key: "vcs.revision", Value: "abc"},
				{Key: "vcs.modified", Value: "false"},
			},
		}
	}
	guest := func() *debug.BuildInfo {
		g := base()
		g.Path = "github.com/codegirl-games/agentbox/cmd/agentbox-guest"
		g.Deps = g.Deps[:1] // links less
		return g
	}
	if !sameBuild(base(), guest()) {
		t.Fatal("the guest of the same build (fewer modules, another main package) is not taken")
	}
	for name, change := range map[string]func(*debug.BuildInfo){
		"another Go":       func(b *debug.BuildInfo) { b.GoVersion = "go1.26.7" },
		"another version":  func(b *debug.BuildInfo) { b.Main.Version = "v0.1.0" },
		"another -ldflags": func(b *debug.BuildInfo) { b.Settings[0].Value = "-X x=v2" },
		"another revision": func(b *debug.BuildInfo) { b.Settings[2].Value = "abd" },
		"a setting more": func(b *debug.BuildInfo) {
			b.Settings = append(b.Settings, debug.BuildSetting{Key: "-race", Value: "true"})
		},
		"a setting less":       func(b *debug.BuildInfo) { b.Settings = b.Settings[1:] },
		"another module":       func(b *debug.BuildInfo) { b.Deps[0].Version = "v1.1.0" },
		"a module replaced":    func(b *debug.BuildInfo) { b.Deps[0].Replace = &debug.Module{Path: "../xgb"} },
		"a module not in host": func(b *debug.BuildInfo) { b.Deps = append(b.Deps, &debug.Module{Path: "example.com/x", Version: "v1"}) },
	} {
		g := guest()
		change(g)
		if sameBuild(base(), g) {
			t.Errorf("%s: taken as the same build", name)
		}
	}
}

// copySelf copies this test binary (a Go binary with build information)
// into a temporary directory as "agentbox": the directory, the copy and
// its bytes.
func copySelf(t *testing.T) (dir, path string, data []byte) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err = os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	path = filepath.Join(dir, "agentbox")
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, path, data
}
