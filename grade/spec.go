// Package grade is the private grader of docs/tasks.md: a list of checks
// over an episode's collected files (exists, text, json, table, image,
// command), parsed strictly from a task's `grade:` (YAML, or JSON for
// serve's create request) and run on the host after collection. A Spec
// implements session.Grader.
//
// Grading never fails and never panics on what an episode left behind: a
// file that is not what its check says is malformed, a zip bomb or an
// oversized image or table is refused by its bounds before it is expanded,
// and a grader command that crashes, hangs or prints something else is an
// infrastructure outcome naming the cause.
package grade

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/collectfs"
	"github.com/codegirl-games/agentbox/internal/suggest"
	"github.com/codegirl-games/agentbox/internal/yamlwalk"
)

// ErrInvalid is wrapped by every error about a grade spec.
var ErrInvalid = errors.New("invalid grade")

// Check kinds: the field that names a check's file (or program).
const (
	KindExists  = "exists"
	KindText    = "text"
	KindJSON    = "json"
	KindTable   = "table"
	KindImage   = "image"
	KindCommand = "command"
	// KindFileWritten and KindProcess check what the trusted observer
	// recorded (the trace's activity): a file written below the home, a
	// process run (or ended with a code).
	KindFileWritten = "file_written"
	KindProcess     = "process"
)

var kinds = []string{KindExists, KindText, KindJSON, KindTable, KindImage, KindCommand, KindFileWritten, KindProcess}

// fieldsOf are the fields each kind of check takes besides its own.
var fieldsOf = map[string][]string{
	KindExists:      {},
	KindText:        {"equals", "contains", "regex", "normalize"},
	KindJSON:        {"path", "equals"},
	KindTable:       {"sheet", "cell", "range", "equals", "expected", "tolerance"},
	KindImage:       {"expected", "tolerance", "threshold"},
	KindCommand:     {"timeout"},
	KindFileWritten: {},
	KindProcess:     {"exit"},
}

var common = []string{"name", "weight"}

// Defaults (docs/tasks.md).
const (
	DefaultTableTolerance = 1e-9
	DefaultImageTolerance = 0.01
	DefaultThreshold      = 16
	DefaultCommandTimeout = 60 * time.Second
)

// Spec is a parsed grade: its checks in order.
type Spec struct {
	// File names the file the spec was read from (the suite, the script,
	// the --grade file; "request" for serve's), for messages.
	File   string
	Checks []*Check
}

// Check is one check of a spec.
type Check struct {
	Name   string
	Kind   string // a Kind… constant
	File   string // below the collected files, slash-separated (not for command)
	Weight float64
	Line   int // in File; 0 when unknown (JSON)

	// equals, as a JSON value (string, float64, bool, nil, []any, map[string]any).
	Equals    any
	HasEquals bool
	Contains  string
	Regex     *regexp.Regexp
	// Normalize for text: whitespace (runs of it are one space, the ends
	// trimmed), case.
	Whitespace, Case bool

	JSONPath []pathElem // json: path

	Sheet, Cell, Range string // table (Sheet from `sheet` or a "Sheet1." prefix)
	// Expected is a host file (absolute): a whole sheet (table) or a PNG
	// (image).
	Expected  string
	Tolerance float64
	Threshold int // image: per-channel difference that counts

	Command []string // command: the program (absolute when it named a path) and its arguments
	Dir     string   // command: the working directory (the spec file's)
	Timeout time.Duration

	// file_written: Pattern is a glob below the home, "~/" trimmed (File
	// holds it as given). process: Argv matches a command line (its argv
	// joined by spaces) exactly, as a glob or /regex/; with Exit, the
	// process ended with that code.
	Pattern   string
	Argv      string
	argvMatch func(string) bool
	Exit      *int
}

// NeedsObserver reports whether the spec checks what the trusted observer
// records: its sandbox needs the observer (--observe).
func (s *Spec) NeedsObserver() bool {
	for _, c := range s.Checks {
		if c.Kind == KindFileWritten || c.Kind == KindProcess {
			return true
		}
	}
	return false
}

// Describe renders a check for messages: `check 2 (table Documents/sales.ods)`.
func (c *Check) Describe(i int) string {
	what := c.Kind + " " + c.File
	if c.Kind == KindCommand {
		what = c.Kind + " " + filepath.Base(c.Command[0])
	}
	if c.Kind == KindProcess {
		what = c.Kind + " " + c.Argv
	}
	if c.Name != "" {
		return fmt.Sprintf("check %d %q (%s)", i+1, c.Name, what)
	}
	return fmt.Sprintf("check %d (%s)", i+1, what)
}

// Options say how a spec's host paths are read.
type Options struct {
	// Dir anchors relative host paths (expected, a command's program) and
	// is a command's working directory: the directory of the file that
	// names the spec.
	Dir string
	// NoHost refuses what reaches the host: command checks and expected
	// files (a spec from a remote client, whose host paths would be the
	// server's).
	NoHost bool
}

// field is one field of a check, with how to complain about it.
type field struct {
	name string
	val  any // as JSON decodes it
	line int
	errf func(format string, args ...any) error
}

// Parse reads the value v of the field k (`grade:`) of a YAML file: a
// non-empty list of checks. w is the caller's walker (its file and context
// name errors); o.Dir is normally the file's directory.
func Parse(w yamlwalk.Walker, k, v *yaml.Node, o Options) (*Spec, error) {
	if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
		return nil, w.Field(k, v, "want a non-empty list of checks such as {exists: Documents/out.txt}")
	}
	s := &Spec{File: w.File}
	for i, n := range v.Content {
		cw := w.In(fmt.Sprintf("grade check %d", i+1))
		if n.Kind != yaml.MappingNode {
			return nil, cw.Errorf(n.Line, "want a mapping such as {exists: Documents/out.txt}")
		}
		kind, err := kindOf(keysOf(n), func(format string, args ...any) error { return cw.Errorf(n.Line, format, args...) })
		if err != nil {
			return nil, err
		}
		known := append(append([]string{kind}, fieldsOf[kind]...), common...)
		var fields []field
		err = cw.Mapping(n, "a "+kind+" check", known, func(k, v *yaml.Node) error {
			var val any
			if err := v.Decode(&val); err != nil {
				return cw.Field(k, v, "%v", err)
			}
			val, err := jsonValue(val)
			if err != nil {
				return cw.Field(k, v, "%v", err)
			}
			fields = append(fields, field{name: k.Value, val: val, line: k.Line, errf: func(format string, args ...any) error {
				return cw.Field(k, v, format, args...)
			}})
			return nil
		})
		if err != nil {
			return nil, err
		}
		c, err := build(kind, fields, o, func(format string, args ...any) error { return cw.Errorf(n.Line, format, args...) })
		if err != nil {
			return nil, err
		}
		c.Line = n.Line
		s.Checks = append(s.Checks, c)
	}
	return s, nil
}

// Load reads a grade file (`agentbox run --grade FILE`): YAML (or JSON),
// either a list of checks or a mapping with the field grade. Host paths
// resolve relative to the file.
func Load(file string) (*Spec, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(data) > 4<<20 {
		return nil, fmt.Errorf("%w: %s is %d bytes; a grade file is at most 4 MiB", ErrInvalid, file, len(data))
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	o := Options{Dir: filepath.Dir(abs)}
	w := yamlwalk.Walker{File: file, Class: ErrInvalid}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err == nil && len(doc.Content) == 1 && doc.Content[0].Kind == yaml.SequenceNode {
		list := doc.Content[0]
		return Parse(w, &yaml.Node{Kind: yaml.ScalarNode, Value: "grade", Line: list.Line}, list, o)
	}
	root, err := w.Root(data, "a grade file is a list of checks, or a mapping with grade")
	if err != nil {
		return nil, err
	}
	var s *Spec
	err = w.Mapping(root, "a grade file", []string{"grade"}, func(k, v *yaml.Node) (err error) {
		s, err = Parse(w, k, v, o)
		return err
	})
	if err == nil && s == nil {
		err = w.Errorf(root.Line, "grade: a non-empty list of checks is required")
	}
	return s, err
}

// ParseJSON reads a grade given as JSON (serve's create request: the
// same fields as YAML): a non-empty list of checks. what names it in
// errors ("grade").
func ParseJSON(what string, data []byte, o Options) (*Spec, error) {
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("%w: %s: want a list of checks: %v", ErrInvalid, what, err)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%w: %s: want a non-empty list of checks", ErrInvalid, what)
	}
	s := &Spec{File: what}
	for i, m := range list {
		at := fmt.Sprintf("%s: check %d", what, i+1)
		errf := func(format string, args ...any) error {
			return fmt.Errorf("%w: %s: %s", ErrInvalid, at, fmt.Sprintf(format, args...))
		}
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range m {
				if !yield(k) {
					return
				}
			}
		})
		kind, err := kindOf(keys, errf)
		if err != nil {
			return nil, err
		}
		known := append(append([]string{kind}, fieldsOf[kind]...), common...)
		var fields []field
		for _, k := range keys {
			if !slices.Contains(known, k) {
				return nil, errf("unknown field %q%s (a %s check has %s)", k, suggest.Hint(k, known), kind, strings.Join(known, ", "))
			}
			var val any
			if err := json.Unmarshal(m[k], &val); err != nil {
				return nil, errf("field %q: %v", k, err)
			}
			fields = append(fields, field{name: k, val: val, errf: func(format string, args ...any) error {
				return errf("field %q: %s", k, fmt.Sprintf(format, args...))
			}})
		}
		c, err := build(kind, fields, o, errf)
		if err != nil {
			return nil, err
		}
		s.Checks = append(s.Checks, c)
	}
	return s, nil
}

func keysOf(n *yaml.Node) []string {
	var keys []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		keys = append(keys, n.Content[i].Value)
	}
	return keys
}

// kindOf is the one kind among keys.
func kindOf(keys []string, errf func(string, ...any) error) (string, error) {
	var found []string
	for _, k := range keys {
		if slices.Contains(kinds, k) && !slices.Contains(found, k) {
			found = append(found, k)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		hint := ""
		for _, k := range keys {
			if h := suggest.Hint(k, kinds); h != "" {
				hint = fmt.Sprintf(" (%q: did you mean %s?)", k, suggest.Best(k, kinds))
				break
			}
		}
		return "", errf("a check names one of %s%s", strings.Join(kinds, ", "), hint)
	}
	return "", errf("a check names one of %s, not %s", strings.Join(kinds, ", "), strings.Join(found, " and "))
}

// jsonValue turns what YAML decoded into what JSON would have.
func jsonValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	err = json.Unmarshal(b, &out)
	return out, err
}

// build makes a check of kind from its fields.
func build(kind string, fields []field, o Options, errf func(string, ...any) error) (*Check, error) {
	c := &Check{Kind: kind, Weight: 1, Threshold: DefaultThreshold, Timeout: DefaultCommandTimeout, Dir: o.Dir}
	switch kind {
	case KindTable:
		c.Tolerance = DefaultTableTolerance
	case KindImage:
		c.Tolerance = DefaultImageTolerance
	}
	has := map[string]bool{}
	for _, f := range fields {
		has[f.name] = true
		str := func() (string, error) {
			s, ok := f.val.(string)
			if !ok || s == "" {
				return "", f.errf("must be non-empty text")
			}
			return s, nil
		}
		num := func() (float64, error) {
			x, ok := f.val.(float64)
			if !ok {
				return 0, f.errf("must be a number")
			}
			return x, nil
		}
		var err error
		switch f.name {
		case "name":
			c.Name, err = str()
		case "weight":
			if c.Weight, err = num(); err == nil && !(c.Weight > 0 && c.Weight <= 1e6) {
				err = f.errf("must be a positive number, got %v", c.Weight)
			}
		case KindExists, KindText, KindJSON, KindTable, KindImage:
			var p string
			if p, err = str(); err == nil {
				c.File, err = filePath(p)
				if err != nil {
					err = f.errf("%v", err)
				}
			}
		case KindCommand:
			c.Command, err = commandOf(f, o)
		case KindFileWritten:
			if c.File, err = str(); err == nil {
				rel, ok := strings.CutPrefix(c.File, "~/")
				if !ok {
					err = f.errf("want a path below the home starting with ~/ (such as ~/out/*.txt), got %q", c.File)
				} else if err = collectfs.CheckPattern(rel); err != nil {
					err = f.errf("%v", err)
				}
				c.Pattern = rel
			}
		case KindProcess:
			if c.Argv, err = str(); err != nil {
				err = f.errf("want the command line, a glob (such as \"sh -c *\") or /regex/")
			} else if c.argvMatch, err = action.TitleMatcher(c.Argv); err != nil {
				err = f.errf("want the command line, a glob or /regex/: %v", err)
			}
		case "exit":
			x, ok := f.val.(float64)
			if !ok || x != float64(int(x)) || x < 0 || x > 255 {
				err = f.errf("an exit code is a whole number between 0 and 255, got %v", f.val)
			} else {
				code := int(x)
				c.Exit = &code
			}
		case "equals":
			c.Equals, c.HasEquals = f.val, true
			if kind == KindText {
				if _, ok := f.val.(string); !ok {
					err = f.errf("must be text (quote it)")
				}
			}
		case "contains":
			c.Contains, err = str()
		case "regex":
			var s string
			if s, err = str(); err == nil {
				if c.Regex, err = regexp.Compile(s); err != nil {
					err = f.errf("%v", err)
				}
			}
		case "normalize":
			list, ok := f.val.([]any)
			if s, isStr := f.val.(string); isStr {
				list, ok = []any{s}, true
			}
			if !ok {
				err = f.errf("want a list of whitespace, case")
			}
			for _, x := range list {
				s, _ := x.(string)
				switch s {
				case "whitespace":
					c.Whitespace = true
				case "case":
					c.Case = true
				default:
					if err == nil {
						err = f.errf("unknown normalization %v%s (want whitespace, case)", x, suggest.Hint(s, []string{"whitespace", "case"}))
					}
				}
			}
		case "path":
			var s string
			if s, err = str(); err == nil {
				if c.JSONPath, err = parsePath(s); err != nil {
					err = f.errf("%v", err)
				}
			}
		case "sheet":
			var s string
			if s, err = str(); err == nil {
				if c.Sheet != "" && c.Sheet != s {
					err = f.errf("%q, and the cell or range names sheet %q", s, c.Sheet)
				}
				c.Sheet = s
			}
		case "cell":
			var s string
			if s, err = str(); err == nil {
				err = c.setCell(s, false, f.errf)
			}
		case "range":
			var s string
			if s, err = str(); err == nil {
				err = c.setCell(s, true, f.errf)
			}
		case "expected":
			var s string
			if s, err = str(); err == nil {
				if o.NoHost {
					err = f.errf("a host file cannot be named here")
				} else if c.Expected, err = hostFile(s, o.Dir); err != nil {
					err = f.errf("%v", err)
				}
			}
		case "tolerance":
			if c.Tolerance, err = num(); err == nil {
				if c.Tolerance < 0 || (kind == KindImage && c.Tolerance > 1) {
					err = f.errf("out of range: %v", c.Tolerance)
				}
			}
		case "threshold":
			var x float64
			if x, err = num(); err == nil {
				if x != float64(int(x)) || x < 0 || x > 255 {
					err = f.errf("want a whole number 0 to 255, got %v", x)
				}
				c.Threshold = int(x)
			}
		case "timeout":
			var s string
			if s, err = str(); err == nil {
				if c.Timeout, err = time.ParseDuration(s); err != nil || c.Timeout <= 0 {
					err = f.errf("want a duration like 60s, got %q", s)
				}
			}
		}
		if err != nil {
			return nil, err
		}
	}
	switch kind {
	case KindText:
		if n := countTrue(has["equals"], has["contains"], has["regex"]); n != 1 {
			return nil, errf("a text check takes one of equals, contains, regex")
		}
	case KindJSON:
		if !has["equals"] {
			return nil, errf("a json check needs equals")
		}
	case KindTable:
		switch countTrue(c.Cell != "", c.Range != "", has["expected"]) {
		case 1:
		default:
			return nil, errf("a table check takes one of cell, range, expected")
		}
		if c.Expected != "" && has["equals"] {
			return nil, errf("a table check compares with equals or with expected, not both")
		}
		if c.Expected == "" && !has["equals"] {
			return nil, errf("a table check with %s needs equals", map[bool]string{true: "cell", false: "range"}[c.Cell != ""])
		}
		if c.Range != "" {
			if err := checkRangeEquals(c); err != nil {
				return nil, errf("%v", err)
			}
		}
		if c.Cell != "" {
			switch c.Equals.(type) {
			case []any, map[string]any:
				return nil, errf("a cell equals one value: a number, text, true, false or null")
			}
		}
	case KindImage:
		if c.Expected == "" {
			if o.NoHost {
				return nil, errf("an image check needs an expected PNG on the host, which cannot be named here")
			}
			return nil, errf("an image check needs expected (a PNG on the host)")
		}
	case KindCommand:
		if o.NoHost {
			return nil, errf("a command check runs a program on the host and cannot be named here")
		}
	}
	return c, nil
}

func countTrue(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// filePath checks a path below the collected files: relative (a leading
// ~/ is the home, which the files mirror), inside.
func filePath(p string) (string, error) {
	p = strings.TrimPrefix(p, "~/")
	clean := path.Clean(p)
	if !filepath.IsLocal(clean) || strings.Contains(p, `\`) {
		return "", fmt.Errorf("%q: want a path below the collected files, such as Documents/out.ods", p)
	}
	return clean, nil
}

// hostFile resolves a host file relative to dir and checks it is a
// regular file.
func hostFile(p, dir string) (string, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", p)
	}
	return p, nil
}

// commandOf reads a command's list; a program named by a path resolves
// relative to the spec's directory, a bare name is looked up on PATH when
// it runs.
func commandOf(f field, o Options) ([]string, error) {
	if o.NoHost {
		return nil, f.errf("a command check runs a program on the host and cannot be named here")
	}
	var argv []string
	switch v := f.val.(type) {
	case []any:
		for _, a := range v {
			s, ok := a.(string)
			if !ok {
				return nil, f.errf("want a list of text: [PROGRAM, ARGS...]")
			}
			argv = append(argv, s)
		}
	case string:
		argv = []string{v}
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, f.errf("want a list of text: [PROGRAM, ARGS...]")
	}
	if strings.ContainsRune(argv[0], '/') {
		p, err := hostFile(argv[0], o.Dir)
		if err != nil {
			return nil, f.errf("%v", err)
		}
		argv[0] = p
	}
	return argv, nil
}
