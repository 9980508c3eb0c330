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
