// Package osworld converts task files in OSWorld's format (JSON: id,
// instruction, config[], related_apps, evaluator) into an agentbox eval
// suite whose tasks use the fields of docs/tasks.md: inputs, collect,
// before_collect and grade. Conversion is pure (Convert: files in, a
// suite and the files it needs out); Write puts the result on disk.
//
// A task that cannot be expressed is not converted: it is listed with a
// reason (one of the Reason constants) and a detail naming the cause.
package osworld

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
)

// ErrInvalid is wrapped by every error about the task files themselves
// (malformed JSON): bad input, not a task that cannot be converted.
var ErrInvalid = errors.New("invalid OSWorld task file")

// Image is the agentbox image every converted task runs in.
const Image = "agentbox/office:bookworm"

// Reasons a task is not converted (the categories counted in the report).
const (
	ReasonUnknownFunction = "unknown function"
	ReasonUnknownGetter   = "unknown getter"
	ReasonNetwork         = "needs the network"
	ReasonNotCached       = "not in the cache"
	ReasonSeveralApps     = "several apps"
	ReasonGNOME           = "needs GNOME"
	ReasonNoApp           = "app not in the office image"
	ReasonConfigStep      = "unknown config step"
	ReasonExecute         = "execute not expressible"
	ReasonPostconfig      = "postconfig not key presses"
	ReasonOption          = "no built-in check"
	ReasonPath            = "path outside the home"
	ReasonMalformed       = "malformed task"
	ReasonNotTask         = "not a task"
	ReasonDuplicate       = "duplicate id"
)

// Source is one task file: its name (as shown in messages and the
// report) and its content.
type Source struct {
	File string
	Data []byte
}

// Suite is the eval suite written as YAML (docs/tasks.md's task fields).
type Suite struct {
	Name  string `yaml:"name"`
	Tasks []Task `yaml:"tasks"`
}

// Task is one suite task. It names no agent: eval --agent gives one.
type Task struct {
	Name          string   `yaml:"name"`
	Target        string   `yaml:"target"`
	Image         string   `yaml:"image"`
	Task          string   `yaml:"task"`
	Inputs        []Input  `yaml:"inputs,omitempty"`
	Collect       []string `yaml:"collect,omitempty"`
	BeforeCollect []Step   `yaml:"before_collect,omitempty"`
	Grade         []Check  `yaml:"grade,omitempty"`

	// Source is the OSWorld file the task came from.
	Source string `yaml:"-"`
}

// Input is a host file placed into the sandbox before the app starts.
type Input struct {
	From string `yaml:"from"`
	To   string `yaml:"to"`
}

// Step is a before_collect step: an action of the script vocabulary.
type Step struct {
	Action string `yaml:"action"`
	Keys   string `yaml:"keys,omitempty"`
	Key    string `yaml:"key,omitempty"`
	Text   string `yaml:"text,omitempty"`
	Until  string `yaml:"until,omitempty"`
	Title  string `yaml:"title,omitempty"`
	MS     int    `yaml:"ms,omitempty"`
}

// Check is one grade check (docs/tasks.md, "The grader").
type Check struct {
	Exists    string   `yaml:"exists,omitempty"`
	Text      string   `yaml:"text,omitempty"`
	Table     string   `yaml:"table,omitempty"`
	Name      string   `yaml:"name,omitempty"`
	Equals    any      `yaml:"equals,omitempty"`
	Contains  string   `yaml:"contains,omitempty"`
	Regex     string   `yaml:"regex,omitempty"`
	Normalize []string `yaml:"normalize,omitempty"`
	Expected  string   `yaml:"expected,omitempty"`
}

// Manifest is the app of a converted task (agentbox.json).
type Manifest struct {
	Command     string   `json:"command"`
	Args        []string `json:"args,omitempty"`
	WindowTitle string   `json:"window_title,omitempty"`
}

// Copy is a file of the cache the suite needs: an input or an expected
// file, copied to To (relative to the suite's directory).
type Copy struct {
	From string // a name in the cache
	To   string // slash-separated, relative to the suite's directory
}

// Skipped is a task that was not converted.
type Skipped struct {
	File   string `yaml:"file"`
	ID     string `yaml:"id,omitempty"`
	Reason string `yaml:"reason"`
	Detail string `yaml:"detail"`
}

// Result is what Convert makes.
type Result struct {
	Suite Suite
	// Apps holds each converted task's manifest, by the path of its
	// agentbox.json relative to the suite's directory.
	Apps    map[string]Manifest
	Copies  []Copy
	Skipped []Skipped
	// Files is the number of task files read.
	Files int
}

// Counts is the number of tasks not converted, per reason.
func (r *Result) Counts() map[string]int {
	c := map[string]int{}
	for _, s := range r.Skipped {
		c[s.Reason]++
	}
	return c
}

// Reasons lists the reasons of Counts, most frequent first (then by name).
func (r *Result) Reasons() []string {
	c := r.Counts()
	var out []string
	for k := range c {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if c[out[i]] != c[out[j]] {
			return c[out[i]] > c[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}

// Options are what Convert needs besides the task files.
type Options struct {
	// Name is the suite's name.
	Name string
	// Dir is the directory, relative to the suite's, that receives every
	// task's app, inputs and expected files (Write: SUITE's stem + ".d").
	Dir string
	// Cache holds the files downloads and cloud files name (by file name
	// or by the base name of their URL); nil: an empty cache.
	Cache fs.FS
}

var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Convert converts task files. A file that is not JSON, or whose fields
// have the wrong types at the top, is an error wrapping ErrInvalid naming
// the file and the position; a task that cannot be converted is in
// Result.Skipped.
func Convert(srcs []Source, o Options) (*Result, error) {
	res := &Result{Suite: Suite{Name: o.Name}, Apps: map[string]Manifest{}, Files: len(srcs)}
	seen := map[string]string{}
	for _, src := range srcs {
		var probe any
		if err := json.Unmarshal(src.Data, &probe); err != nil {
			return nil, jsonError(src, err)
		}
		obj, ok := probe.(map[string]any)
		if !ok || obj["id"] == nil || obj["evaluator"] == nil {
			res.Skipped = append(res.Skipped, Skipped{File: src.File, Reason: ReasonNotTask, Detail: "not a JSON object with id and evaluator"})
			continue
		}
		var raw rawTask
		dec := json.NewDecoder(bytes.NewReader(src.Data))
		if err := dec.Decode(&raw); err != nil {
			return nil, jsonError(src, err)
		}
		skip := func(reason, detail string) {
			res.Skipped = append(res.Skipped, Skipped{File: src.File, ID: raw.ID, Reason: reason, Detail: detail})
		}
		name := raw.ID
		if !nameRe.MatchString(name) {
			skip(ReasonMalformed, fmt.Sprintf("id %q is not a task name (letters, digits, '.', '_', '-'; at most 64)", raw.ID))
			continue
		}
		if first, dup := seen[name]; dup {
			skip(ReasonDuplicate, "id also in "+first)
			continue
		}
		seen[name] = src.File
		c := &converter{o: o, raw: &raw, dir: path.Join(o.Dir, name)}
		t, err := c.convert()
		var se *skipError
		if errors.As(err, &se) {
			skip(se.reason, se.detail)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src.File, err)
		}
		t.Name, t.Source = name, src.File
		res.Suite.Tasks = append(res.Suite.Tasks, *t)
		res.Apps[path.Join(c.dir, "app", "agentbox.json")] = c.app
		res.Copies = append(res.Copies, c.copies...)
	}
	return res, nil
}

// jsonError names the file and the line and column of a JSON error.
func jsonError(src Source, err error) error {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 {
		return fmt.Errorf("%w: %s: %w", ErrInvalid, src.File, err)
	}
	// Offset counts the bytes read, the offending one included: the
	// position is that byte's, or just past the end for a file cut short.
	if off > 0 && off < int64(len(src.Data)) {
		off--
	}
	off = min(off, int64(len(src.Data)))
	before := src.Data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - bytes.LastIndexByte(before, '\n')
	return fmt.Errorf("%w: %s:%d:%d: %w", ErrInvalid, src.File, line, col, err)
}

// skipError is why a task is not converted.
type skipError struct{ reason, detail string }

func (e *skipError) Error() string { return e.reason + ": " + e.detail }

func skipf(reason, format string, args ...any) error {
	return &skipError{reason: reason, detail: fmt.Sprintf(format, args...)}
}

// rawTask is an OSWorld task file.
type rawTask struct {
	ID          string       `json:"id"`
	Instruction string       `json:"instruction"`
	Config      []rawStep    `json:"config"`
	RelatedApps []string     `json:"related_apps"`
	Evaluator   rawEvaluator `json:"evaluator"`
}

type rawStep struct {
	Type       string          `json:"type"`
	Parameters json.RawMessage `json:"parameters"`
}

type rawEvaluator struct {
	Func       json.RawMessage `json:"func"`
	Result     json.RawMessage `json:"result"`
	Expected   json.RawMessage `json:"expected"`
	Options    json.RawMessage `json:"options"`
	Conj       string          `json:"conj"`
	Postconfig []rawStep       `json:"postconfig"`
}

// list reads a JSON value that is one item or a list of them (OSWorld
// gives several evaluators as parallel lists).
func list(raw json.RawMessage) []json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] == '[' {
		var l []json.RawMessage
		if json.Unmarshal(raw, &l) == nil {
			return l
		}
	}
	return []json.RawMessage{raw}
}

// homePath maps a path of OSWorld's VM (the user's home is /home/user)
// into the sandbox's home: the path below it, slash-separated, or an
// error naming the path.
func homePath(p string) (string, error) {
	orig := p
	switch {
	case strings.HasPrefix(p, "/home/user/"):
		p = strings.TrimPrefix(p, "/home/user/")
	case strings.HasPrefix(p, "~/"):
		p = strings.TrimPrefix(p, "~/")
	default:
		return "", skipf(ReasonPath, "%q is not under /home/user", orig)
	}
	p = path.Clean(p)
	if p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return "", skipf(ReasonPath, "%q is not a file under /home/user", orig)
	}
	return p, nil
}
