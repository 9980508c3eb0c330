package trace

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/codegirl-games/agentbox/action"
)

// craftedDir is a trace directory with every kind of path a crafted trace
// can name, next to a secret outside it.
func craftedDir(t *testing.T) (dir, secret string) {
	t.Helper()
	base := t.TempDir()
	secret = filepath.Join(base, "secret")
	must(t, os.WriteFile(secret, []byte("TOP SECRET"), 0o600))
	dir = filepath.Join(base, "trace")
	must(t, os.MkdirAll(filepath.Join(dir, ScreenshotsDir), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, StdoutFile), []byte("plain output\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, ScreenshotsDir, "000001.png"), []byte("png"), 0o644))
	must(t, os.Symlink(secret, filepath.Join(dir, StderrFile)))                                     // out of the trace
	must(t, os.Symlink("000001.png", filepath.Join(dir, ScreenshotsDir, "000002.png")))             // inside, still a link
	must(t, os.Symlink(filepath.Dir(secret), filepath.Join(dir, "up")))                             // a directory link
	must(t, os.Symlink(ScreenshotsDir, filepath.Join(dir, "shots")))                                // a directory link inside
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))                                      // would block a reader
	must(t, os.WriteFile(filepath.Join(dir, "back\\slash"), []byte("x"), 0o644))                    // not a name agentbox writes
	must(t, os.MkdirAll(filepath.Join(dir, "replay"), 0o755))                                       // a directory
	must(t, os.WriteFile(filepath.Join(dir, "replay", "compare-000001.png"), []byte("png"), 0o644)) // the control
	return dir, secret
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpenFileConfinesToTheTrace(t *testing.T) {
	dir, secret := craftedDir(t)
	for _, c := range []struct {
		name string
		want string // "" opens; "refused"; "missing"
	}{
		{StdoutFile, ""},
		{"screenshots/000001.png", ""},
		{"screenshots/./000001.png", ""},
		{"replay/compare-000001.png", ""},
		{StderrFile, "refused"},
		{"screenshots/000002.png", "refused"},
		{"up/secret", "refused"},
		{"shots/000001.png", "refused"},
		{"fifo", "refused"},
		{"replay", "refused"},
		{"back\\slash", "refused"},
		{"../secret", "refused"},
		{"../../../../../../" + secret, "refused"},
		{secret, "refused"},
		{"screenshots/../../secret", "refused"},
		{"", "refused"},
		{"screenshots/999999.png", "missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := OpenFile(dir, c.name)
			if f != nil {
				f.Close()
			}
			cerr := CheckFile(dir, c.name)
			switch c.want {
			case "":
				if err != nil || cerr != nil {
					t.Errorf("OpenFile: %v, CheckFile: %v; want both to succeed", err, cerr)
				}
			case "refused":
				if !errors.Is(err, ErrRefused) || !errors.Is(cerr, ErrRefused) {
					t.Errorf("OpenFile: %v, CheckFile: %v; want ErrRefused", err, cerr)
				}
			case "missing":
				if !errors.Is(err, fs.ErrNotExist) || !errors.Is(cerr, fs.ErrNotExist) {
					t.Errorf("OpenFile: %v, CheckFile: %v; want fs.ErrNotExist", err, cerr)
				}
			}
		})
	}
	if _, err := ReadFile(dir, StdoutFile, 5); err == nil || !strings.Contains(err.Error(), "larger than 5 bytes") {
		t.Errorf("ReadFile past its bound: %v", err)
	}
}

// TestOpenRefusesCraftedScreenshots: screenshots named by steps.jsonl that
// leave the trace or are links are refused, listed with the reason, and
// never reported usable; run.json and steps.jsonl are read the same way.
func TestOpenRefusesCraftedScreenshots(t *testing.T) {
	dir, secret := craftedDir(t)
	w, err := Create(filepath.Join(t.TempDir(), "real"), Run{ID: "r"}, Options{})
	must(t, err)
	must(t, w.Finish(nil))
	data, err := os.ReadFile(filepath.Join(w.dir, RunFile))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, RunFile), data, 0o644))
	var lines []byte
	for i, shot := range []string{"screenshots/000001.png", "../../../../../../.." + secret, "screenshots/000002.png", "screenshots/404.png"} {
		rec := Record{Type: TypeStep, Step: i + 1, Observation: &Observation{Screenshot: shot}, Action: &action.Action{Kind: action.Wait, MS: 1}}
		b, err := json.Marshal(rec)
		must(t, err)
		lines = append(append(lines, b...), '\n')
	}
	must(t, os.WriteFile(filepath.Join(dir, StepsFile), lines, 0o644))

	tr, err := Open(dir)
	must(t, err)
	if !tr.HasScreenshot("screenshots/000001.png") {
		t.Errorf("the plain screenshot (the control) is not usable: refused %v, missing %v", tr.Refused, tr.Missing)
	}
	for _, bad := range []string{"../../../../../../.." + secret, "screenshots/000002.png", "screenshots/404.png", ""} {
		if tr.HasScreenshot(bad) {
			t.Errorf("HasScreenshot(%q) = true", bad)
		}
	}
	if len(tr.Refused) != 2 || !strings.Contains(tr.Refused[0], "not a path inside the trace") || !strings.Contains(tr.Refused[1], "symbolic link") {
		t.Errorf("refused %q", tr.Refused)
	}
	if len(tr.Missing) != 1 || tr.Missing[0] != "screenshots/404.png" {
		t.Errorf("missing %q", tr.Missing)
	}

	// run.json or steps.jsonl through a link: not a trace.
	for _, name := range []string{RunFile, StepsFile} {
		d2 := filepath.Join(t.TempDir(), "linked")
		must(t, os.MkdirAll(d2, 0o755))
		for _, n := range []string{RunFile, StepsFile} {
			src := filepath.Join(dir, n)
			if n == name {
				must(t, os.Symlink(src, filepath.Join(d2, n)))
				continue
			}
			b, err := os.ReadFile(src)
			must(t, err)
			must(t, os.WriteFile(filepath.Join(d2, n), b, 0o644))
		}
		if _, err := Open(d2); !errors.Is(err, ErrRefused) {
			t.Errorf("%s as a link: Open: %v, want ErrRefused", name, err)
		}
	}
}
