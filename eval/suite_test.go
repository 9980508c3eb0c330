package eval

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/agent"
	_ "github.com/codegirl-games/agentbox/agent/demo"
	_ "github.com/codegirl-games/agentbox/agent/idle"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/netpolicy"
	"github.com/codegirl-games/agentbox/observe"
)

// play is a script as a suite's task names it (script: play.yaml).
const play = `task: Move the character right.
screen: 800x600
steps:
  - action: key
    keys: Right
  - expect: running
`

// suiteDir lays out a directory with an app (app/, a shell script and its
// manifest), play.yaml and the suite, and returns the suite's path.
func suiteDir(t testing.TB, suite string) string {
	t.Helper()
	dir := t.TempDir()
	appDir := filepath.Join(dir, "app")
	for _, f := range []struct {
		path, data string
		mode       os.FileMode
	}{
		{filepath.Join(appDir, "game"), "#!/bin/sh\nexit 0\n", 0o755},
		{filepath.Join(appDir, "agentbox.json"), `{"command": "game", "window_title": "game"}`, 0o644},
		{filepath.Join(dir, "play.yaml"), play, 0o644},
		{filepath.Join(dir, "suite.yaml"), suite, 0o644},
	} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.path, []byte(f.data), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "suite.yaml")
}

func TestLoad(t *testing.T) {
	// want is checked against the loaded suite with every path made
	// relative to the suite's directory.
	tests := []struct {
		name  string
		suite string
		want  *Suite
	}{
		{"minimal", "tasks:\n  - name: a\n    target: app\n    agent: idle\n",
			&Suite{Name: "suite", Tasks: []*Task{{Name: "a", Line: 2, Target: "app", Agent: "idle", Options: nil, Episodes: 1}}}},
		{"every field", `name: nightly
tasks:
  - name: scripted
    target: app
    script: play.yaml
    timeout: 90s
    episodes: 3
    max_steps: 500
    image: agentbox/test:bookworm
    env: {LANG: de_DE.UTF-8}
    a11y: true
  - name: demo.v2_x-1
    target: app/agentbox.json
    task: Move right.
    agent: demo
    options: {key: Left}
    screen: 1024x768
`, &Suite{Name: "nightly", Tasks: []*Task{
			{Name: "scripted", Line: 3, Target: "app", Script: "play.yaml", Task: "Move the character right.", Screen: observe.Screen{Width: 800, Height: 600, Depth: 24},
				Timeout: 90 * time.Second, Episodes: 3, MaxSteps: 500, Image: "agentbox/test:bookworm", Env: map[string]string{"LANG": "de_DE.UTF-8"}, A11y: true},
			{Name: "demo.v2_x-1", Line: 12, Target: "app/agentbox.json", Task: "Move right.", Agent: "demo", Options: map[string]string{"key": "Left"},
				Screen: observe.Screen{Width: 1024, Height: 768, Depth: 24}, Episodes: 1},
		}}},
		// A screen the script contradicts is refused (TestLoadRejects): its
		// coordinates were written for its own.
		{"the script's task yields to the suite's; its screen may be said again", "tasks:\n  - name: a\n    target: app\n    script: play.yaml\n    task: Other.\n    screen: 800x600\n",
			&Suite{Name: "suite", Tasks: []*Task{{Name: "a", Line: 2, Target: "app", Script: "play.yaml", Task: "Other.", Screen: observe.Screen{Width: 800, Height: 600, Depth: 24}, Episodes: 1}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := suiteDir(t, tt.suite)
			dir := filepath.Dir(path)
			s, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if s.File != path {
				t.Errorf("File = %q, want %q", s.File, path)
			}
			s.File = ""
			for _, task := range s.Tasks {
				if !filepath.IsAbs(task.Target) || (task.Script != "" && !filepath.IsAbs(task.Script)) {
					t.Errorf("task %s: target %q and script %q are not absolute", task.Name, task.Target, task.Script)
				}
				task.Target, _ = filepath.Rel(dir, task.Target)
				if task.Script != "" {
					task.Script, _ = filepath.Rel(dir, task.Script)
					if task.script == nil {
						t.Errorf("task %s: the script was not kept", task.Name)
					}
				}
				task.script = nil
				task.Files.Dir = "" // the suite's directory, where inputs are read from
			}
			if !reflect.DeepEqual(s, tt.want) {
				t.Errorf("got\n%s\nwant\n%s", dump(s), dump(tt.want))
			}
		})
	}
}

// TestLoadProgramOfImage: a task's target may be a program of the image,
// a bare name with no such file beside the suite, as run's TARGET may
// (app.Load); a file of that name beside the suite is still the file.
func TestLoadProgramOfImage(t *testing.T) {
	path := suiteDir(t, "tasks:\n  - name: calc\n    target: xcalc\n    agent: idle\n  - name: local\n    target: app\n    agent: idle\n")
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Tasks[0].Target; got != "xcalc" {
		t.Errorf("target xcalc resolved to %q, want the program xcalc", got)
	}
	b, err := app.Load(s.Tasks[0].Target, app.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !b.InImage || b.Manifest.Command != "xcalc" {
		t.Errorf("bundle: in image %v, command %q", b.InImage, b.Manifest.Command)
	}
	if got, want := s.Tasks[1].Target, filepath.Join(filepath.Dir(path), "app"); got != want {
		t.Errorf("target app resolved to %q, want the directory %q", got, want)
	}
	// A name that is no program (a path) is still a file that must exist.
	bad := suiteDir(t, "tasks:\n  - name: a\n    target: bin/xcalc\n    agent: idle\n")
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), "bin/xcalc") {
		t.Errorf("a missing path: %v", err)
	}
}

func dump(s *Suite) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name %q\n", s.Name)
	for _, t := range s.Tasks {
		fmt.Fprintf(&b, "%+v\n", *t)
	}
	return b.String()
}

// TestLoadRejects: every kind of bad suite is ErrInvalid naming the
// suite's file and the line of the mistake (or, for a bad script, the
// script's own file and line).
func TestLoadRejects(t *testing.T) {
	task := "tasks:\n  - name: a\n    target: app\n    agent: idle\n"
	tests := []struct {
		name, suite string
		want        string // the file and line, the mistake
		detail      string // and this too
	}{
		{"empty", "", `suite.yaml:1: the file is empty (a suite is a mapping with tasks)`, ""},
		{"only a comment", "# nothing yet\n", `suite.yaml:1: the file is empty (a suite is a mapping with tasks)`, ""},
		{"a list", "- a\n", `suite.yaml:1: a suite is a mapping with tasks`, ""},
		{"not YAML", "tasks: [\n", `suite.yaml: yaml: line 1:`, ""},
		{"unknown suite field", "name: x\ntask:\n  - name: a\n", `suite.yaml:2: unknown field "task" (did you mean tasks?) (a suite has name, tasks)`, ""},
		{"suite field twice", "name: x\nname: y\ntasks:\n  - name: a\n", `suite.yaml:2: field "name" appears twice`, ""},
		{"suite name not text", "name: [x]\ntasks:\n  - name: a\n", `suite.yaml:1: field "name": must be text`, ""},
		{"no tasks", "name: x\n", `suite.yaml:1: tasks: a non-empty list is required`, ""},
		{"empty tasks", "tasks: []\n", `suite.yaml:1: tasks: a non-empty list is required`, ""},
		{"tasks not a list", "tasks: {a: b}\n", `suite.yaml:1: tasks: a non-empty list is required`, ""},
		{"task not a mapping", "tasks:\n  - a\n", `suite.yaml:2: task 1: want a mapping`, ""},
		{"unknown task field", task + "    episdes: 3\n", `suite.yaml:5: task 1: unknown field "episdes" (did you mean episodes?) (a task has name, target,`, ""},
		{"unknown task field, nothing close", task + "    colour: red\n", `suite.yaml:5: task 1: unknown field "colour" (a task has name, target,`, ""},
		{"task field twice", task + "    agent: demo\n", `suite.yaml:5: task 1: field "agent" appears twice`, ""},
		{"name not text", "tasks:\n  - name: [a]\n    target: app\n    agent: idle\n", `suite.yaml:2: task 1: field "name": must be text`, ""},
		{"null target", "tasks:\n  - name: a\n    target:\n    agent: idle\n", `suite.yaml:3: task 1: field "target": must be text`, ""},
		{"options not text", task + "    options: {a: [1]}\n", `suite.yaml:5: task 1: field "options": want a mapping of text`, ""},
		{"env not a mapping", task + "    env: [A=b]\n", `suite.yaml:5: task 1: field "env": want a mapping of text`, ""},
		{"bad timeout", task + "    timeout: soon\n", `suite.yaml:5: task 1: field "timeout": want a duration like 60s, got "soon"`, ""},
		{"unknown clock", task + "    clock: slow\n", `suite.yaml:5: task "a": clock "slow"`, ""},
		{"clock step without the virtual clock", task + "    clock_step: 50ms\n", `suite.yaml:5: task "a": a clock step applies to the virtual clock only`, ""},
		{"clock step not a duration", task + "    clock: virtual\n    clock_step: soon\n", `suite.yaml:6: task 1: field "clock_step": want a duration like 100ms, got "soon"`, ""},
		{"clock step too long", task + "    clock: virtual\n    clock_step: 2h\n", `suite.yaml:5: task "a": clock step 2h0m0s`, ""},
		{"zero timeout", task + "    timeout: 0s\n", `suite.yaml:5: task 1: field "timeout": want a duration like 60s, got "0s"`, ""},
		{"zero episodes", task + "    episodes: 0\n", `suite.yaml:5: task 1: field "episodes": want a positive number, got "0"`, ""},
		{"too many episodes", task + "    episodes: 100001\n", `suite.yaml:5: task 1: field "episodes": want a positive number, got "100001"`, ""},
		{"bad max_steps", task + "    max_steps: many\n", `suite.yaml:5: task 1: field "max_steps": want a positive number, got "many"`, ""},
		{"allow_net not a list", task + "    allow_net: example.com\n", `suite.yaml:5: task 1: field "allow_net": want a list of text`, ""},
		{"bad allow_net rule", task + "    allow_net: [\"*.com\"]\n", `suite.yaml:5: task 1: field "allow_net": invalid network policy: rule "*.com"`, ""},
		{"bad forward", task + "    forward: [\"localhost:80\"]\n", `suite.yaml:5: task 1: field "forward": invalid network policy: --forward "localhost:80": sandbox port 80 is below 1024`, ""},
		{"forward on the proxy's port", task + "    allow_net: [a.test]\n    forward: [\"localhost:3128\"]\n", `suite.yaml:2: task "a": invalid network policy: --forward localhost:3128: sandbox port 3128 is taken by the proxy`, ""},
		{"no name", "tasks:\n  - target: app\n    agent: idle\n", `suite.yaml:2: task 1: name is required`, ""},
		{"bad name", "tasks:\n  - name: ../up\n    target: app\n    agent: idle\n", `suite.yaml:2: task "../up": a name is letters, digits,`, ""},
		{"name used twice", task + "  - name: a\n    target: app\n    agent: demo\n", `suite.yaml:5: task "a": the name is used twice`, ""},
		{"no target", "tasks:\n  - name: a\n    agent: idle\n", `suite.yaml:2: task "a": target is required`, ""},
		{"script and agent", task + "    script: play.yaml\n", `suite.yaml:2: task "a": give exactly one of script or agent`, ""},
		{"neither script nor agent", "tasks:\n  - name: a\n    target: app\n", `suite.yaml:2: task "a": no agent: give the task a script or an agent, or run the suite with --agent NAME`, ""},
		{"options for a script", "tasks:\n  - name: a\n    target: app\n    script: play.yaml\n    options: {a: b}\n", `suite.yaml:2: task "a": options belong to an agent, not to a script`, ""},
		{"missing target", "tasks:\n  - name: a\n    target: ./nope\n    agent: idle\n", `suite.yaml:2: task "a": `, `nope: no such file or directory`},
		{"unknown agent", "tasks:\n  - name: a\n    target: app\n    agent: nobody\n", `suite.yaml:2: task "a": `, `nobody`},
		{"unknown agent, near one", "tasks:\n  - name: a\n    target: app\n    agent: dmeo\n", `suite.yaml:2: task "a": `, `unknown agent "dmeo" (did you mean demo?)`},
		{"bad agent option", task + "    options: {speed: 3}\n", `suite.yaml:2: task "a": `, `unknown option "speed"`},
		{"missing script", "tasks:\n  - name: a\n    target: app\n    script: missing.yaml\n", `suite.yaml:2: task "a": `, `missing.yaml`},
		{"bad script", "tasks:\n  - name: a\n    target: app\n    script: app/agentbox.json\n", `agentbox.json:1: unknown field "command"`, ""},
		{"bad screen", task + "    screen: 10x10\n", `suite.yaml:5: task 1: field "screen": `, `10x10`},
		{"bad a11y", task + "    a11y: maybe\n", `suite.yaml:5: task 1: field "a11y": want true or false`, ""},
		{"a bad env name", task + "    env: {BAD-NAME: x}\n", `suite.yaml:2: task "a": env: `, `"BAD-NAME" is not a valid variable name`},
		{"collect outside the home", task + "    collect:\n      - ~/ok.txt\n      - /etc/passwd\n", `suite.yaml:7: task 1: field "collect"[1]: "/etc/passwd" is not below the home`, ""},
		{"an input that is missing", task + "    inputs: [{from: nope.txt, to: ~/in.txt}]\n", `suite.yaml:2: task "a": `, `inputs[0].from: lstat `},
		{"an input to outside the home", task + "    inputs:\n      - from: play.yaml\n        to: ~/../x\n", `suite.yaml:6: task 1: field "inputs"[0].to: "~/../x" leaves the home (..)`, ""},
		{"a screen the script contradicts", "tasks:\n  - name: a\n    target: app\n    script: play.yaml\n    screen: 1024x768\n", `suite.yaml:2: task "a": screen 1024x768x24 contradicts the screen of `, `play.yaml (800x600x24)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := suiteDir(t, tt.suite)
			s, err := Load(path)
			if err == nil {
				t.Fatalf("accepted: %+v", s)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.detail) {
				t.Errorf("error %q\nwant it to contain %q and %q", err, tt.want, tt.detail)
			}
			if !strings.Contains(err.Error(), path) && !strings.Contains(err.Error(), filepath.Dir(path)) {
				t.Errorf("error %q does not name the suite or its directory", err)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		_, err := Load(filepath.Join(t.TempDir(), "none.yaml"))
		if !errors.Is(err, ErrInvalid) || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "none.yaml") {
			t.Errorf("err = %v, want ErrInvalid and ErrNotExist naming none.yaml", err)
		}
	})
}

// FuzzLoad: whatever a suite file holds, Load returns a suite that keeps
// the promises Run relies on, or ErrInvalid naming the file; it never
// panics. Paths in the inputs stay inside the test's directory: inputs
// with a slash or a backslash (which could spell one) are skipped, so the
// fuzzer cannot make Load read /dev or /proc.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		"tasks:\n  - name: a\n    target: app\n    agent: idle\n",
		"name: n\ntasks:\n  - name: a\n    target: app\n    script: play.yaml\n    episodes: 3\n  - name: b\n    target: app\n    agent: demo\n    options: {key: Left}\n    timeout: 5s\n    max_steps: 9\n    screen: 320x200\n    env: {A: b}\n",
		"tasks:\n  - name: a\n    target: app\n    agent: idle\n  - name: a\n",
		"tasks: [{name: a, target: app, agent: idle, episodes: 0}]\n",
		"tasks:\n  - &t {name: a, target: app, agent: idle}\n  - *t\n",
	} {
		f.Add([]byte(s))
	}
	path := suiteDir(f, "")
	f.Fuzz(func(t *testing.T, data []byte) {
		if bytes.ContainsAny(data, `/\`) {
			t.Skip("paths stay inside the test's directory")
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := Load(path)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			if !strings.Contains(err.Error(), "suite.yaml") {
				t.Fatalf("error does not name the suite: %v", err)
			}
			return
		}
		if len(s.Tasks) == 0 {
			t.Fatal("accepted a suite without tasks")
		}
		seen := map[string]bool{}
		for _, task := range s.Tasks {
			switch {
			case !nameRe.MatchString(task.Name) || seen[task.Name]:
				t.Fatalf("accepted task name %q (seen before: %v)", task.Name, seen[task.Name])
			case (task.Script == "") == (task.Agent == ""):
				t.Fatalf("task %s: script %q, agent %q", task.Name, task.Script, task.Agent)
			case task.Episodes < 1 || task.Episodes > 100000 || task.MaxSteps < 0 || task.Timeout < 0:
				t.Fatalf("task %s: episodes %d, max_steps %d, timeout %v", task.Name, task.Episodes, task.MaxSteps, task.Timeout)
			case !filepath.IsAbs(task.Target) && !app.IsProgramName(task.Target):
				// absolute, or a program of the image (a bare name no file has)
				t.Fatalf("task %s: target %q is neither absolute nor a program of the image", task.Name, task.Target)
			}
			seen[task.Name] = true
			a, err := task.newAgent()
			if err != nil {
				t.Fatalf("task %s: Load accepted it but its agent cannot be made: %v", task.Name, err)
			}
			if c, ok := a.(agent.Closer); ok {
				c.Close()
			}
		}
	})
}

// TestLoadWithScreen: a script without a screen of its own is checked
// against the screen it will run on, the command line's default for tasks
// that name none: a click that fits 800x600 but not 640x480 is refused
// under the 640x480 default and taken under --screen 800x600.
func TestLoadWithScreen(t *testing.T) {
	path := suiteDir(t, "tasks:\n  - name: a\n    target: app\n    script: click.yaml\n")
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "click.yaml"), []byte("steps:\n  - {action: click, x: 700, y: 500}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "outside the 640x480 screen") {
		t.Errorf("under the default screen: %v, want the click refused", err)
	}
	s, err := LoadWith(path, LoadOptions{Screen: observe.Screen{Width: 800, Height: 600, Depth: 24}})
	if err != nil {
		t.Fatalf("under --screen 800x600: %v", err)
	}
	if s.Tasks[0].Screen != (observe.Screen{}) {
		t.Errorf("task screen %v, want none of its own (the run's default applies)", s.Tasks[0].Screen)
	}
}

// TestLoadNetwork: a task's allow_net and forward are read, and its
// network joins the command line's.
func TestLoadNetwork(t *testing.T) {
	s, err := Load(suiteDir(t, "tasks:\n  - name: a\n    target: app\n    agent: idle\n    allow_net: [api.example.com:443]\n    forward: [\"localhost:3000:8080\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	tk := s.Tasks[0]
	if len(tk.AllowNet) != 1 || tk.AllowNet[0].Host != "api.example.com" || len(tk.Forward) != 1 || tk.Forward[0].SandboxPort != 8080 {
		t.Fatalf("task: %+v %+v", tk.AllowNet, tk.Forward)
	}
	base, _ := netpolicy.ParseRule("cdn.example.com")
	p, err := tk.network(&netpolicy.Policy{Allow: []netpolicy.Rule{base}, MaxConnRate: 5}, &app.Manifest{AllowNet: []string{"assets.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := netpolicy.Texts(p.Allow); strings.Join(got, " ") != "cdn.example.com api.example.com:443 assets.example.com" || p.MaxConnRate != 5 || len(p.Forward) != 1 {
		t.Errorf("joined policy: %v %+v", got, p)
	}
	if p, _ := (&Task{}).network(nil, &app.Manifest{}); p != nil {
		t.Errorf("no network anywhere: %+v", p)
	}
}

// TestLoadAgentOverride: eval --agent gives every task its agent: a task
// with none becomes runnable, a task's own agent and options are
// replaced, and a script's task keeps its text and screen but runs with
// the agent given.
func TestLoadAgentOverride(t *testing.T) {
	path := suiteDir(t, `tasks:
  - name: bare
    target: app
    task: Do it.
  - name: own
    target: app
    agent: demo
    options: {hold_ms: "800"}
  - name: scripted
    target: app
    script: play.yaml
`)
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), `task "bare": no agent`) || !strings.Contains(err.Error(), "--agent NAME") {
		t.Fatalf("without --agent: %v, want the task named and --agent suggested", err)
	}
	s, err := LoadWith(path, LoadOptions{Agent: "idle", AgentOptions: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range s.Tasks {
		if task.Agent != "idle" || len(task.Options) != 0 {
			t.Errorf("task %s: agent %q options %v, want idle without options", task.Name, task.Agent, task.Options)
		}
		a, err := task.newAgent()
		if err != nil {
			t.Fatal(err)
		}
		if task.scripted() {
			t.Errorf("task %s still runs its script", task.Name)
		}
		if c, ok := a.(agent.Closer); ok {
			c.Close()
		}
	}
	sc := s.Tasks[2]
	if sc.Task != "Move the character right." || sc.Screen != (observe.Screen{Width: 800, Height: 600, Depth: 24}) {
		t.Errorf("the script's task and screen were not kept: %q %v", sc.Task, sc.Screen)
	}
	cfg, err := episodeConfig(sc, &app.Bundle{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AgentInfo.Name != "idle" || cfg.Actor == "script" {
		t.Errorf("the scripted task's episode records agent %q actor %q", cfg.AgentInfo.Name, cfg.Actor)
	}
	if _, err := LoadWith(path, LoadOptions{Agent: "no-such-agent"}); err == nil || !strings.Contains(err.Error(), "no-such-agent") {
		t.Errorf("an unknown --agent: %v", err)
	}
}
