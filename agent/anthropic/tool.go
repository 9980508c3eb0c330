package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
)

// The computer tool's actions (computer_20250124), in the order of
// Anthropic's documentation.
var toolActions = map[string]struct {
	required, optional []string
}{
	"key":             {required: []string{"text"}},
	"hold_key":        {required: []string{"text", "duration"}},
	"type":            {required: []string{"text"}},
	"cursor_position": {},
	"mouse_move":      {required: []string{"coordinate"}},
	"left_mouse_down": {},
	"left_mouse_up":   {},
	"left_click":      {optional: []string{"coordinate", "text"}},
	"left_click_drag": {required: []string{"coordinate"}, optional: []string{"start_coordinate"}},
	"right_click":     {optional: []string{"coordinate", "text"}},
	"middle_click":    {optional: []string{"coordinate", "text"}},
	"double_click":    {optional: []string{"coordinate", "text"}},
	"triple_click":    {optional: []string{"coordinate", "text"}},
	"scroll":          {required: []string{"scroll_direction", "scroll_amount"}, optional: []string{"coordinate", "text"}},
	"wait":            {required: []string{"duration"}},
	"screenshot":      {},
}

// toolFields are every field the tool's input schema has.
var toolFields = []string{"action", "coordinate", "start_coordinate", "text", "duration", "scroll_direction", "scroll_amount"}

// MaxDuration is the longest hold_key or wait the tool accepts, in seconds
// (the limit of Anthropic's reference implementation).
const MaxDuration = 100

// display maps between the display the model is shown (Width×Height, the
// size of the screenshots it receives) and the screen.
type display struct {
	view *observe.View
}

// newDisplay describes a screen of sw×sh shown at mw×mh. The view carries
// sizes only; ToScreen and FromScreen need no pixels.
func newDisplay(sw, sh, mw, mh int) display {
	return display{view: &observe.View{Frame: &observe.Frame{Width: mw, Height: mh}, Region: action.Rect{0, 0, sw, sh}}}
}

func (d display) width() int  { return d.view.Frame.Width }
func (d display) height() int { return d.view.Frame.Height }

// toScreen maps a model coordinate, already checked to be on the model's
// display, to the screen pixel at the centre of the area it shows.
func (d display) toScreen(x, y int) (int, int) { return d.view.ToScreen(x, y) }

// toModel maps any screen coordinate (also off the screen, as window
// corners can be) to the model's display: the model pixel containing the
// screen pixel's centre, as observe.View.FromScreen does on the screen.
func (d display) toModel(x, y int) (int, int) {
	r := d.view.Region
	return floorDiv((2*x+1)*d.width(), 2*r.Dx()), floorDiv((2*y+1)*d.height(), 2*r.Dy())
}

func floorDiv(a, b int) int {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// inputError is a tool input that cannot be performed; its text is told
// back to the model.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }

func badInput(format string, args ...any) error {
	return &inputError{msg: fmt.Sprintf(format, args...)}
}

// plan is what one tool_use becomes: the agentbox actions to perform in
// order, and how to report the call.
type plan struct {
	name    string // the tool's action
	actions []action.Action
	// releases marks actions that undo a press (key_up, mouse_up): after a
	// failure they still run, everything else is dropped.
	releases []bool
	// cursor: the result reports the cursor position as text, in model
	// coordinates, without a screenshot (as the reference tool does).
	cursor bool
}

func (p *plan) add(a action.Action, release bool) {
	p.actions = append(p.actions, a)
	p.releases = append(p.releases, release)
}

// mapInput turns the computer tool's input into agentbox actions on the
// screen that d describes. Every coordinate must lie on the model's display
// and is mapped with d's exact mapping; every action is validated against
// the screen, so a plan never holds an action the runtime would reject.
// Errors are *inputError, worded for the model.
func mapInput(input json.RawMessage, d display) (*plan, error) {
	in, err := decodeInput(input)
	if err != nil {
		return nil, err
	}
	name, err := in.str("action")
	if err != nil {
		return nil, err
	}
	spec, ok := toolActions[name]
	if !ok {
		return nil, badInput("unknown action %q; the computer tool's actions are %s", name, actionList())
	}
	for _, f := range in.names() {
		if f == "action" {
			continue
		}
		if !slices.Contains(spec.required, f) && !slices.Contains(spec.optional, f) {
			if !slices.Contains(toolFields, f) {
				return nil, badInput("unknown field %q in the computer tool's input", f)
			}
			return nil, badInput("%s is not accepted for action %s", f, name)
		}
	}
	for _, f := range spec.required {
		if !in.has(f) {
			return nil, badInput("%s is required for action %s", f, name)
		}
	}
	p := &plan{name: name}
	coord := func(field string) (*int, *int, error) {
		if !in.has(field) {
			return nil, nil, nil
		}
		x, y, err := in.point(field, d)
		if err != nil {
			return nil, nil, err
		}
		sx, sy := d.toScreen(x, y)
		return &sx, &sy, nil
	}
	switch name {
	case "key":
		chords, err := in.chords()
		if err != nil {
			return nil, err
		}
		for i := 0; i < len(chords); {
			n := 1
			for i+n < len(chords) && chords[i+n] == chords[i] && n < 100 {
				n++
			}
			a := action.Action{Kind: action.Key, Keys: chords[i]}
			if n > 1 {
				a.Repeat = n
			}
			p.add(a, false)
			i += n
		}
	case "hold_key":
		chords, err := in.chords()
		if err != nil {
			return nil, err
		}
		ms, err := in.duration()
		if err != nil {
			return nil, err
		}
		var keys []string
		for _, c := range chords {
			parts, err := splitChord(c)
			if err != nil {
				return nil, err
			}
			for _, k := range parts {
				if !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
		}
		for _, k := range keys {
			p.add(action.Action{Kind: action.KeyDown, Key: k}, false)
		}
		p.add(action.Action{Kind: action.Wait, MS: ms}, false)
		for i := len(keys) - 1; i >= 0; i-- {
			p.add(action.Action{Kind: action.KeyUp, Key: keys[i]}, true)
		}
	case "type":
		text, err := in.str("text")
		if err != nil {
			return nil, err
		}
		if text == "" {
			return nil, badInput("text must not be empty for action type")
		}
		p.add(action.Action{Kind: action.Type, Text: text}, false)
	case "cursor_position":
		p.cursor = true
		p.add(action.Action{Kind: action.CursorPosition}, false)
	case "mouse_move":
		x, y, err := coord("coordinate")
		if err != nil {
			return nil, err
		}
		p.add(action.Action{Kind: action.MouseMove, X: x, Y: y}, false)
	case "left_mouse_down":
		p.add(action.Action{Kind: action.MouseDown, Button: action.Left}, false)
	case "left_mouse_up":
		p.add(action.Action{Kind: action.MouseUp, Button: action.Left}, true)
	case "left_click", "right_click", "middle_click", "double_click", "triple_click":
		x, y, err := coord("coordinate")
		if err != nil {
			return nil, err
		}
		mods, err := in.modifiers()
		if err != nil {
			return nil, err
		}
		a := action.Action{Kind: action.Click, X: x, Y: y, Button: action.Left, Keys: mods}
		switch name {
		case "right_click":
			a.Button = action.Right
		case "middle_click":
			a.Button = action.Middle
		case "double_click":
			a.Count = 2
		case "triple_click":
			a.Count = 3
		}
		p.add(a, false)
	case "left_click_drag":
		x, y, err := coord("coordinate")
		if err != nil {
			return nil, err
		}
		if in.has("start_coordinate") {
			x0, y0, err := coord("start_coordinate")
			if err != nil {
				return nil, err
			}
			p.add(action.Action{Kind: action.Drag, Button: action.Left, Path: action.Path{{X: *x0, Y: *y0}, {X: *x, Y: *y}}}, false)
			break
		}
		// From wherever the pointer is, as xdotool's mousedown, mousemove,
		// mouseup in the reference implementation.
		p.add(action.Action{Kind: action.MouseDown, Button: action.Left}, false)
		p.add(action.Action{Kind: action.MouseMove, X: x, Y: y}, false)
		p.add(action.Action{Kind: action.MouseUp, Button: action.Left}, true)
	case "scroll":
		x, y, err := coord("coordinate")
		if err != nil {
			return nil, err
		}
		dir, err := in.str("scroll_direction")
		if err != nil {
			return nil, err
		}
		n, err := in.integer("scroll_amount")
		if err != nil {
			return nil, err
		}
		if n < 0 || n > 100 {
			return nil, badInput("scroll_amount must be between 0 and 100, got %d", n)
		}
		mods, err := in.modifiers()
		if err != nil {
			return nil, err
		}
		a := action.Action{Kind: action.Scroll, X: x, Y: y, Keys: mods}
		switch dir {
		case "up":
			a.DY = action.Int(-n)
		case "down":
			a.DY = action.Int(n)
		case "left":
			a.DX = action.Int(-n)
		case "right":
			a.DX = action.Int(n)
		default:
			return nil, badInput("scroll_direction must be up, down, left or right, got %q", dir)
		}
		p.add(a, false)
	case "wait":
		ms, err := in.duration()
		if err != nil {
			return nil, err
		}
		p.add(action.Action{Kind: action.Wait, MS: ms}, false)
	case "screenshot":
		p.add(action.Action{Kind: action.Screenshot}, false)
	}
	limits := action.DefaultLimits(d.view.Region.Dx(), d.view.Region.Dy())
	for _, a := range p.actions {
		if err := action.Validate(a, limits); err != nil {
			return nil, toolWords(name, err)
		}
	}
	return p, nil
}

// toolWords rewords an agentbox validation error in the tool's terms: the
// text field carries keys and modifiers, so a bad key name is about text.
func toolWords(name string, err error) error {
	var ae *action.Error
	if errors.As(err, &ae) {
		switch ae.Field {
		case "keys", "key", "text":
			return badInput("text for action %s: %s", name, ae.Msg)
		}
		return badInput("action %s: %s", name, ae.Msg)
	}
	return badInput("action %s: %v", name, err)
}

// input is a decoded tool input: fields with a JSON null are absent.
type input map[string]json.RawMessage

func decodeInput(raw json.RawMessage) (input, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, badInput("the computer tool's input must be a JSON object with an action, got %s", short(raw))
	}
	if dec.More() {
		return nil, badInput("the computer tool's input has trailing data after the JSON object")
	}
	in := input{}
	for k, v := range m {
		if !bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			in[k] = v
		}
	}
	return in, nil
}

func (in input) has(f string) bool { _, ok := in[f]; return ok }

func (in input) names() []string {
	n := make([]string, 0, len(in))
	for k := range in {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

func (in input) str(f string) (string, error) {
	v, ok := in[f]
	if !ok {
		return "", badInput("%s is required", f)
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", badInput("%s must be a string, got %s", f, short(v))
	}
	return s, nil
}

// number decodes a JSON number (never a quoted one).
func (in input) number(f string) (float64, error) {
	v := bytes.TrimSpace(in[f])
	var n json.Number
	if len(v) == 0 || v[0] == '"' || json.Unmarshal(v, &n) != nil {
		return 0, badInput("%s must be a number, got %s", f, short(v))
	}
	x, err := n.Float64()
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, badInput("%s must be a finite number, got %s", f, short(v))
	}
	return x, nil
}

func (in input) integer(f string) (int, error) {
	x, err := in.number(f)
	if err != nil {
		return 0, err
	}
	if x != math.Trunc(x) || math.Abs(x) > 1<<30 {
		return 0, badInput("%s must be an integer, got %s", f, short(in[f]))
	}
	return int(x), nil
}

// point decodes [x, y] and checks it lies on the model's display.
func (in input) point(f string, d display) (int, int, error) {
	var nums []json.Number
	v := in[f]
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	if err := dec.Decode(&nums); err != nil || len(nums) != 2 {
		return 0, 0, badInput("%s must be [x, y], got %s", f, short(v))
	}
	var xy [2]int
	for i, n := range nums {
		x, err := n.Float64()
		if err != nil || x != math.Trunc(x) || math.Abs(x) > 1<<30 {
			return 0, 0, badInput("%s must be two whole numbers [x, y], got %s", f, short(v))
		}
		xy[i] = int(x)
	}
	if xy[0] < 0 || xy[1] < 0 || xy[0] >= d.width() || xy[1] >= d.height() {
		return 0, 0, badInput("%s [%d, %d] is outside the %dx%d display (x 0–%d, y 0–%d)",
			f, xy[0], xy[1], d.width(), d.height(), d.width()-1, d.height()-1)
	}
	return xy[0], xy[1], nil
}

// duration reads duration in seconds (0–MaxDuration) as milliseconds.
func (in input) duration() (int, error) {
	x, err := in.number("duration")
	if err != nil {
		return 0, err
	}
	if x < 0 || x > MaxDuration {
		return 0, badInput("duration must be between 0 and %d seconds, got %s", MaxDuration, short(in["duration"]))
	}
	return int(math.Round(x * 1000)), nil
}

// chords splits xdotool key text into chords: "ctrl+a Delete" is two.
func (in input) chords() ([]string, error) {
	text, err := in.str("text")
	if err != nil {
		return nil, err
	}
	chords := strings.Fields(text)
	if len(chords) == 0 {
		if text != "" {
			return []string{"space"}, nil // a literal space
		}
		return nil, badInput("text must name a key, e.g. Return or ctrl+s")
	}
	if len(chords) > 100 {
		return nil, badInput("text names %d key chords; the limit is 100", len(chords))
	}
	return chords, nil
}

// modifiers reads the optional text of clicks and scrolls: modifier keys
// held during the action ("shift", "ctrl+alt").
func (in input) modifiers() (string, error) {
	if !in.has("text") {
		return "", nil
	}
	s, err := in.str("text")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(s), nil
}

// splitChord splits an xdotool chord into key names: "ctrl+shift+t",
// "ctrl++" (the plus key last), "+".
func splitChord(c string) ([]string, error) {
	var last string
	switch {
	case c == "+":
		return []string{"+"}, nil
	case strings.HasSuffix(c, "++"):
		c, last = c[:len(c)-2], "+"
	}
	parts := strings.Split(c, "+")
	if last != "" {
		parts = append(parts, last)
	}
	for _, p := range parts {
		if p == "" {
			return nil, badInput("text %q has an empty key name between + signs", c)
		}
	}
	return parts, nil
}

func actionList() string {
	names := make([]string, 0, len(toolActions))
	for n := range toolActions {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func short(v []byte) string {
	s := strings.TrimSpace(string(v))
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}
