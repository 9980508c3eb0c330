package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
)

// cuAction is one action of a computer call, decoded from the raw JSON
// (not the SDK's union, which turns a missing coordinate into 0).
type cuAction struct {
	Type    string    `json:"type"`
	Button  *string   `json:"button"`
	X       *int      `json:"x"`
	Y       *int      `json:"y"`
	Keys    []string  `json:"keys"`
	Path    []cuPoint `json:"path"`
	ScrollX *int      `json:"scroll_x"`
	ScrollY *int      `json:"scroll_y"`
	Text    *string   `json:"text"`
}

type cuPoint struct {
	X *int `json:"x"`
	Y *int `json:"y"`
}

// mapping holds what the translation needs besides the action.
type mapping struct {
	view     *observe.View // the screenshot the model saw
	limits   action.Limits
	waitMS   int            // a wait action waits this long
	maxShift int            // wheel clicks per axis at most
	marks    []observe.Mark // the screenshot's marks (click_mark's targets)
}

// buttons maps OpenAI's button names onto agentbox's.
var buttons = map[string]action.Button{
	"left": action.Left, "right": action.Right, "wheel": action.Middle,
	"middle": action.Middle, "back": action.Back, "forward": action.Forward,
}

// mapComputerAction translates one computer-use action into agentbox
// actions: one, or for a move or drag with keys held, key_down for each key,
// the motion, and key_up in reverse. Coordinates are mapped from the
// screenshot the model saw to the screen exactly; everything returned is
// valid against m.limits.
func mapComputerAction(raw []byte, m mapping) ([]action.Action, error) {
	var c cuAction
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("action is not a computer action object: %v", err)
	}
	point := func() (*int, *int, error) {
		if c.X == nil || c.Y == nil {
			return nil, nil, fmt.Errorf("%s needs x and y", c.Type)
		}
		x, y, err := toScreen(m.view, *c.X, *c.Y)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", c.Type, err)
		}
		return &x, &y, nil
	}
	var out []action.Action
	switch c.Type {
	case "click", "double_click":
		a := action.Action{Kind: action.Click}
		var err error
		if a.X, a.Y, err = point(); err != nil {
			return nil, err
		}
		if c.Type == "double_click" {
			a.Count = 2
		} else if c.Button != nil {
			b, ok := buttons[strings.ToLower(*c.Button)]
			if !ok {
				return nil, fmt.Errorf("click: unknown button %q (left, right, wheel, back, forward)", *c.Button)
			}
			a.Button = b
		}
		if len(c.Keys) > 0 {
			if a.Keys, err = chord(c.Keys); err != nil {
				return nil, fmt.Errorf("%s: %w", c.Type, err)
			}
		}
		out = []action.Action{a}
	case "move":
		a := action.Action{Kind: action.MouseMove}
		var err error
		if a.X, a.Y, err = point(); err != nil {
			return nil, err
		}
		out = holding(c.Keys, a)
	case "drag":
		a := action.Action{Kind: action.Drag}
		for i, p := range c.Path {
			if p.X == nil || p.Y == nil {
				return nil, fmt.Errorf("drag: path[%d] needs x and y", i)
			}
			x, y, err := toScreen(m.view, *p.X, *p.Y)
			if err != nil {
				return nil, fmt.Errorf("drag: path[%d]: %w", i, err)
			}
			a.Path = append(a.Path, action.Point{X: x, Y: y})
		}
		out = holding(c.Keys, a)
	case "keypress":
		keys, err := chord(c.Keys)
		if err != nil {
			return nil, fmt.Errorf("keypress: %w", err)
		}
		out = []action.Action{{Kind: action.Key, Keys: keys}}
	case "scroll":
		a := action.Action{Kind: action.Scroll}
		var err error
		if a.X, a.Y, err = point(); err != nil {
			return nil, err
		}
		if c.ScrollX == nil && c.ScrollY == nil {
			return nil, fmt.Errorf("scroll needs scroll_x or scroll_y")
		}
		// One wheel click per unit, as OpenAI's own sample computers do,
		// capped at maxShift clicks per axis.
		if c.ScrollX != nil && *c.ScrollX != 0 {
			a.DX = action.Int(capAbs(*c.ScrollX, m.maxShift))
		}
		if c.ScrollY != nil && *c.ScrollY != 0 || a.DX == nil {
			a.DY = action.Int(capAbs(deref(c.ScrollY), m.maxShift))
		}
		if len(c.Keys) > 0 {
			if a.Keys, err = chord(c.Keys); err != nil {
				return nil, fmt.Errorf("scroll: %w", err)
			}
		}
		out = []action.Action{a}
	case "type":
		if c.Text == nil || *c.Text == "" {
			return nil, fmt.Errorf("type needs text")
		}
		out = []action.Action{{Kind: action.Type, Text: *c.Text}}
	case "wait":
		out = []action.Action{{Kind: action.Wait, MS: m.waitMS}}
	case "screenshot":
		out = []action.Action{{Kind: action.Screenshot}}
	case "":
		return nil, fmt.Errorf("the computer action has no type")
	default:
		return nil, fmt.Errorf("unknown computer action %q (click, double_click, drag, keypress, move, scroll, type, wait, screenshot)", clip(c.Type, 40))
	}
	for _, a := range out {
		if err := action.Validate(a, m.limits); err != nil {
			return nil, fmt.Errorf("%s: %w", c.Type, err)
		}
	}
	return out, nil
}

// holding wraps a motion in key_down/key_up for each key held.
func holding(keys []string, a action.Action) []action.Action {
	var out []action.Action
	var names []string
	for _, k := range keys {
		if n := keyName(k, false); n != "" {
			names = append(names, n)
		}
	}
	for _, n := range names {
		out = append(out, action.Action{Kind: action.KeyDown, Key: n})
	}
	out = append(out, a)
	for i := len(names) - 1; i >= 0; i-- {
		out = append(out, action.Action{Kind: action.KeyUp, Key: names[i]})
	}
	return out
}

// chord joins OpenAI key names into an agentbox chord ("CTRL+c").
// agentbox's key names accept OpenAI's upper-case names (CTRL, ENTER,
// ARROWLEFT, SPACE, …) as they are. A letter pressed together with
// Ctrl, Alt or Super is the lower-case key: models write shortcuts as
// ["CTRL", "C"], which means ctrl+c, not ctrl+shift+c; a letter alone or
// with Shift keeps its case.
func chord(keys []string) (string, error) {
	if len(keys) == 0 {
		return "", fmt.Errorf("no keys")
	}
	mod := false
	for _, k := range keys {
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "ctrl", "control", "control_l", "control_r", "alt", "alt_l", "alt_r", "option",
			"super", "super_l", "super_r", "meta", "cmd", "command", "win", "windows":
			mod = true
		}
	}
	names := make([]string, 0, len(keys))
	for i, k := range keys {
		n := keyName(k, mod)
		if n == "" {
			return "", fmt.Errorf("key %d is empty", i)
		}
		names = append(names, n)
	}
	return strings.Join(names, "+"), nil
}

// keyName maps one OpenAI key name onto agentbox's key names.
func keyName(k string, lowerLetters bool) string {
	switch k {
	case " ":
		return "space"
	case "+":
		return "plus"
	}
	k = strings.TrimSpace(k)
	if lowerLetters && len(k) == 1 && k[0] >= 'A' && k[0] <= 'Z' {
		return strings.ToLower(k)
	}
	return k
}

func capAbs(v, limit int) int {
	if v > limit {
		return limit
	}
	if v < -limit {
		return -limit
	}
	return v
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
