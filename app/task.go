package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/codegirl-games/agentbox/internal/stagepath"
)

// Home is the app user's home in every sandbox ($HOME, on its tmpfs):
// inputs are placed and collected files taken below it (docs/tasks.md).
const Home = "/tmp/home"

// Input is one host file or directory placed into the sandbox's home
// before the app starts.
type Input struct {
	// From is a host path, relative to the file that names it (serve:
	// upload:ID or upload:ID/path).
	From string `json:"from"`
	// To is the path in the sandbox: ~/… (below the home).
	To string `json:"to"`
}

// CollectLimits bound what collection copies out. Zero fields take the
// defaults (DefaultCollectFiles, DefaultCollectBytes).
type CollectLimits struct {
	Files int   `json:"files,omitempty"`
	Bytes int64 `json:"bytes,omitempty"`
}

// Defaults of collect_limits.
const (
	DefaultCollectFiles       = 100
	DefaultCollectBytes int64 = 64 << 20
	// MaxCollectFiles and MaxCollectBytes bound what collect_limits may
	// ask for.
	MaxCollectFiles       = 10_000
	MaxCollectBytes int64 = 4 << 30
)

// WithDefaults fills zero fields.
func (l CollectLimits) WithDefaults() CollectLimits {
	if l.Files <= 0 {
		l.Files = DefaultCollectFiles
	}
	if l.Bytes <= 0 {
		l.Bytes = DefaultCollectBytes
	}
	return l
}

// Collect says what is copied out of the sandbox when the episode ends.
type Collect struct {
	// Patterns are paths or globs below the home ("~/Documents/*.ods";
	// *, ?, […] and ** for any depth).
	Patterns []string
	Limits   CollectLimits
	// Before are the steps run after the episode, before collecting
	// (before_collect), recorded as steps of the actor collect.
	Before []CollectStep
}

// Empty reports whether nothing is to be collected.
func (c Collect) Empty() bool { return len(c.Patterns) == 0 }

// TaskFiles are a task's file parts, as every place a task is written
// names them (a suite's task, a script's header, agentbox.json, serve's
// create request): inputs, collect, collect_limits and before_collect.
type TaskFiles struct {
	Inputs  []Input
	Collect Collect
	// Dir is the directory Inputs' From are relative to.
	Dir string
}

// FieldError is a bad value of one of TaskFields: Index is the list item
// it is about, or -1. Its text names the field ("field \"inputs\"[0].to:
// …"); callers add the file and line.
type FieldError struct {
	Field string
	Index int
	Msg   string // starts with ": " or ".sub: "
}

func (e *FieldError) Error() string {
	if e.Index >= 0 {
		return fmt.Sprintf("field %q[%d]%s", e.Field, e.Index, e.Msg)
	}
	return fmt.Sprintf("field %q%s", e.Field, e.Msg)
}

// TaskFields are the fields TaskFiles.Set reads.
var TaskFields = []string{"inputs", "collect", "collect_limits", "before_collect"}

// IsTaskField reports whether name is one of TaskFields.
func IsTaskField(name string) bool { return containsString(TaskFields, name) }

// Set reads one of TaskFields from its JSON value. Its errors name the
// field ("field \"inputs\"[0].to: …"); callers add the file and line.
func (t *TaskFiles) Set(field string, raw json.RawMessage) error {
	switch field {
	case "inputs":
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return &FieldError{Field: "inputs", Index: -1, Msg: ": want a list of {from, to}"}
		}
		t.Inputs = nil
		for i, r := range list {
			in, err := parseInput(r)
			if err != nil {
				return &FieldError{Field: "inputs", Index: i, Msg: err.Error()}
			}
			for j, prev := range t.Inputs {
				if prev.To == in.To {
					return &FieldError{Field: "inputs", Index: i, Msg: fmt.Sprintf(".to: %s is the to of inputs[%d] as well", in.To, j)}
				}
			}
			t.Inputs = append(t.Inputs, in)
		}
	case "collect":
		var list []string
		if err := json.Unmarshal(raw, &list); err != nil {
			var one string
			if json.Unmarshal(raw, &one) != nil {
				return &FieldError{Field: "collect", Index: -1, Msg: ": want a list of paths or globs under ~/"}
			}
			list = []string{one}
		}
		for i, p := range list {
			if _, err := CollectPattern(p); err != nil {
				return &FieldError{Field: "collect", Index: i, Msg: ": " + err.Error()}
			}
		}
		t.Collect.Patterns = list
	case "collect_limits":
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return &FieldError{Field: "collect_limits", Index: -1, Msg: ": want {files: N, bytes: SIZE}"}
		}
		var lim CollectLimits
		for k, v := range m {
			switch k {
			case "files":
				var n int
				if err := json.Unmarshal(v, &n); err != nil || n <= 0 || n > MaxCollectFiles {
					return &FieldError{Field: "collect_limits", Index: -1, Msg: fmt.Sprintf(".files: want a count from 1 to %d, got %s", MaxCollectFiles, v)}
				}
				lim.Files = n
			case "bytes":
				n, err := parseSize(v)
				if err == nil && (n <= 0 || n > MaxCollectBytes) {
					err = fmt.Errorf("want a size from 1 byte to %d (4GiB)", MaxCollectBytes)
				}
				if err != nil {
					return &FieldError{Field: "collect_limits", Index: -1, Msg: fmt.Sprintf(".bytes: %v", err)}
				}
				lim.Bytes = n
			default:
				return &FieldError{Field: "collect_limits", Index: -1, Msg: fmt.Sprintf(": unknown field %q (known: files, bytes)", k)}
			}
		}
		t.Collect.Limits = lim
	case "before_collect":
		var list []map[string]json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return &FieldError{Field: "before_collect", Index: -1, Msg: ": want a list of steps such as {action: key, keys: ctrl+s}, {wait_for: window, title: …} or {expect: running}"}
		}
		t.Collect.Before = nil
		for i, m := range list {
			st, err := parseCollectStep(m)
			if err != nil {
				return &FieldError{Field: "before_collect", Index: i, Msg: ": " + err.Error()}
			}
			t.Collect.Before = append(t.Collect.Before, st)
		}
	default:
		return fmt.Errorf("unknown field %q", field)
	}
	return nil
}

// Check is what Set cannot see alone: before_collect and collect_limits
// without collect say nothing.
func (t *TaskFiles) Check() error {
	if len(t.Collect.Patterns) == 0 && len(t.Collect.Before) > 0 {
		return errors.New("field \"before_collect\" without \"collect\": nothing would be collected")
	}
	if len(t.Collect.Patterns) == 0 && t.Collect.Limits != (CollectLimits{}) {
		return errors.New("field \"collect_limits\" without \"collect\": nothing would be collected")
	}
	return nil
}

func parseInput(raw json.RawMessage) (Input, error) {
	var in Input
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, fmt.Errorf(": want {from: HOST-PATH, to: ~/PATH} (%v)", err)
	}
	if strings.TrimSpace(in.From) == "" {
		return in, errors.New(".from: the host file or directory is required")
	}
	if strings.ContainsRune(in.From, 0) {
		return in, errors.New(".from: contains a NUL byte")
	}
	if in.To == "" {
		return in, errors.New(".to: the path in the sandbox (~/…) is required")
	}
	rel, err := HomePath(in.To)
	if err != nil {
		return in, fmt.Errorf(".to: %v", err)
	}
	in.To = "~/" + rel
	return in, nil
}

// HomePath turns a sandbox path below the home (~/x, or /tmp/home/x) into
// its slash-separated path relative to the home, refusing anything else:
// "..", an absolute path outside the home, the home itself.
func HomePath(p string) (string, error) {
	var rel string
	switch {
	case strings.HasPrefix(p, "~/"):
		rel = p[2:]
	case strings.HasPrefix(p, Home+"/"):
		rel = p[len(Home)+1:]
	case p == "~" || p == Home || p == Home+"/":
		return "", fmt.Errorf("%q is the home itself; name a path below it (~/…)", p)
	default:
		return "", fmt.Errorf("%q is not below the home: write ~/… ($HOME is %s)", p, Home)
	}
	rel = strings.TrimRight(rel, "/")
	for _, part := range strings.Split(rel, "/") {
		if part == ".." {
			return "", fmt.Errorf("%q leaves the home (..)", p)
		}
	}
	if rel == "" || path.Clean(rel) == "." {
		return "", fmt.Errorf("%q is the home itself; name a path below it (~/…)", p)
	}
	if err := stagepath.Check(rel); err != nil {
		return "", fmt.Errorf("%q: %v", p, err)
	}
	return path.Clean(rel), nil
}

// CollectPattern checks a collect pattern and returns it relative to the
// home ("~/Documents/*.ods" → "Documents/*.ods").
func CollectPattern(p string) (string, error) {
	rel, err := HomePath(p)
	if err != nil {
		return "", err
	}
	for _, seg := range strings.Split(rel, "/") {
		if seg == "**" {
			continue
		}
		if strings.Contains(seg, "**") {
			return "", fmt.Errorf("%q: ** stands alone between slashes (~/a/**/b)", p)
		}
		if _, err := path.Match(seg, ""); err != nil {
			return "", fmt.Errorf("%q: bad glob %q: %v", p, seg, err)
		}
	}
	return rel, nil
}

// parseSize reads a byte count: a number, or text such as "64MiB", "10MB",
// "512k".
func parseSize(raw json.RawMessage) (int64, error) {
	var n float64
	if json.Unmarshal(raw, &n) == nil {
		if n != float64(int64(n)) {
			return 0, fmt.Errorf("want a whole number of bytes, got %s", raw)
		}
		return int64(n), nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return 0, fmt.Errorf("want a size such as 64MiB, got %s", raw)
	}
	return ParseSize(s)
}

// ParseSize reads "64MiB", "10MB", "512KiB", "1G", "4096".
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') {
		i--
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("want a size such as 64MiB, got %q", s)
	}
	mult := map[string]int64{"": 1, "b": 1, "k": 1 << 10, "kb": 1000, "kib": 1 << 10,
		"m": 1 << 20, "mb": 1000 * 1000, "mib": 1 << 20, "g": 1 << 30, "gb": 1000 * 1000 * 1000, "gib": 1 << 30}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("unknown unit %q in %q (B, KiB, MiB, GiB, KB, MB, GB)", unit, s)
	}
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mult, nil
}

// Item is the list item the error is about, or -1.
func (e *FieldError) Item() int { return e.Index }

// resolved is t with every input's From absolute (relative to t.Dir).
func (t TaskFiles) resolved() []Input {
	out := make([]Input, len(t.Inputs))
	for i, in := range t.Inputs {
		if !filepath.IsAbs(in.From) && t.Dir != "" {
			in.From = filepath.Join(t.Dir, in.From)
		}
		out[i] = in
	}
	return out
}

// Merge is t with u added, as a script's or a suite's task adds to the
// app manifest's: u's inputs after t's (each From resolved against its
// own file's directory), u's collect patterns after t's; u's
// collect_limits and before_collect replace t's when u has them.
func (t TaskFiles) Merge(u TaskFiles) TaskFiles {
	out := TaskFiles{Inputs: append(t.resolved(), u.resolved()...), Collect: t.Collect}
	out.Collect.Patterns = append(slices.Clip(t.Collect.Patterns), u.Collect.Patterns...)
	if u.Collect.Limits != (CollectLimits{}) {
		out.Collect.Limits = u.Collect.Limits
	}
	if len(u.Collect.Before) > 0 {
		out.Collect.Before = u.Collect.Before
	}
	return out
}
