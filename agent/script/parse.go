// Package script is the script agent: a play-test written as YAML (or
// JSON) — a task, an optional screen, and steps that are actions or checks:
//
//	task: Move the character right.
//	steps:
//	  - screenshot: start
//	  - {action: key_down, key: Right}
//	  - {action: wait, ms: 1000}
//	  - {expect: moved, color: "#00ff00", min_dx: 100, since: start}
//	  - {action: key_up, key: Right}
//
// A script is validated completely before any sandbox starts: an unknown
// action, check or field is an error naming the file, line, step and field.
package script

import (
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/grade"
	"github.com/codegirl-games/agentbox/internal/collectfs"
	"github.com/codegirl-games/agentbox/internal/yamlwalk"
	"github.com/codegirl-games/agentbox/observe"
)

// ErrInvalid is wrapped by every error about a script.
var ErrInvalid = errors.New("invalid script")

// Script is a parsed play-test.
type Script struct {
	File   string
	Task   string
	Screen observe.Screen // zero: not set
	Steps  []Step
	// Grade is the header's grade: the private grader of the episode's
	// collected files (docs/tasks.md); nil when it has none. Its host
	// paths resolve relative to the script.
	Grade *grade.Spec
	// Files are the task's file parts the header names (inputs, collect,
	// collect_limits, before_collect; docs/tasks.md), inputs relative to
	// the script's directory.
	Files app.TaskFiles
}

// Step is one line of the script: an action, a check, or remembering the
// screen under a name.
type Step struct {
	N    int // 1-based
	Line int
	// Exactly one of these is set.
	Action   *action.Action
	Check    *Check
	Remember string
	// Optional says the action may fail (optional: true): the script goes
	// on. A failed action of any other step ends the run (action_failed).
	Optional bool
}

// Describe renders a step for messages: "step 4 (expect moved, line 12)".
func (s Step) Describe() string {
	var what string
	switch {
	case s.Action != nil:
		what = string(s.Action.Kind)
	case s.Check != nil:
		verb := "expect"
		if s.Check.Wait {
			verb = "wait_for"
		}
		what = verb + " " + s.Check.Kind
	default:
		what = "screenshot " + s.Remember
	}
	return fmt.Sprintf("step %d (%s, line %d)", s.N, what, s.Line)
}

// Check kinds.
const (
	CheckPixel     = "pixel"
	CheckMoved     = "moved"
	CheckChanged   = "changed"
	CheckUnchanged = "unchanged"
	CheckImage     = "image"
	CheckWindow    = "window"
	CheckLog       = "log"
	CheckRunning   = "running"
	CheckExited    = "exited"
	CheckElement   = "element"
	CheckNetwork   = "network"
	// The trusted observer's (the sandbox runs it: --observe, or a script
	// that uses them).
	CheckFileWritten = "file_written"
	CheckProcess     = "process"
)

// checkSpec is one kind of check: the fields it takes besides expect or
// wait_for, and how it reads those that are its own. The fields several
// kinds share (timeout_ms, tolerance, color, region, since) are read
// first, for every kind that takes them.
type checkSpec struct {
	fields []string
	read   func(*checkParser) error // nil: nothing of its own
}

// checkSpecs are the checks by kind.
var checkSpecs = map[string]checkSpec{
	CheckPixel:       {[]string{"x", "y", "color", "tolerance"}, (*checkParser).pixel},
	CheckMoved:       {[]string{"color", "tolerance", "min_dx", "min_dy", "since"}, (*checkParser).moved},
	CheckChanged:     {[]string{"region", "min_pixels", "since", "tolerance"}, (*checkParser).changed},
	CheckUnchanged:   {[]string{"region", "max_pixels", "since", "tolerance"}, (*checkParser).unchanged},
	CheckImage:       {[]string{"file", "region", "max_diff", "tolerance"}, (*checkParser).image},
	CheckWindow:      {[]string{"title"}, (*checkParser).window},
	CheckLog:         {[]string{"stream", "contains", "regex"}, (*checkParser).log},
	CheckRunning:     {nil, nil},
	CheckExited:      {[]string{"code"}, (*checkParser).exited},
	CheckElement:     {[]string{"target", "absent", "name", "text", "state"}, (*checkParser).element},
	CheckNetwork:     {[]string{"denied", "allowed"}, (*checkParser).network},
	CheckFileWritten: {[]string{"path"}, (*checkParser).fileWritten},
	CheckProcess:     {[]string{"argv", "exit"}, (*checkParser).process},
}

// Check is one expectation about the screen, the windows, the output or the
// app's state.
type Check struct {
	Kind      string
	Wait      bool // wait_for: poll until it holds
	TimeoutMS int  // wait_for's deadline

	X, Y      int
	Color     [3]uint8
	ColorText string
	Tolerance int

	MinDX, MinDY *int
	Since        string // a remembered screenshot; empty: the previous one

	Region    *action.Rect
	MinPixels int // changed: at least this many pixels differ (default 1)
	MaxPixels int // unchanged: at most this many differ (default 0)

	File    string
	Image   *image.RGBA
	MaxDiff float64 // image: fraction of pixels allowed to differ

	Title string
	match func(string) bool

	Stream   string // stdout, stderr, or "" for both
	Contains string
	Regex    *regexp.Regexp

	Code *int

	// element: the target, and what must hold of it (exists when nothing
	// else is said).
	Target *action.Selector
	Absent bool
	// Name and Text must match: exactly, or as a glob or /regex/ (the
	// rules of window titles).
	Name      *string
	Text      *string
	nameMatch func(string) bool
	textMatch func(string) bool
	// States must be set; a state written "!checked" must not be.
	States []string
	// network: a connection to a destination matching NetDest (a glob
	// over "host:port" or the host alone) that was denied (NetDenied) or
	// allowed.
	NetDest   string
	NetDenied bool
	// file_written: a file below the home matching Path ("~/" and a
	// pattern of the collect's rules: *, ?, […], **) was written.
	Path string
	// process: a process whose command line (its arguments joined by
	// spaces) matches Argv — exactly, a glob or /regex/ — ran; with Exit,
	// it exited with that code (and the observer saw its status).
	Argv      string
	argvMatch func(string) bool
	Exit      *int
}

// NeedsObserver reports whether the script checks what the trusted
// observer records: its sandbox needs the observer.
func (s *Script) NeedsObserver() bool {
	for _, st := range s.Steps {
		if st.Check != nil && (st.Check.Kind == CheckFileWritten || st.Check.Kind == CheckProcess) {
			return true
		}
	}
	return false
}

// NeedsA11y reports whether the script names elements (a target or an
// element check): its sandbox needs the accessibility bus.
func (s *Script) NeedsA11y() bool {
	for _, st := range s.Steps {
		if st.Action != nil && st.Action.Target != nil || st.Check != nil && st.Check.Kind == CheckElement {
			return true
		}
	}
	return false
}

// DefaultWaitMS is wait_for's deadline when timeout_ms is not given.
const DefaultWaitMS = 10_000

// Load reads and validates a script file. screen bounds coordinates when
// the script does not set one.
func Load(path string, screen observe.Screen) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(data) > 4<<20 {
		return nil, fmt.Errorf("%w: %s is %d bytes; a script is at most 4 MiB", ErrInvalid, path, len(data))
	}
	return Parse(path, data, screen)
}

// parser carries the file name (in w, for errors) and base directory for
// paths.
type parser struct {
	w   yamlwalk.Walker
	dir string
}

func (p *parser) errf(line int, format string, args ...any) error {
	return p.w.Errorf(line, format, args...)
}

// Parse validates a script held in memory; path names it in errors and
// anchors relative file references.
func Parse(path string, data []byte, screen observe.Screen) (*Script, error) {
	p := &parser{w: yamlwalk.Walker{File: path, Class: ErrInvalid}, dir: filepath.Dir(path)}
	root, err := p.w.Root(data, "a script is a mapping with task, screen and steps")
	if err != nil {
		return nil, err
	}
	s := &Script{File: path, Files: app.TaskFiles{Dir: p.dir}}
	var steps *yaml.Node
	known := append([]string{"task", "screen", "steps", "grade"}, app.TaskFields...)
	err = p.w.Mapping(root, "a script", known, func(k, v *yaml.Node) (err error) {
		if app.IsTaskField(k.Value) {
			return p.w.Value(k, v, s.Files.Set)
		}
		switch k.Value {
		case "grade":
			dir := p.dir
			if abs, aerr := filepath.Abs(dir); aerr == nil {
				dir = abs
			}
			s.Grade, err = grade.Parse(p.w, k, v, grade.Options{Dir: dir})
		case "task":
			s.Task, err = p.w.Text(k, v)
		case "screen":
			var text string
			if text, err = p.w.Text(k, v); err == nil {
				if s.Screen, err = observe.ParseScreen(text); err != nil {
					err = p.w.Field(k, v, "%v", err)
				}
			}
		case "steps":
			steps = v
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := s.Files.Check(); err != nil {
		return nil, p.errf(root.Line, "%v", err)
	}
	if steps == nil || steps.Kind != yaml.SequenceNode || len(steps.Content) == 0 {
		return nil, p.errf(root.Line, "steps: a non-empty list of actions and checks is required")
	}
	if s.Screen != (observe.Screen{}) {
		screen = s.Screen
	}
	lim := action.DefaultLimits(screen.Width, screen.Height)
	names := map[string]bool{}
	for i, n := range steps.Content {
		st, err := p.step(i+1, n, lim, names)
		if err != nil {
			return nil, err
		}
		s.Steps = append(s.Steps, st)
	}
	return s, nil
}

// fields turns a step mapping into raw JSON values (for action.FromMap)
// and remembers each key's line.
func (p *parser) fields(n *yaml.Node) (map[string]json.RawMessage, map[string]int, error) {
	raw := map[string]json.RawMessage{}
	lines := map[string]int{}
	err := p.w.Mapping(n, "a step", nil, func(k, v *yaml.Node) error {
		var val any
		if err := v.Decode(&val); err != nil {
			return p.w.Field(k, v, "%v", err)
		}
		b, err := json.Marshal(val)
		if err != nil {
			return p.w.Field(k, v, "%v", err)
		}
		raw[k.Value], lines[k.Value] = b, k.Line
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return raw, lines, nil
}

func (p *parser) step(num int, n *yaml.Node, lim action.Limits, names map[string]bool) (Step, error) {
	st := Step{N: num, Line: n.Line}
	if n.Kind != yaml.MappingNode {
		return st, p.errf(n.Line, "step %d: want a mapping such as {action: key, keys: Return} or {expect: window, title: Calc*}", num)
	}
	raw, lines, err := p.fields(n)
	if err != nil {
		return st, err
	}
	where := func(field string) int {
		if l, ok := lines[field]; ok {
			return l
		}
		return n.Line
	}
	_, isAction := raw["action"]
	_, isExpect := raw["expect"]
	_, isWait := raw["wait_for"]
	_, isShot := raw["screenshot"]
	count := 0
	for _, b := range []bool{isAction, isExpect, isWait, isShot} {
		if b {
			count++
		}
	}
	if count != 1 {
		return st, p.errf(n.Line, "step %d: a step has exactly one of action, expect, wait_for or screenshot", num)
	}
	if _, ok := raw["optional"]; ok {
		if !isAction {
			return st, p.errf(where("optional"), "step %d: optional applies to actions only (a check that may fail is no check)", num)
		}
		if json.Unmarshal(raw["optional"], &st.Optional) != nil {
			return st, p.errf(where("optional"), "step %d: optional must be true or false, got %s", num, raw["optional"])
		}
		delete(raw, "optional")
	}
	switch {
	case isAction:
		a, err := action.FromMap(raw)
		if err != nil {
			var ae *action.Error
			line := n.Line
			if errors.As(err, &ae) && ae.Field != "" {
				line = where(strings.SplitN(ae.Field, "[", 2)[0])
			}
			return st, p.errf(line, "step %d: %v", num, err)
		}
		if err := action.Validate(a, lim); err != nil {
			var ae *action.Error
			line := n.Line
			if errors.As(err, &ae) && ae.Field != "" {
				line = where(strings.SplitN(ae.Field, "[", 2)[0])
			}
			return st, p.errf(line, "step %d: %v", num, err)
		}
		st.Action = &a
	case isShot:
		if len(raw) != 1 {
			for k := range raw {
				if k != "screenshot" {
					return st, p.errf(where(k), "step %d: unknown field %q; screenshot: NAME takes no other fields (to ask for a region, use {action: screenshot, region: …})", num, k)
				}
			}
		}
		var name string
		if json.Unmarshal(raw["screenshot"], &name) != nil || name == "" {
			return st, p.errf(where("screenshot"), "step %d: screenshot: give the screen a name, e.g. screenshot: start", num)
		}
		names[name] = true
		st.Remember = name
	default:
		c, err := p.check(num, raw, where, lim, names)
		if err != nil {
			return st, err
		}
		st.Check = c
	}
	return st, nil
}

func (p *parser) check(num int, raw map[string]json.RawMessage, where func(string) int, lim action.Limits, names map[string]bool) (*Check, error) {
	cp := &checkParser{p: p, num: num, verb: "expect", raw: raw, where: where, lim: lim, names: names, c: &Check{}}
	c := cp.c
	if _, ok := raw["wait_for"]; ok {
		cp.verb, c.Wait = "wait_for", true
	}
	if json.Unmarshal(raw[cp.verb], &c.Kind) != nil {
		return nil, cp.errf("%s must name a check", cp.verb)
	}
	spec, ok := checkSpecs[c.Kind]
	if !ok {
		return nil, cp.errf("unknown check %q (known: %s)", c.Kind, strings.Join(checkKinds(), ", "))
	}
	if err := cp.only(spec.fields); err != nil {
		return nil, err
	}
	if err := cp.shared(); err != nil {
		return nil, err
	}
	if spec.read != nil {
		if err := spec.read(cp); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// checkParser reads the fields of one check step into c; its errors name
// the file, the line, the step, the check and the field.
type checkParser struct {
	p     *parser
	num   int
	verb  string // expect or wait_for
	raw   map[string]json.RawMessage
	where func(field string) int
	lim   action.Limits
	names map[string]bool // the screenshots remembered so far
	c     *Check
}

// errf is an error about the whole step, at the verb's line.
func (cp *checkParser) errf(format string, args ...any) error {
	return cp.p.errf(cp.where(cp.verb), "step %d: %s", cp.num, fmt.Sprintf(format, args...))
}

// fail is an error about one field, at its line.
func (cp *checkParser) fail(field, format string, args ...any) error {
	return cp.p.errf(cp.where(field), "step %d: %s %s: field %q: %s", cp.num, cp.verb, cp.c.Kind, field, fmt.Sprintf(format, args...))
}

func (cp *checkParser) has(field string) bool {
	_, ok := cp.raw[field]
	return ok
}

// need requires fields, naming the first missing one.
func (cp *checkParser) need(fields ...string) error {
	for _, f := range fields {
		if !cp.has(f) {
			return cp.errf("%s %s needs field %q", cp.verb, cp.c.Kind, f)
		}
	}
	return nil
}

// only refuses fields the check does not take (wait_for also takes
// timeout_ms), in name order.
func (cp *checkParser) only(allowed []string) error {
	if cp.c.Wait {
		allowed = append(slices.Clone(allowed), "timeout_ms")
	}
	for _, k := range slices.Sorted(maps.Keys(cp.raw)) {
		if k != cp.verb && !slices.Contains(allowed, k) {
			hint := "takes no fields"
			if len(allowed) > 0 {
				hint = "takes " + strings.Join(allowed, ", ")
			}
			return cp.p.errf(cp.where(k), "step %d: unknown field %q: %s %s %s", cp.num, k, cp.verb, cp.c.Kind, hint)
		}
	}
	return nil
}

// int reads an integer field into dst, if it is there.
func (cp *checkParser) int(field string, dst *int) error {
	v, ok := cp.raw[field]
	if !ok {
		return nil
	}
	var f float64
	if json.Unmarshal(v, &f) != nil || f != float64(int(f)) {
		return cp.fail(field, "must be an integer, got %s", v)
	}
	*dst = int(f)
	return nil
}

// text reads a text field into dst, if it is there.
func (cp *checkParser) text(field string, dst *string) error {
	v, ok := cp.raw[field]
	if !ok {
		return nil
	}
	if string(v) == "null" {
		return cp.fail(field, "must be text, got null (quote it: in YAML an unquoted # starts a comment)")
	}
	if json.Unmarshal(v, dst) != nil {
		return cp.fail(field, "must be text, got %s", v)
	}
	return nil
}

// shared reads the fields several kinds take: timeout_ms, tolerance,
// color, region and since.
func (cp *checkParser) shared() error {
	c := cp.c
	c.TimeoutMS = DefaultWaitMS
	if err := cp.int("timeout_ms", &c.TimeoutMS); err != nil {
		return err
	}
	if c.TimeoutMS <= 0 || c.TimeoutMS > 600_000 {
		return cp.fail("timeout_ms", "must be between 1 and 600000, got %d", c.TimeoutMS)
	}
	if err := cp.int("tolerance", &c.Tolerance); err != nil {
		return err
	}
	if c.Tolerance < 0 || c.Tolerance > 255 {
		return cp.fail("tolerance", "must be between 0 and 255 per channel, got %d", c.Tolerance)
	}
	if v, ok := cp.raw["color"]; ok {
		if err := cp.text("color", &c.ColorText); err != nil {
			return err
		}
		col, err := parseColor(c.ColorText)
		if err != nil {
			return cp.fail("color", "%v (%s)", err, v)
		}
		c.Color = col
	}
	if v, ok := cp.raw["region"]; ok {
		var r []float64
		if json.Unmarshal(v, &r) != nil || len(r) != 4 {
			return cp.fail("region", "must be [x0, y0, x1, y1], got %s", v)
		}
		rect := action.Rect{int(r[0]), int(r[1]), int(r[2]), int(r[3])}
		if rect[0] < 0 || rect[1] < 0 || rect[2] > cp.lim.Width || rect[3] > cp.lim.Height || rect.Dx() <= 0 || rect.Dy() <= 0 {
			return cp.fail("region", "%v is not a non-empty region inside the %dx%d screen", rect, cp.lim.Width, cp.lim.Height)
		}
		c.Region = &rect
	}
	if err := cp.text("since", &c.Since); err != nil {
		return err
	}
	if c.Since != "" && !cp.names[c.Since] {
		return cp.fail("since", "no earlier step remembers a screenshot named %q (add - screenshot: %s before it)", c.Since, c.Since)
	}
	return nil
}

func (cp *checkParser) pixel() error {
	c := cp.c
	if err := cp.need("x", "y", "color"); err != nil {
		return err
	}
	if err := cp.int("x", &c.X); err != nil {
		return err
	}
	if err := cp.int("y", &c.Y); err != nil {
		return err
	}
	if c.X < 0 || c.Y < 0 || c.X >= cp.lim.Width || c.Y >= cp.lim.Height {
		return cp.fail("x", "(%d,%d) is outside the %dx%d screen", c.X, c.Y, cp.lim.Width, cp.lim.Height)
	}
	return nil
}

func (cp *checkParser) moved() error {
	c := cp.c
	if err := cp.need("color"); err != nil {
		return err
	}
	if c.Tolerance == 0 {
		c.Tolerance = 40
	}
	for _, f := range []struct {
		name string
		dst  **int
	}{{"min_dx", &c.MinDX}, {"min_dy", &c.MinDY}} {
		if cp.has(f.name) {
			var v int
			if err := cp.int(f.name, &v); err != nil {
				return err
			}
			*f.dst = &v
		}
	}
	if c.MinDX == nil && c.MinDY == nil {
		return cp.errf("%s moved needs min_dx or min_dy (negative: left or up)", cp.verb)
	}
	return nil
}

func (cp *checkParser) changed() error {
	c := cp.c
	c.MinPixels = 1
	if err := cp.int("min_pixels", &c.MinPixels); err != nil {
		return err
	}
	if c.MinPixels < 1 {
		return cp.fail("min_pixels", "must be at least 1")
	}
	return nil
}

func (cp *checkParser) unchanged() error {
	c := cp.c
	if err := cp.int("max_pixels", &c.MaxPixels); err != nil {
		return err
	}
	if c.MaxPixels < 0 {
		return cp.fail("max_pixels", "must not be negative")
	}
	return nil
}

func (cp *checkParser) image() error {
	c := cp.c
	if err := cp.need("file"); err != nil {
		return err
	}
	if err := cp.text("file", &c.File); err != nil {
		return err
	}
	if v, ok := cp.raw["max_diff"]; ok {
		if json.Unmarshal(v, &c.MaxDiff) != nil || c.MaxDiff < 0 || c.MaxDiff > 1 {
			return cp.fail("max_diff", "must be a fraction of pixels between 0 and 1, got %s", v)
		}
	}
	img, err := cp.p.loadPNG(c.File)
	if err != nil {
		return cp.fail("file", "%v", err)
	}
	c.Image = img
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	if c.Region == nil {
		c.Region = &action.Rect{0, 0, w, h}
	}
	if c.Region.Dx() != w || c.Region.Dy() != h {
		return cp.fail("region", "%v is %dx%d but %s is %dx%d", *c.Region, c.Region.Dx(), c.Region.Dy(), c.File, w, h)
	}
	if c.Region[2] > cp.lim.Width || c.Region[3] > cp.lim.Height {
		return cp.fail("file", "%s (%dx%d) does not fit the %dx%d screen", c.File, w, h, cp.lim.Width, cp.lim.Height)
	}
	return nil
}

func (cp *checkParser) window() error {
	c := cp.c
	if err := cp.need("title"); err != nil {
		return err
	}
	if err := cp.text("title", &c.Title); err != nil {
		return err
	}
	if c.Title == "" {
		return cp.fail("title", "want a glob or /regex/, got nothing")
	}
	m, err := action.TitleMatcher(c.Title)
	if err != nil {
		return cp.fail("title", "want a glob or /regex/: %v", err)
	}
	c.match = m
	return nil
}

func (cp *checkParser) log() error {
	c := cp.c
	if err := cp.text("stream", &c.Stream); err != nil {
		return err
	}
	if c.Stream != "" && c.Stream != "stdout" && c.Stream != "stderr" {
		return cp.fail("stream", "must be stdout or stderr (or absent for both), got %q", c.Stream)
	}
	if cp.has("contains") == cp.has("regex") {
		return cp.errf("%s log needs exactly one of contains or regex", cp.verb)
	}
	if err := cp.text("contains", &c.Contains); err != nil {
		return err
	}
	if cp.has("regex") {
		var re string
		if err := cp.text("regex", &re); err != nil {
			return err
		}
		rx, err := regexp.Compile(re)
		if err != nil {
			return cp.fail("regex", "%v", err)
		}
		c.Regex = rx
	}
	return nil
}

func (cp *checkParser) exited() error {
	if !cp.has("code") {
		return nil
	}
	var code int
	if err := cp.int("code", &code); err != nil {
		return err
	}
	cp.c.Code = &code
	return nil
}

func (cp *checkParser) element() error {
	c := cp.c
	if err := cp.need("target"); err != nil {
		return err
	}
	a, err := action.FromMap(map[string]json.RawMessage{"action": json.RawMessage(`"click"`), "target": cp.raw["target"]})
	if err != nil {
		var ae *action.Error
		if errors.As(err, &ae) {
			return cp.fail("target", "%s", ae.Msg)
		}
		return cp.fail("target", "%v", err)
	}
	if err := a.Target.Check(); err != nil {
		return cp.fail("target", "%v", err)
	}
	c.Target = a.Target
	if v, ok := cp.raw["absent"]; ok {
		if json.Unmarshal(v, &c.Absent) != nil {
			return cp.fail("absent", "must be true or false, got %s", v)
		}
	}
	for _, f := range []struct {
		name  string
		dst   **string
		match *func(string) bool
	}{{"name", &c.Name, &c.nameMatch}, {"text", &c.Text, &c.textMatch}} {
		if cp.has(f.name) {
			var v string
			if err := cp.text(f.name, &v); err != nil {
				return err
			}
			m, err := action.TitleMatcher(v)
			if err != nil {
				return cp.fail(f.name, "want the text, a glob or /regex/: %v", err)
			}
			if v == "" {
				m = func(s string) bool { return s == "" }
			}
			*f.dst, *f.match = &v, m
		}
	}
	if v, ok := cp.raw["state"]; ok {
		var one string
		if json.Unmarshal(v, &one) == nil {
			c.States = []string{one}
		} else if json.Unmarshal(v, &c.States) != nil {
			return cp.fail("state", "must be a state such as focused, or a list of them (\"!checked\": not checked), got %s", v)
		}
		for _, st := range c.States {
			if strings.TrimPrefix(st, "!") == "" {
				return cp.fail("state", "an empty state")
			}
		}
	}
	if c.Absent && (c.Name != nil || c.Text != nil || len(c.States) > 0) {
		return cp.errf("%s element: absent: true takes no name, text or state (nothing is there to have them)", cp.verb)
	}
	return nil
}

func (cp *checkParser) network() error {
	if cp.has("denied") == cp.has("allowed") {
		return cp.errf("%s network needs exactly one of denied or allowed (a host, host:port or a glob such as *.example.com)", cp.verb)
	}
	field := "allowed"
	if cp.has("denied") {
		field, cp.c.NetDenied = "denied", true
	}
	if err := cp.text(field, &cp.c.NetDest); err != nil {
		return err
	}
	if cp.c.NetDest == "" {
		return cp.fail(field, "want a host, host:port or a glob, got nothing")
	}
	if _, err := path.Match(cp.c.NetDest, "x"); err != nil {
		return cp.fail(field, "bad glob: %v", err)
	}
	return nil
}

func (cp *checkParser) fileWritten() error {
	c := cp.c
	if err := cp.need("path"); err != nil {
		return err
	}
	if err := cp.text("path", &c.Path); err != nil {
		return err
	}
	rel, ok := strings.CutPrefix(c.Path, "~/")
	if !ok {
		return cp.fail("path", "want a path below the home starting with ~/ (such as ~/out/*.txt), got %q", c.Path)
	}
	if err := collectfs.CheckPattern(rel); err != nil {
		return cp.fail("path", "%v", err)
	}
	return nil
}

func (cp *checkParser) process() error {
	c := cp.c
	if err := cp.need("argv"); err != nil {
		return err
	}
	if err := cp.text("argv", &c.Argv); err != nil {
		return err
	}
	if c.Argv == "" {
		return cp.fail("argv", "want the command line, a glob (such as \"sh -c *\") or /regex/, got nothing")
	}
	m, err := action.TitleMatcher(c.Argv)
	if err != nil {
		return cp.fail("argv", "want the command line, a glob or /regex/: %v", err)
	}
	c.argvMatch = m
	if cp.has("exit") {
		var code int
		if err := cp.int("exit", &code); err != nil {
			return err
		}
		if code < 0 || code > 255 {
			return cp.fail("exit", "an exit code is between 0 and 255, got %d", code)
		}
		c.Exit = &code
	}
	return nil
}

func (p *parser) loadPNG(rel string) (*image.RGBA, error) {
	path := rel
	if !filepath.IsAbs(path) {
		path = filepath.Join(p.dir, rel)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		return nil, fmt.Errorf("%s is not a PNG: %v", rel, err)
	}
	if cfg.Width*cfg.Height > observe.MaxScreenPixels {
		return nil, fmt.Errorf("%s is %dx%d, too large", rel, cfg.Width, cfg.Height)
	}
	if _, err := f.Seek(0, 0); err != nil {
		return nil, err
	}
	img, err := png.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", rel, err)
	}
	rgba := image.NewRGBA(image.Rect(0, 0, cfg.Width, cfg.Height))
	b := img.Bounds()
	for y := 0; y < cfg.Height; y++ {
		for x := 0; x < cfg.Width; x++ {
			rgba.Set(x, y, img.At(b.Min.X+x, b.Min.Y+y))
		}
	}
	return rgba, nil
}

func parseColor(s string) ([3]uint8, error) {
	var c [3]uint8
	if len(s) != 7 || s[0] != '#' {
		return c, fmt.Errorf("want #rrggbb")
	}
	for i := 0; i < 3; i++ {
		v, err := strconv.ParseUint(s[1+2*i:3+2*i], 16, 8)
		if err != nil {
			return c, fmt.Errorf("want #rrggbb")
		}
		c[i] = uint8(v)
	}
	return c, nil
}

func checkKinds() []string { return slices.Sorted(maps.Keys(checkSpecs)) }
