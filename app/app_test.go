package app

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/codegirl-games/agentbox/internal/stagepath"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

const elf = "\x7fELF\x02\x01\x01"

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func TestParseManifest(t *testing.T) {
	tests := []struct {
		name, in, wantErr string
	}{
		{"minimal", `{"command":"game"}`, ""},
		{"full", `{"command":"bin/game","args":["-x"],"env":{"A_1":"b"},"window_title":"/^G.*$/","ready_output":"game: ready","ready_timeout":"5s","wait_for_window":false,"files":["bin","data/x"]}`, ""},
		{"ms timeout", `{"command":"g","ready_timeout":1500}`, ""},
		{"a11y", `{"command":"zenity","a11y":true}`, ""},
		{"a11y not a bool", `{"command":"zenity","a11y":"yes"}`, `field "a11y" must be bool`},
		{"opengl off", `{"command":"g","opengl":false}`, ""},
		{"opengl not a bool", `{"command":"g","opengl":"no"}`, `field "opengl" must be bool`},
		{"no command", `{"args":[]}`, `"command" is required`},
		{"unknown field", `{"command":"g","comand":"x"}`, `unknown field "comand"`},
		{"traversal command", `{"command":"../g"}`, `leaves the app directory`},
		{"absolute command path", `{"command":"/usr/bin/../../etc/x"}`, `absolute path`},
		{"traversal files", `{"command":"g","files":["a/../../b"]}`, `leaves the app directory`},
		{"absolute files", `{"command":"g","files":["/etc"]}`, `absolute path`},
		{"bad env", `{"command":"g","env":{"A-B":"x"}}`, `not a valid variable name`},
		{"bad regex", `{"command":"g","window_title":"/(/"}`, `bad regular expression`},
		{"bad duration", `{"command":"g","ready_timeout":"soon"}`, `bad duration`},
		{"blank ready_output", `{"command":"g","ready_output":"  "}`, `"ready_output" is blank`},
		{"multi-line ready_output", `{"command":"g","ready_output":"a\nb"}`, `"ready_output" contains a NUL byte or a newline`},
		{"long ready_output", `{"command":"g","ready_output":"` + strings.Repeat("x", MaxReadyOutput+1) + `"}`, `more than 1024`},
		{"type error", `{"command":"g","args":"x"}`, `field "args" must be []string`},
		{"syntax error", "{\n  \"command\": \"g\",\n}", `line 3, column 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseManifest("agentbox.json", []byte(tt.in))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "agentbox.json") {
				t.Errorf("error must wrap ErrInvalid and name the file: %v", err)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "ok", ManifestName), `{"command":"bin/game","window_title":"Game"}`, 0o644)
	write(t, filepath.Join(dir, "ok", "bin", "game"), elf, 0o755)
	write(t, filepath.Join(dir, "ok", "data", "level1"), "x", 0o644)
	if err := os.Symlink("level1", filepath.Join(dir, "ok", "data", "current")); err != nil {
		t.Fatal(err)
	}
	b, err := Load(filepath.Join(dir, "ok"), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var rels []string
	for _, f := range b.Files {
		rels = append(rels, f.Rel)
	}
	want := "agentbox.json bin bin/game data data/current data/level1"
	if got := strings.Join(rels, " "); got != want {
		t.Errorf("files = %q, want %q", got, want)
	}
	if b.InImage || b.Manifest.Command != "bin/game" {
		t.Errorf("bundle = %+v", b)
	}

	// A bare command missing from the directory is a program of the image.
	write(t, filepath.Join(dir, "img", ManifestName), `{"command":"xterm","args":["-T","t"]}`, 0o644)
	b2, err := Load(filepath.Join(dir, "img", ManifestName), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	b2.Close()
	if !b2.InImage {
		t.Error("xterm should be in the image")
	}

	// A TARGET that is no file here but a bare name is a program of the
	// image; a file of that name here is the file.
	t.Chdir(dir)
	b4, err := Load("xterm", DefaultLimits)
	if err != nil {
		t.Fatalf("run xterm: %v", err)
	}
	if !b4.InImage || b4.Manifest.Command != "xterm" || len(b4.Files) != 0 || b4.Dir != "" {
		t.Errorf("xterm: bundle = %+v, want the image's xterm", b4)
	}
	b4.Close()
	write(t, filepath.Join(dir, "xeyes"), elf, 0o755)
	b5, err := Load("xeyes", DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if b5.InImage || len(b5.Files) != 1 {
		t.Errorf("./xeyes: bundle = %+v, want the file", b5)
	}
	b5.Close()
	for _, bad := range []string{"./xterm", "nope/xterm", "app.json", "-xterm", ".hidden", "x y", "x\x1b"} {
		if _, err := Load(bad, DefaultLimits); !errors.Is(err, ErrInvalid) || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%q: %v, want the missing file named", bad, err)
		}
	}

	// A single executable.
	write(t, filepath.Join(dir, "single", "mover"), elf, 0o755)
	b3, err := Load(filepath.Join(dir, "single", "mover"), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	b3.Close()
	if len(b3.Files) != 1 || b3.Manifest.Command != "mover" {
		t.Errorf("single = %+v", b3)
	}
	// Where each came from, absolute, for a replay from anywhere; the
	// executable named as such; a program of the image by its name alone.
	for _, c := range []struct {
		b          *Bundle
		path       string
		executable bool
	}{
		{b, filepath.Join(dir, "ok"), false},
		{b2, filepath.Join(dir, "img", ManifestName), false},
		{b3, filepath.Join(dir, "single", "mover"), true},
		{b4, "", false},
	} {
		if c.b.Path != c.path || c.b.Executable != c.executable {
			t.Errorf("%s: path %q, executable %v; want %q, %v", c.b.Target, c.b.Path, c.b.Executable, c.path, c.executable)
		}
	}
}

func TestLoadRejects(t *testing.T) {
	dir := t.TempDir()
	mk := func(name, manifest string) string {
		p := filepath.Join(dir, name)
		write(t, filepath.Join(p, ManifestName), manifest, 0o644)
		write(t, filepath.Join(p, "game"), elf, 0o755)
		return p
	}
	tests := []struct {
		name    string
		setup   func() string
		wantErr string
	}{
		{"manifest traversal", func() string { return mk("trav", `{"command":"../../bin/sh"}`) }, "leaves the app directory"},
		{"symlink to /etc/passwd", func() string {
			p := mk("link", `{"command":"game"}`)
			os.Symlink("/etc/passwd", filepath.Join(p, "passwd"))
			return p
		}, "absolute target"},
		{"relative symlink out", func() string {
			p := mk("rlink", `{"command":"game"}`)
			os.Symlink("../../../../etc/passwd", filepath.Join(p, "x"))
			return p
		}, "leaves the app directory"},
		{"fifo", func() string {
			p := mk("fifo", `{"command":"game"}`)
			testenv.Require(t, testenv.Condition("a FIFO in a temporary directory", syscall.Mkfifo(filepath.Join(p, "pipe"), 0o644)))
			return p
		}, "is a FIFO"},
		{"hardlink", func() string {
			p := mk("hard", `{"command":"game"}`)
			os.Link(filepath.Join(p, "game"), filepath.Join(p, "game2"))
			return p
		}, "hard links"},
		{"not executable", func() string {
			p := mk("noexec", `{"command":"data"}`)
			write(t, filepath.Join(p, "data"), "x", 0o644)
			return p
		}, "not executable"},
		{"missing command path", func() string { return mk("missing", `{"command":"bin/nope"}`) }, "is not a file in"},
		{"too large", func() string {
			p := mk("big", `{"command":"game"}`)
			write(t, filepath.Join(p, "blob"), strings.Repeat("x", 2048), 0o644)
			return p
		}, "exceed"},
		{"too many files", func() string {
			p := mk("many", `{"command":"game"}`)
			for i := 0; i < 12; i++ {
				write(t, filepath.Join(p, "d", string(rune('a'+i))), "", 0o644)
			}
			return p
		}, "more than"},
		{"dir without manifest", func() string {
			p := filepath.Join(dir, "empty")
			os.MkdirAll(p, 0o755)
			return p
		}, "without agentbox.json"},
		{"not an executable file", func() string {
			p := filepath.Join(dir, "txt", "notes")
			write(t, p, "hello", 0o755)
			return p
		}, "not a Linux executable"},
		{"listed file missing", func() string { return mk("listed", `{"command":"game","files":["game","nope"]}`) }, `lists "nope"`},
	}
	lim := Limits{MaxFiles: 10, MaxBytes: 1024}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Load(tt.setup(), lim)
			if err == nil {
				b.Close()
				t.Fatalf("Load succeeded, want error %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalid) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"command":"game","args":["-x"],"env":{"A":"b"},"window_title":"G*","ready_timeout":"5s"}`))
	f.Add([]byte(`{"command":"../x","files":["/a"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest("m.json", data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		if m.Command == "" {
			t.Fatal("accepted a manifest without command")
		}
		for _, f := range m.Files {
			if stagepath.Check(f) != nil {
				t.Fatalf("accepted unsafe path %q", f)
			}
		}
	})
}

// TestLinkChains: links are resolved through each other, as the sandbox's
// kernel will, before anything starts; every link that leaves the app
// directory, however chained, is refused naming the link.
func TestLinkChains(t *testing.T) {
	type link struct{ name, target string }
	tests := []struct {
		name    string
		dirs    []string
		links   []link
		wantErr string // "" accepts
	}{
		{"the red team's chain", nil, []link{{"s", "."}, {"t", "s/.."}, {"u", "t/.."}}, "/t: symbolic link to s/.. leaves the app directory (through s -> .)"},
		{"only the last of a chain leaves", []string{"d"}, []link{{"s", "."}, {"d/t", "../s/.."}}, "/d/t: symbolic link to ../s/.. leaves the app directory (through s -> .)"},
		{"a chain through a directory link", []string{"data"}, []link{{"a", "b/c"}, {"b", "data"}, {"data/c", "../s/.."}, {"s", "."}},
			"/a: symbolic link to b/c leaves the app directory (through b -> data, data/c -> ../s/.., s -> .)"},
		{"a link to a link that leaves", nil, []link{{"a", "b"}, {"b", "c/.."}, {"c", "."}}, "/a: symbolic link to b leaves the app directory (through b -> c/.., c -> .)"},
		{"up and back down is still out", nil, []link{{"s", "."}, {"x", "s/../" + "app/game"}}, "/x: symbolic link to s/../app/game leaves the app directory"},
		{"a link to the app directory itself", nil, []link{{"s", "."}, {"t", "s/s/s"}}, ""},
		{"a chain that stays inside", []string{"data", "data/sub"}, []link{{"cur", "data/sub"}, {"up", "cur/.."}, {"x", "up/../game"}}, ""},
		{"a loop goes nowhere", nil, []link{{"a", "b"}, {"b", "a"}, {"c", "a/.."}}, ""},
		{"a dangling link inside", nil, []link{{"a", "missing/file"}}, ""},
		{"a dangling link read lexically", nil, []link{{"a", "missing/../.."}}, "/a: symbolic link to missing/../.. leaves the app directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "app")
			write(t, filepath.Join(p, ManifestName), `{"command":"game"}`, 0o644)
			write(t, filepath.Join(p, "game"), elf, 0o755)
			for _, d := range tt.dirs {
				if err := os.MkdirAll(filepath.Join(p, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, l := range tt.links {
				if err := os.Symlink(l.target, filepath.Join(p, l.name)); err != nil {
					t.Fatal(err)
				}
			}
			b, err := Load(p, DefaultLimits)
			if err == nil {
				b.Close()
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Load: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), p+tt.wantErr) || !errors.Is(err, ErrInvalid)):
				t.Fatalf("Load: %v\nwant an error naming %q", err, p+tt.wantErr)
			}
		})
	}
}

// TestLinkChainLong: a chain of thousands of links costs little to check.
func TestLinkChainLong(t *testing.T) {
	p := filepath.Join(t.TempDir(), "app")
	write(t, filepath.Join(p, ManifestName), `{"command":"game"}`, 0o644)
	write(t, filepath.Join(p, "game"), elf, 0o755)
	const n = 1000
	for i := 0; i < n; i++ {
		if err := os.Symlink(fmt.Sprintf("l%05d", i+1), filepath.Join(p, fmt.Sprintf("l%05d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("s/..", filepath.Join(p, fmt.Sprintf("l%05d", n))); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".", filepath.Join(p, "s")); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p, Limits{MaxFiles: 2 * n, MaxBytes: 1 << 20})
	if err == nil || !strings.Contains(err.Error(), "/l00000: symbolic link to l00001 leaves the app directory (through l00001 -> l00002,") {
		t.Fatalf("Load: %.300v", err)
	}
}
