// Package eval runs suites of tasks, each several times, several sandboxes
// at once, and summarises them: pass rates, steps, durations, and errors
// by kind, as JSON and JUnit XML. Infrastructure errors are counted apart
// from task failures, so a flaky daemon never reads as a bad agent.
package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/agent/script"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/grade"
	"github.com/codegirl-games/agentbox/internal/yamlwalk"
	"github.com/codegirl-games/agentbox/netpolicy"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/session"
)

// ErrInvalid is wrapped by every error about a suite file.
var ErrInvalid = errors.New("invalid suite")

// Suite is a parsed suite file.
type Suite struct {
	File  string
	Name  string
	Tasks []*Task
}

// Task is one task of a suite.
type Task struct {
	Name   string
	Line   int
	Target string // absolute, or the bare name of a program of the image
	Task   string
	// Script (absolute path) or Agent with Options.
	Script   string
	Agent    string
	Options  map[string]string
	Timeout  time.Duration
	Episodes int
	MaxSteps int
	Screen   observe.Screen // zero: the script's, else observe.DefaultScreen
	Image    string
	Env      map[string]string
	// A11y starts each episode's accessibility bus (as --a11y); a script
	// that names elements turns it on by itself.
	A11y bool
	// Observe runs each episode's trusted observer (as --observe); a
	// script that checks file_written or process turns it on by itself.
	Observe bool
	// AllowNet and Forward add to the command line's --allow-net and
	// --forward (and the app manifest's allow_net) for this task.
	AllowNet []netpolicy.Rule
	Forward  []netpolicy.Forward
	// Grade judges each episode's collected files (docs/tasks.md); nil:
	// the episode's own outcome decides. A script's header may carry it
	// instead.
	Grade *grade.Spec
	// Clock, when set (clock, clock_step), is this task's app clock,
	// over eval's --clock.
	Clock *session.Clock
	// Policy, when set (policy: FILE, relative to the suite), gates this
	// task's episodes instead of eval's --policy (docs/policy.md).
	Policy *policy.Policy
	// Files are the task's file parts (inputs, collect, collect_limits,
	// before_collect; docs/tasks.md), inputs relative to the suite. They
	// add to the app manifest's and the script's (TaskFiles).
	Files app.TaskFiles

	script *script.Script
	// manifestPolicy is the app manifest's policy (Run reads it).
	manifestPolicy *policy.Policy
	inputs         *app.Inputs // loaded for the run (Run)
}

var taskFields = append([]string{"name", "target", "task", "script", "agent", "options", "timeout", "episodes", "max_steps", "screen", "image", "env", "a11y", "observe", "allow_net", "forward", "grade", "clock", "clock_step", "policy"}, app.TaskFields...)

var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// LoadOptions are what the command line adds to a suite.
type LoadOptions struct {
	// Screen is the screen of the tasks that name none (neither the task
	// nor its script); zero: observe.DefaultScreen. Scripts are checked
	// against the screen they will run on.
	Screen observe.Screen
	// Agent, when set, is every task's agent, with AgentOptions (eval
	// --agent, --agent-opt): it replaces the suite's agent and options,
	// and runs a task with a script in the script's place (the script
	// still gives the task's text and screen). A task with neither script
	// nor agent needs it.
	Agent        string
	AgentOptions map[string]string
}

// Load reads and validates a suite: every task's target, script or agent
// is checked before anything runs.
func Load(path string) (*Suite, error) { return LoadWith(path, LoadOptions{}) }

// LoadWith is Load with what the command line adds.
func LoadWith(path string, o LoadOptions) (*Suite, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	dir := filepath.Dir(abs)
	w := yamlwalk.Walker{File: path, Class: ErrInvalid}
	errf := w.Errorf
	root, err := w.Root(data, "a suite is a mapping with tasks")
	if err != nil {
		return nil, err
	}
	s := &Suite{File: path, Name: strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))}
	var tasks *yaml.Node
	err = w.Mapping(root, "a suite", []string{"name", "tasks"}, func(k, v *yaml.Node) (err error) {
		switch k.Value {
		case "name":
			s.Name, err = w.Text(k, v)
		case "tasks":
			tasks = v
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if tasks == nil || tasks.Kind != yaml.SequenceNode || len(tasks.Content) == 0 {
		return nil, errf(root.Line, "tasks: a non-empty list is required")
	}
	rel := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	// target resolves a task's target as run resolves its TARGET
	// (app.Load): a file beside the suite, or else a bare name such as
	// xcalc, a program of the image.
	target := func(p string) string {
		if _, err := os.Stat(rel(p)); errors.Is(err, fs.ErrNotExist) && app.IsProgramName(p) {
			return p
		}
		return rel(p)
	}
	seen := map[string]bool{}
	for i, n := range tasks.Content {
		if n.Kind != yaml.MappingNode {
			return nil, errf(n.Line, "task %d: want a mapping", i+1)
		}
		t := &Task{Line: n.Line, Episodes: 1, Files: app.TaskFiles{Dir: dir}}
		tw := w.In(fmt.Sprintf("task %d", i+1))
		var clockMode string
		var clockStep time.Duration
		clockLine := 0
		err := tw.Mapping(n, "a task", taskFields, func(k, v *yaml.Node) (err error) {
			if app.IsTaskField(k.Value) {
				return tw.Value(k, v, t.Files.Set)
			}
			fail := func(format string, args ...any) error { return tw.Field(k, v, format, args...) }
			str := func() (string, error) { return tw.Text(k, v) }
			switch k.Value {
			case "name":
				t.Name, err = str()
			case "target":
				var p string
				p, err = str()
				t.Target = target(p)
			case "task":
				t.Task, err = str()
			case "script":
				var p string
				p, err = str()
				t.Script = rel(p)
			case "agent":
				t.Agent, err = str()
			case "image":
				t.Image, err = str()
			case "screen":
				var s string
				if s, err = str(); err == nil {
					if t.Screen, err = observe.ParseScreen(s); err != nil {
						err = fail("%v", err)
					}
				}
			case "a11y":
				if v.Kind != yaml.ScalarNode || v.Decode(&t.A11y) != nil {
					err = fail("want true or false")
				}
			case "observe":
				if v.Kind != yaml.ScalarNode || v.Decode(&t.Observe) != nil {
					err = fail("want true or false")
				}
			case "options", "env":
				m := map[string]string{}
				if derr := v.Decode(&m); derr != nil {
					err = fail("want a mapping of text: %v", derr)
				}
				if k.Value == "options" {
					t.Options = m
				} else {
					t.Env = m
				}
			case "allow_net", "forward":
				var list []string
				if derr := v.Decode(&list); derr != nil {
					err = fail("want a list of text: %v", derr)
				}
				for _, s := range list {
					if err != nil {
						break
					}
					if k.Value == "allow_net" {
						var r netpolicy.Rule
						if r, err = netpolicy.ParseRule(s); err == nil {
							t.AllowNet = append(t.AllowNet, r)
						}
					} else {
						var f netpolicy.Forward
						if f, err = netpolicy.ParseForward(s); err == nil {
							t.Forward = append(t.Forward, f)
						}
					}
					if err != nil {
						err = fail("%v", err)
					}
				}
			case "grade":
				t.Grade, err = grade.Parse(tw, k, v, grade.Options{Dir: dir})
			case "policy":
				var p string
				if p, err = str(); err == nil {
					if t.Policy, err = policy.Load(rel(p)); err != nil {
						err = fail("%v", err)
					}
				}
			case "timeout":
				var s string
				if s, err = str(); err == nil {
					if t.Timeout, err = time.ParseDuration(s); err != nil || t.Timeout <= 0 {
						err = fail("want a duration like 60s, got %q", s)
					}
				}
			case "clock", "clock_step":
				if clockLine == 0 {
					clockLine = k.Line
				}
				var s string
				if s, err = str(); err == nil {
					if k.Value == "clock" {
						clockMode = s
					} else if clockStep, err = time.ParseDuration(s); err != nil {
						err = fail("want a duration like 100ms, got %q", s)
					}
				}
			case "episodes", "max_steps":
				var s string
				if s, err = str(); err == nil {
					n, cerr := strconv.Atoi(s)
					if cerr != nil || n <= 0 || n > 100000 {
						err = fail("want a positive number, got %q", s)
					} else if k.Value == "episodes" {
						t.Episodes = n
					} else {
						t.MaxSteps = n
					}
				}
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		where := fmt.Sprintf("task %d", i+1)
		if t.Name != "" {
			where = fmt.Sprintf("task %q", t.Name)
		}
		if clockLine != 0 {
			c, cerr := session.ClockOf(clockMode, clockStep)
			if cerr != nil {
				return nil, errf(clockLine, "%s: %v", where, cerr)
			}
			t.Clock = &c
		}
		if o.Agent != "" {
			t.Agent, t.Options = o.Agent, o.AgentOptions
		}
		switch {
		case t.Name == "":
			return nil, errf(n.Line, "%s: name is required", where)
		case !nameRe.MatchString(t.Name):
			return nil, errf(n.Line, "%s: a name is letters, digits, '.', '_' and '-' (it names directories)", where)
		case seen[t.Name]:
			return nil, errf(n.Line, "%s: the name is used twice", where)
		case t.Target == "":
			return nil, errf(n.Line, "%s: target is required (an executable, an app directory or a manifest)", where)
		case t.Script == "" && t.Agent == "":
			return nil, errf(n.Line, "%s: no agent: give the task a script or an agent, or run the suite with --agent NAME", where)
		case t.Script != "" && t.Agent != "" && o.Agent == "":
			return nil, errf(n.Line, "%s: give exactly one of script or agent", where)
		case t.Script != "" && t.Options != nil && o.Agent == "":
			return nil, errf(n.Line, "%s: options belong to an agent, not to a script", where)
		}
		if err := t.Files.Check(); err != nil {
			return nil, errf(n.Line, "%s: %v", where, err)
		}
		seen[t.Name] = true
		if err := t.check(o.Screen.OrDefault()); err != nil {
			return nil, fmt.Errorf("%w: %s:%d: %s: %w", ErrInvalid, path, n.Line, where, err)
		}
		s.Tasks = append(s.Tasks, t)
	}
	return s, nil
}

// check validates the target, the script or the agent, the env and the
// screen; screen is the one of tasks that name none.
func (t *Task) check(screen observe.Screen) error {
	b, err := app.Load(t.Target, app.DefaultLimits)
	if err != nil {
		return err
	}
	b.Close()
	for _, k := range slices.Sorted(maps.Keys(t.Env)) {
		if err := app.CheckEnv(k, t.Env[k]); err != nil {
			return fmt.Errorf("env: %w", err)
		}
	}
	if _, err := t.network(nil, &b.Manifest); err != nil {
		return err
	}
	if t.Script != "" {
		on := screen
		if t.Screen != (observe.Screen{}) {
			on = t.Screen
		}
		sc, err := script.Load(t.Script, on)
		if err != nil {
			return err
		}
		t.script = sc
		if t.Task == "" {
			t.Task = sc.Task
		}
		switch {
		case sc.Grade == nil:
		case t.Grade == nil:
			t.Grade = sc.Grade
		default:
			return fmt.Errorf("grade is given both here and in %s; drop one", t.Script)
		}
		switch {
		case sc.Screen == (observe.Screen{}):
		case t.Screen == (observe.Screen{}):
			t.Screen = sc.Screen
		case t.Screen != sc.Screen:
			// The script's coordinates were written for its screen.
			return fmt.Errorf("screen %v contradicts the screen of %s (%v); drop one", t.Screen, t.Script, sc.Screen)
		}
	}
	if err := t.checkInputs(b); err != nil {
		return err
	}
	if t.Script != "" && t.Agent == "" {
		return nil
	}
	a, err := agent.New(t.Agent, t.Options)
	if err != nil {
		return err
	}
	if c, ok := a.(agent.Closer); ok {
		c.Close()
	}
	return nil
}

// network is the task's network: base (the command line's) with the
// task's rules and forwards and its app manifest's allow_net; nil when
// none has a rule or a forward.
func (t *Task) network(base *netpolicy.Policy, m *app.Manifest) (*netpolicy.Policy, error) {
	rules, err := m.Rules()
	if err != nil {
		return nil, err
	}
	if len(rules) == 0 && len(t.AllowNet) == 0 && len(t.Forward) == 0 {
		return base, nil
	}
	var p netpolicy.Policy
	if base != nil {
		p = *base
	}
	p.Allow = append(append(append([]netpolicy.Rule(nil), p.Allow...), t.AllowNet...), rules...)
	p.Forward = append(append([]netpolicy.Forward(nil), p.Forward...), t.Forward...)
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// newAgent makes a fresh agent for one episode.
func (t *Task) newAgent() (agent.Agent, error) {
	if t.scripted() {
		return script.New(t.script), nil
	}
	return agent.New(t.Agent, t.Options)
}

// scripted reports whether the task's script is its agent (no --agent
// replaced it).
func (t *Task) scripted() bool { return t.Agent == "" && t.script != nil }

// Preflight lets the agent of every task that has one check, before any
// sandbox exists, that what it depends on answers and takes the
// credentials (agent.Preflighter): once per distinct agent and options.
// The error names the task; it wraps agent.ErrUnreachable when nothing
// answered.
func (s *Suite) Preflight(ctx context.Context) error {
	seen := map[string]bool{}
	for _, t := range s.Tasks {
		if t.Agent == "" {
			continue
		}
		key, _ := json.Marshal([]any{t.Agent, t.Options})
		if seen[string(key)] {
			continue
		}
		seen[string(key)] = true
		a, err := agent.New(t.Agent, t.Options)
		if err != nil {
			return fmt.Errorf("task %s: %w", t.Name, err)
		}
		if p, ok := a.(agent.Preflighter); ok {
			err = p.Preflight(ctx)
		}
		if c, ok := a.(agent.Closer); ok {
			c.Close()
		}
		if err != nil {
			return fmt.Errorf("task %s: agent %s: %w", t.Name, t.Agent, err)
		}
	}
	return nil
}

// TaskFiles are the task's file parts in all: the app manifest's, then
// the script's, then the suite's own.
func (t *Task) TaskFiles(b *app.Bundle) app.TaskFiles {
	tf := b.Manifest.Task
	if t.script != nil {
		tf = tf.Merge(t.script.Files)
	}
	return tf.Merge(t.Files)
}

// checkInputs checks the task's inputs as an episode stages them, with
// the app's files.
func (t *Task) checkInputs(b *app.Bundle) error {
	in, err := app.LoadInputs(t.TaskFiles(b), b, app.DefaultLimits)
	if err != nil {
		return err
	}
	return in.Close()
}
