// Package action is agentbox's backend-neutral vocabulary: the actions a
// decision-maker may take and the results they produce. What it observes
// (frames, windows, the accessibility tree, …) is package observe's. Nothing
// here knows about Docker, X11 or any model provider.
//
// An action is one JSON object whose field "action" names its kind:
//
//	{"action": "key_down", "key": "Right"}
//	{"action": "click", "x": 320, "y": 240, "button": "left", "count": 2}
//	{"action": "type", "text": "héllo ✓\n"}
//	{"action": "done", "success": true, "message": "moved"}
//
// Parse decodes such an object strictly (unknown fields and fields that do not
// belong to the kind are errors); Validate checks it against a screen.
package action

import (
	"encoding/json"
	"fmt"
)

// Kind names an action.
type Kind string

// The action kinds. The vocabulary covers Anthropic's computer tool, OpenAI's
// Computer interface and OSWorld's computer_13, so every adapter maps onto it
// one to one.
const (
	Screenshot     Kind = "screenshot"
	Key            Kind = "key"
	KeyDown        Kind = "key_down"
	KeyUp          Kind = "key_up"
	Type           Kind = "type"
	MouseMove      Kind = "mouse_move"
	Click          Kind = "click"
	MouseDown      Kind = "mouse_down"
	MouseUp        Kind = "mouse_up"
	Drag           Kind = "drag"
	Scroll         Kind = "scroll"
	Wait           Kind = "wait"
	CursorPosition Kind = "cursor_position"
	Done           Kind = "done"
	// AccessibilityTree asks for the accessibility tree with the next
	// observation (the sandbox needs --a11y).
	AccessibilityTree Kind = "accessibility_tree"
	// TypeSecret types the value of a secret of the run's vault (--vault),
	// named by Secret: the value is looked up by the host as the action is
	// performed and is never recorded, shown or given to the agent.
	TypeSecret Kind = "type_secret"
)

// Kinds lists every action kind in documentation order.
var Kinds = []Kind{Screenshot, Key, KeyDown, KeyUp, Type, MouseMove, Click,
	MouseDown, MouseUp, Drag, Scroll, Wait, CursorPosition, Done, AccessibilityTree, TypeSecret}

// Button names a mouse button.
type Button string

// Mouse buttons.
const (
	Left    Button = "left"
	Middle  Button = "middle"
	Right   Button = "right"
	Back    Button = "back"
	Forward Button = "forward"
)

// Number returns the X11-style button number (1 left, 2 middle, 3 right,
// 8 back, 9 forward), or 0 for an unknown button.
func (b Button) Number() int {
	switch b {
	case Left, "":
		return 1
	case Middle:
		return 2
	case Right:
		return 3
	case Back:
		return 8
	case Forward:
		return 9
	}
	return 0
}

// Until names a condition a wait action waits for.
type Until string

// Wait conditions.
const (
	UntilStable Until = "stable" // the screen is unchanged for StableMS
	UntilWindow Until = "window" // a window whose title matches Title exists
	UntilChange Until = "change" // the screen differs from when the wait began
	// UntilFile: the file at File (below the home) was written since the
	// app was launched and has kept its size and time for StableMS.
	UntilFile Until = "file"
)

// Point is a screen position in pixels, origin top left.
type Point struct {
	X int `json:"x"`
	Y int `json:"y"`
}

// Path is a list of points, encoded as [[x, y], …].
type Path []Point

// MarshalJSON writes [[x, y], …].
func (p Path) MarshalJSON() ([]byte, error) {
	pts := make([][2]int, len(p))
	for i, q := range p {
		pts[i] = [2]int{q.X, q.Y}
	}
	return json.Marshal(pts)
}

// UnmarshalJSON reads [[x, y], …].
func (p *Path) UnmarshalJSON(b []byte) error {
	var pts [][2]int
	if err := json.Unmarshal(b, &pts); err != nil {
		return err
	}
	*p = make(Path, len(pts))
	for i, q := range pts {
		(*p)[i] = Point{q[0], q[1]}
	}
	return nil
}

// Rect is a screen region [X0,Y0,X1,Y1): X1 and Y1 are exclusive.
type Rect [4]int

// Dx is the width of r.
func (r Rect) Dx() int { return r[2] - r[0] }

// Dy is the height of r.
func (r Rect) Dy() int { return r[3] - r[1] }

// Action is one thing a decision-maker does. Only the fields that belong to
// Kind are set; see the table in docs/actions.md.
type Action struct {
	Kind Kind `json:"action"`

	// Pointer position: mouse_move, click, scroll (optional for click/scroll).
	X *int `json:"x,omitempty"`
	Y *int `json:"y,omitempty"`
	// Relative motion (mouse_move) or wheel clicks (scroll).
	DX *int `json:"dx,omitempty"`
	DY *int `json:"dy,omitempty"`

	Button Button `json:"button,omitempty"` // click, mouse_down, mouse_up, drag
	Count  int    `json:"count,omitempty"`  // click: 1–3

	Keys   string `json:"keys,omitempty"`   // key: a chord (Parse also reads it from "key"); click/scroll: modifiers held
	Key    string `json:"key,omitempty"`    // key_down, key_up: one key name (key: Parse reads it as keys; give keys or key, not both)
	Repeat int    `json:"repeat,omitempty"` // key

	Text    string `json:"text,omitempty"`     // type
	DelayMS int    `json:"delay_ms,omitempty"` // type, type_secret: per character

	// Secret names a secret of the run's vault (type_secret); its value is
	// never part of an action.
	Secret string `json:"secret,omitempty"`

	Path Path `json:"path,omitempty"` // drag (wait until file: Parse reads a string path as file)

	MS       int    `json:"ms,omitempty"`        // wait: duration, or deadline for until
	Until    Until  `json:"until,omitempty"`     // wait
	Title    string `json:"title,omitempty"`     // wait until window
	StableMS int    `json:"stable_ms,omitempty"` // wait until stable, wait until file
	File     string `json:"file,omitempty"`      // wait until file: ~/… below the home

	Region   *Rect   `json:"region,omitempty"`    // screenshot
	Scale    float64 `json:"scale,omitempty"`     // screenshot
	MaxWidth int     `json:"max_width,omitempty"` // screenshot

	// Target picks the element to act on in the live accessibility tree
	// (click, mouse_move, scroll: its centre; type: it gets the focus
	// first); resolved by the sandbox at the moment of the action.
	Target *Selector `json:"target,omitempty"`
	// Mark names a numbered box of the screenshot the agent was shown
	// (click, mouse_move, scroll); the runtime resolves it to the box's
	// centre and records X and Y beside it.
	Mark int `json:"mark,omitempty"`

	Success *bool  `json:"success,omitempty"` // done (default true)
	Message string `json:"message,omitempty"` // done
}

// Int returns a pointer to v, for building actions in Go.
func Int(v int) *int { return &v }

// Succeeded reports the success flag of a done action (true when unset).
func (a Action) Succeeded() bool { return a.Success == nil || *a.Success }

// String renders a short human-readable form, e.g. `key_down Right`.
func (a Action) String() string {
	switch a.Kind {
	case Key:
		return fmt.Sprintf("key %s", a.Keys)
	case KeyDown, KeyUp:
		return fmt.Sprintf("%s %s", a.Kind, a.Key)
	case Type:
		t := a.Text
		if len([]rune(t)) > 40 {
			t = string([]rune(t)[:40]) + "…"
		}
		return fmt.Sprintf("type %q", t)
	case TypeSecret:
		return fmt.Sprintf("type_secret %s", a.Secret)
	case MouseMove:
		if a.X != nil || a.Y != nil {
			return fmt.Sprintf("mouse_move %d,%d", deref(a.X), deref(a.Y))
		}
		return fmt.Sprintf("mouse_move %+d,%+d", deref(a.DX), deref(a.DY))
	case Click:
		s := "click"
		if a.Button != "" && a.Button != Left {
			s += " " + string(a.Button)
		}
		if a.Count > 1 {
			s += fmt.Sprintf(" x%d", a.Count)
		}
		if a.Mark != 0 {
			s += fmt.Sprintf(" mark %d", a.Mark)
		}
		if a.X != nil || a.Y != nil {
			s += fmt.Sprintf(" %d,%d", deref(a.X), deref(a.Y))
		}
		if a.Target != nil {
			s += " " + a.Target.String()
		}
		return s
	case Wait:
		if a.Until == UntilFile {
			return fmt.Sprintf("wait until file %s", a.File)
		}
		if a.Until != "" {
			return fmt.Sprintf("wait until %s", a.Until)
		}
		return fmt.Sprintf("wait %dms", a.MS)
	case Done:
		if a.Succeeded() {
			return "done"
		}
		return "done (gave up)"
	}
	return string(a.Kind)
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// MarshalJSON is the default encoding; it exists so that Action's encoding
// is defined in one place next to Parse.
func (a Action) MarshalJSON() ([]byte, error) {
	type plain Action
	return json.Marshal(plain(a))
}
