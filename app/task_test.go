package app

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/codegirl-games/agentbox/action"
)

func TestManifestTaskFields(t *testing.T) {
	for _, tt := range []struct {
		name, json, want string // want: "" accepts; else a part of the error
	}{
		{"all", `{"command": "x", "inputs": [{"from": "a.ods", "to": "~/Documents/a.ods"}], "collect": ["~/Documents/*.ods", "~/**/*.txt"], "collect_limits": {"files": 5, "bytes": "64MiB"}, "before_collect": [{"action": "key", "keys": "ctrl+s"}, {"action": "wait", "ms": 1000}]}`, ""},
		{"absolute inside the home", `{"command": "x", "inputs": [{"from": "a", "to": "/tmp/home/a"}]}`, ""},
		{"to leaves the home", `{"command": "x", "inputs": [{"from": "a", "to": "~/../etc/passwd"}]}`, `field "inputs"[0].to: "~/../etc/passwd" leaves the home (..)`},
		{"to absolute outside", `{"command": "x", "inputs": [{"from": "a", "to": "/etc/passwd"}]}`, `field "inputs"[0].to: "/etc/passwd" is not below the home`},
		{"to the home itself", `{"command": "x", "inputs": [{"from": "a", "to": "~/"}]}`, `is the home itself`},
		{"to the home bare", `{"command": "x", "inputs": [{"from": "a", "to": "~"}]}`, `is the home itself`},
		{"to relative", `{"command": "x", "inputs": [{"from": "a", "to": "Documents/a"}]}`, `is not below the home`},
		{"to dot-dot deeper", `{"command": "x", "inputs": [{"from": "a", "to": "~/a"}, {"from": "b", "to": "~/x/../../b"}]}`, `field "inputs"[1].to`},
		{"same to twice", `{"command": "x", "inputs": [{"from": "a", "to": "~/a"}, {"from": "b", "to": "~/a"}]}`, `field "inputs"[1].to: ~/a is the to of inputs[0] as well`},
		{"input without from", `{"command": "x", "inputs": [{"to": "~/a"}]}`, `field "inputs"[0].from`},
		{"input unknown field", `{"command": "x", "inputs": [{"from": "a", "to": "~/a", "mode": 1}]}`, `unknown field "mode"`},
		{"collect leaves", `{"command": "x", "collect": ["~/a/../../etc/*"]}`, `field "collect"[0]: "~/a/../../etc/*" leaves the home`},
		{"collect absolute", `{"command": "x", "collect": ["/etc/*"]}`, `field "collect"[0]: "/etc/*" is not below the home`},
		{"collect bad glob", `{"command": "x", "collect": ["~/a/["]}`, `bad glob`},
		{"collect bad star-star", `{"command": "x", "collect": ["~/a**"]}`, `** stands alone`},
		{"limits zero files", `{"command": "x", "collect": ["~/a"], "collect_limits": {"files": 0}}`, `field "collect_limits".files`},
		{"limits bad unit", `{"command": "x", "collect": ["~/a"], "collect_limits": {"bytes": "5 parsecs"}}`, `field "collect_limits".bytes`},
		{"limits unknown", `{"command": "x", "collect": ["~/a"], "collect_limits": {"size": 5}}`, `unknown field "size"`},
		{"before_collect checks", `{"command": "x", "collect": ["~/a"], "before_collect": [{"wait_for": "window", "title": "*saved*", "timeout_ms": 60000}, {"wait_for": "stable", "stable_ms": 500}, {"wait_for": "changed"}, {"expect": "running"}, {"expect": "window", "title": "/^x$/"}, {"expect": "exited", "code": 0}]}`, ""},
		{"before_collect two verbs", `{"command": "x", "collect": ["~/a"], "before_collect": [{"expect": "running", "action": "key", "keys": "a"}]}`, `field "before_collect"[0]: want exactly one of action, wait_for or expect`},
		{"before_collect no verb", `{"command": "x", "collect": ["~/a"], "before_collect": [{"keys": "a"}]}`, `field "before_collect"[0]: want exactly one of`},
		{"before_collect unknown wait_for", `{"command": "x", "collect": ["~/a"], "before_collect": [{"wait_for": "pixel"}]}`, `wait_for: unknown "pixel"; known here: changed, stable, window`},
		{"before_collect unknown expect", `{"command": "x", "collect": ["~/a"], "before_collect": [{"expect": "moved"}]}`, `expect: unknown "moved"; known here: exited, running, window`},
		{"before_collect window without title", `{"command": "x", "collect": ["~/a"], "before_collect": [{"wait_for": "window"}]}`, `wait_for window: title is required`},
		{"before_collect bad title", `{"command": "x", "collect": ["~/a"], "before_collect": [{"expect": "window", "title": "/(/"}]}`, `expect window: title:`},
		{"before_collect field not taken", `{"command": "x", "collect": ["~/a"], "before_collect": [{"expect": "running", "title": "x"}]}`, `expect running: unknown field "title"; it takes none`},
		{"before_collect bad timeout", `{"command": "x", "collect": ["~/a"], "before_collect": [{"wait_for": "changed", "timeout_ms": -5}]}`, `wait_for changed: timeout_ms: want a positive number`},
		{"before_collect timeout too long", `{"command": "x", "collect": ["~/a"], "before_collect": [{"wait_for": "changed", "timeout_ms": 99999999}]}`, `wait_for changed: timeout_ms: want at most 120000, got 99999999`},
		{"before_collect bad action", `{"command": "x", "collect": ["~/a"], "before_collect": [{"action": "fly"}]}`, `field "before_collect"[0]`},
		{"before_collect without collect", `{"command": "x", "before_collect": [{"action": "key", "keys": "ctrl+s"}]}`, `without "collect"`},
		{"unknown field still refused", `{"command": "x", "collects": ["~/a"]}`, `unknown field "collects"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseManifest("agentbox.json", []byte(tt.json))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("accepted, want an error containing %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			case err != nil && !errors.Is(err, ErrInvalid):
				t.Fatalf("err = %v, not ErrInvalid", err)
			}
			if tt.name == "before_collect checks" {
				var got []string
				for _, st := range m.Task.Collect.Before {
					got = append(got, st.String())
				}
				want := `wait_for window "*saved*"|wait_for stable|wait_for changed|expect running|expect window "/^x$/"|expect exited (code 0)`
				if strings.Join(got, "|") != want {
					t.Errorf("steps %q, want %s", got, want)
				}
				if a := m.Task.Collect.Before[0].Action; a.Kind != action.Wait || a.Until != action.UntilWindow || a.MS != 60000 {
					t.Errorf("wait_for window's action = %+v", a)
				}
				if a := m.Task.Collect.Before[2].Action; a.Until != action.UntilChange || a.MS != DefaultCollectWaitMS {
					t.Errorf("wait_for changed's action = %+v", a)
				}
			}
			if tt.name == "all" {
				c := m.Task.Collect
				if c.Limits != (CollectLimits{Files: 5, Bytes: 64 << 20}) || len(c.Before) != 2 || len(c.Patterns) != 2 || m.Task.Inputs[0].To != "~/Documents/a.ods" {
					t.Errorf("task = %+v", m.Task)
				}
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	for s, want := range map[string]int64{"64MiB": 64 << 20, "10MB": 10_000_000, "512k": 512 << 10, "1G": 1 << 30, "4096": 4096, " 2 KiB ": 2048} {
		if got, err := ParseSize(s); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "MiB", "-1", "1.5MiB", "5 parsecs", "99999999999999999999G"} {
		if _, err := ParseSize(s); err == nil {
			t.Errorf("ParseSize(%q) accepted it", s)
		}
	}
}

func writeFile(t *testing.T, p, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadInputs(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "data", "sales.ods"), "ods")
	writeFile(t, filepath.Join(dir, "tree", "a.txt"), "a")
	writeFile(t, filepath.Join(dir, "tree", "sub", "b.txt"), "bb")
	if err := os.Symlink("a.txt", filepath.Join(dir, "tree", "link")); err != nil {
		t.Fatal(err)
	}
	tf := TaskFiles{Dir: dir, Inputs: []Input{{From: "data/sales.ods", To: "~/Documents/sales.ods"}, {From: "tree", To: "~/work"}}}
	in, err := LoadInputs(tf, nil, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var got []string
	for _, f := range in.Files {
		got = append(got, f.Rel)
	}
	want := "Documents,Documents/sales.ods,work,work/a.txt,work/link,work/sub,work/sub/b.txt"
	if strings.Join(got, ",") != want || in.TotalBytes != 6 {
		t.Errorf("files %s (%d bytes), want %s (6)", strings.Join(got, ","), in.TotalBytes, want)
	}
	r, err := in.Open("work/sub/b.txt")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(r)
	r.Close()
	if string(data) != "bb" {
		t.Errorf("work/sub/b.txt = %q", data)
	}
}

func TestLoadInputsRefused(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ok.txt"), "12345")
	writeFile(t, filepath.Join(dir, "outside", "secret"), "s")
	writeFile(t, filepath.Join(dir, "esc", "a"), "a")
	if err := os.Symlink("../outside/secret", filepath.Join(dir, "esc", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("ok.txt", filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	appB := &Bundle{Files: make([]File, 3), TotalBytes: 8}
	for _, tt := range []struct {
		name string
		in   Input
		app  *Bundle
		lim  Limits
		want string
	}{
		{"missing", Input{From: "nope", To: "~/a"}, nil, DefaultLimits, "inputs[0].from"},
		{"a link leaves the directory", Input{From: "esc", To: "~/a"}, nil, DefaultLimits, "leaves the input's directory"},
		{"a link as the input", Input{From: "link.txt", To: "~/a"}, nil, DefaultLimits, "not a regular file or a directory"},
		{"a FIFO", Input{From: "fifo", To: "~/a"}, nil, DefaultLimits, "not a regular file or a directory"},
		{"bytes with the app's", Input{From: "ok.txt", To: "~/a"}, appB, Limits{MaxFiles: 100, MaxBytes: 12}, "at most 100 entries and 12 bytes (3 entries and 8 bytes before this input)"},
		{"files with the app's", Input{From: "esc/a", To: "~/d/a"}, appB, Limits{MaxFiles: 4, MaxBytes: 100}, "exceed 4 files"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in, err := LoadInputs(TaskFiles{Dir: dir, Inputs: []Input{tt.in}}, tt.app, tt.lim)
			if err == nil {
				in.Close()
				t.Fatalf("accepted, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrInvalid) {
				t.Errorf("err = %v, want it to contain %q (ErrInvalid)", err, tt.want)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	m := TaskFiles{Dir: "/app", Inputs: []Input{{From: "a", To: "~/a"}}, Collect: Collect{Patterns: []string{"~/a"}, Limits: CollectLimits{Files: 3}}}
	s := TaskFiles{Dir: "/script", Inputs: []Input{{From: "b", To: "~/b"}}, Collect: Collect{Patterns: []string{"~/b"}}}
	got := m.Merge(s)
	if len(got.Inputs) != 2 || got.Inputs[0].From != "/app/a" || got.Inputs[1].From != "/script/b" {
		t.Errorf("inputs = %+v", got.Inputs)
	}
	if strings.Join(got.Collect.Patterns, ",") != "~/a,~/b" || got.Collect.Limits.Files != 3 {
		t.Errorf("collect = %+v", got.Collect)
	}
}
