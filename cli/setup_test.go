package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/app"
)

// TestRunIDNamesTheApp: a run is named after its app: an executable by
// its own name (not its directory's), an app directory by its directory,
// a manifest by its directory, a program of the image by its name.
func TestRunIDNamesTheApp(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "builds")
	if err := os.MkdirAll(filepath.Join(dir, "game"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ path, data string }{
		{filepath.Join(dir, "mover-next"), "#!/bin/sh\n"},
		{filepath.Join(dir, "game", "run.sh"), "#!/bin/sh\n"},
		{filepath.Join(dir, "game", app.ManifestName), `{"command": "run.sh"}`},
	} {
		if err := os.WriteFile(f.path, []byte(f.data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for target, want := range map[string]string{
		filepath.Join(dir, "mover-next"):             "-mover-next-",
		filepath.Join(dir, "game"):                   "-game-",
		filepath.Join(dir, "game", app.ManifestName): "-game-",
		"xterm": "-xterm-",
	} {
		b, err := app.Load(target, app.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		if id := newRunID(b); !strings.Contains(id, want) {
			t.Errorf("%s: run ID %s, want it to contain %s", target, id, want)
		}
		b.Close()
	}
}

// TestEvalOutIsNew: two evals of one suite started in the same second get
// directories of their own, each made new; --out is taken as given.
func TestEvalOutIsNew(t *testing.T) {
	t.Chdir(t.TempDir())
	seen := map[string]bool{}
	for range 20 { // well within a second
		id, out, err := evalOut("my suite", "")
		if err != nil {
			t.Fatal(err)
		}
		if seen[out] || filepath.Dir(out) != evalsDir || !strings.Contains(id, "-my-suite-") {
			t.Fatalf("eval %s at %s: want a new directory under %s", id, out, evalsDir)
		}
		seen[out] = true
		if entries, err := os.ReadDir(out); err != nil || len(entries) != 0 {
			t.Errorf("%s: %v, %d entries; want it made, empty", out, err, len(entries))
		}
	}
	if _, out, err := evalOut("s", "/given/dir"); err != nil || out != "/given/dir" {
		t.Errorf("--out: %s, %v", out, err)
	}
}
