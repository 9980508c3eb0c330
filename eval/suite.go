// Package eval runs suites of tasks, each several times, several sandboxes
// at once, and summarises them: pass rates, steps, durations, and errors
// by kind, as JSON and JUnit XML. Infrastructure errors are counted apart
// from task failures, so a flaky daemon never reads as a bad agent.
package eval

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/agent/script"
	"github.com/codegirl-games/agentbox/app"
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
	Target string // absolute
	Task   string
	// Script (absolute path) or Agent with Options.
	Script   string
	Agent    string
	Options  map[string]string
	Timeout  time.Duration
	Episodes int
	MaxSteps int
	Screen   string
	Image    string
	Env      map[string]string

	script *script.Script
}

var taskFields = []string{"name", "target", "task", "script", "agent", "options", "timeout", "episodes", "max_steps", "screen", "image", "env"}

var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Load reads and validates a suite: every task's target, script or agent
// is checked before anything runs.
func Load(path string) (*Suite, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	dir := filepath.Dir(abs)
	errf := func(line int, format string, args ...any) error {
		return fmt.Errorf("%w: %s:%d: %s", ErrInvalid, path, line, fmt.Sprintf(format, args...))
	}
	var doc yaml.Node
	switch err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); {
	case errors.Is(err, io.EOF):
		return nil, errf(1, "the file is empty (a suite is a mapping with tasks)")
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, path, err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errf(1, "a suite is a mapping with tasks")
	}
	s := &Suite{File: path, Name: strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))}
	root := doc.Content[0]
	var tasks *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "name":
			s.Name = v.Value
		case "tasks":
			tasks = v
		default:
			return nil, errf(k.Line, "unknown field %q (a suite has name, tasks)", k.Value)
		}
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
	seen := map[string]bool{}
	for i, n := range tasks.Content {
		if n.Kind != yaml.MappingNode {
			return nil, errf(n.Line, "task %d: want a mapping", i+1)
		}
		t := &Task{Line: n.Line, Episodes: 1}
		for j := 0; j+1 < len(n.Content); j += 2 {
			k, v := n.Content[j], n.Content[j+1]
			fail := func(format string, args ...any) error {
				return errf(v.Line, "task %d: field %q: %s", i+1, k.Value, fmt.Sprintf(format, args...))
			}
			str := func() (string, error) {
				if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
					return "", fail("must be text")
				}
				return v.Value, nil
			}
			var err error
			switch k.Value {
			case "name":
				t.Name, err = str()
			case "target":
				var p string
				p, err = str()
				t.Target = rel(p)
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
				t.Screen, err = str()
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
			case "timeout":
				var s string
				if s, err = str(); err == nil {
					if t.Timeout, err = time.ParseDuration(s); err != nil || t.Timeout <= 0 {
						err = fail("want a duration like 60s, got %q", s)
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
			default:
				err = errf(k.Line, "task %d: unknown field %q (known: %s)", i+1, k.Value, strings.Join(taskFields, ", "))
			}
			if err != nil {
				return nil, err
			}
		}
		where := fmt.Sprintf("task %d", i+1)
		if t.Name != "" {
			where = fmt.Sprintf("task %q", t.Name)
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
		case (t.Script == "") == (t.Agent == ""):
			return nil, errf(n.Line, "%s: give exactly one of script or agent", where)
		case t.Script != "" && t.Options != nil:
			return nil, errf(n.Line, "%s: options belong to an agent, not to a script", where)
		}
		seen[t.Name] = true
		if err := t.check(); err != nil {
			return nil, fmt.Errorf("%w: %s:%d: %s: %w", ErrInvalid, path, n.Line, where, err)
		}
		s.Tasks = append(s.Tasks, t)
	}
	return s, nil
}

// check validates the target, the script or the agent, and the screen.
func (t *Task) check() error {
	b, err := app.Load(t.Target, app.DefaultLimits)
	if err != nil {
		return err
	}
	b.Close()
	w, h := 640, 480
	if t.Screen != "" {
		if w, h, err = ParseScreen(t.Screen); err != nil {
			return err
		}
	}
	if t.Script != "" {
		sc, err := script.Load(t.Script, w, h)
		if err != nil {
			return err
		}
		t.script = sc
		if t.Task == "" {
			t.Task = sc.Task
		}
		if t.Screen == "" && sc.Width != 0 {
			t.Screen = fmt.Sprintf("%dx%d", sc.Width, sc.Height)
		}
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

// newAgent makes a fresh agent for one episode.
func (t *Task) newAgent() (agent.Agent, error) {
	if t.script != nil {
		return script.New(t.script), nil
	}
	return agent.New(t.Agent, t.Options)
}

// ParseScreen reads WIDTHxHEIGHT.
func ParseScreen(s string) (int, int, error) {
	parts := strings.Split(strings.ToLower(s), "x")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, 0, fmt.Errorf("screen %q: want WIDTHxHEIGHT", s)
	}
	w, err1 := strconv.Atoi(parts[0])
	h, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || w < 64 || h < 64 || w > 7680 || h > 4320 {
		return 0, 0, fmt.Errorf("screen %q: want WIDTHxHEIGHT between 64x64 and 7680x4320", s)
	}
	return w, h, nil
}
