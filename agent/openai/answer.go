package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
)

// chatKinds are the actions the chat agent offers the model (screenshot and
// cursor_position are not needed: every turn brings both).
var chatKinds = []action.Kind{action.Key, action.KeyDown, action.KeyUp, action.Type,
	action.MouseMove, action.Click, action.MouseDown, action.MouseUp, action.Drag,
	action.Scroll, action.Wait, action.Done, action.TypeSecret}

// AnswerSchema is the JSON schema of one chat answer: the model's thought,
// the action and every field an action may take. Every field but action is
// nullable and every field is required, so the schema is valid in strict
// mode (OpenAI's structured outputs) while an action leaves the fields it
// does not take null. Properties are in the order the model should write
// them: the thought first.
const AnswerSchema = `{
  "type": "object",
  "properties": {
    "thought": {"type": ["string", "null"], "description": "What you see and why you take this action, in one or two sentences."},
    "action": {"type": "string", "enum": ["key", "key_down", "key_up", "type", "mouse_move", "click", "mouse_down", "mouse_up", "drag", "scroll", "wait", "done", "type_secret"]},
    "x": {"type": ["integer", "null"], "description": "Screenshot pixel column (click, mouse_move, scroll)."},
    "y": {"type": ["integer", "null"], "description": "Screenshot pixel row (click, mouse_move, scroll)."},
    "mark": {"type": ["integer", "null"], "description": "click, mouse_move, scroll: the number of a mark drawn on the screenshot, instead of x and y."},
    "dx": {"type": ["integer", "null"], "description": "mouse_move: relative pixels; scroll: wheel clicks, positive scrolls right."},
    "dy": {"type": ["integer", "null"], "description": "mouse_move: relative pixels; scroll: wheel clicks, positive scrolls down."},
    "button": {"type": ["string", "null"], "enum": ["left", "middle", "right", "back", "forward", null]},
    "count": {"type": ["integer", "null"], "description": "click: 1, 2 or 3."},
    "keys": {"type": ["string", "null"], "description": "key: a chord such as \"Return\" or \"ctrl+s\"; click and scroll: modifiers held."},
    "key": {"type": ["string", "null"], "description": "key_down, key_up: one key name."},
    "repeat": {"type": ["integer", "null"], "description": "key: how many times (1-100)."},
    "text": {"type": ["string", "null"], "description": "type: the text to type."},
    "secret": {"type": ["string", "null"], "description": "type_secret: the name of a secret the task told you of; its value is typed for you and never shown to you."},
    "path": {"type": ["array", "null"], "items": {"type": "array", "items": {"type": "integer"}}, "description": "drag: [[x, y], ...], at least two points."},
    "ms": {"type": ["integer", "null"], "description": "wait: milliseconds."},
    "success": {"type": ["boolean", "null"], "description": "done: true when the task is done, false when it cannot be done."},
    "message": {"type": ["string", "null"], "description": "done: what you found or did."}
  },
  "required": ["thought", "action", "x", "y", "mark", "dx", "dy", "button", "count", "keys", "key", "repeat", "text", "secret", "path", "ms", "success", "message"],
  "additionalProperties": false
}`

// answerFormat describes the answer in the system prompt (needed when the
// server enforces no schema, helpful when it does). w×h is the size of the
// screenshots the model sees.
func answerFormat(w, h int, scaled bool) string {
	size := fmt.Sprintf("Each screenshot is %dx%d pixels", w, h)
	if scaled {
		size += " (the screen scaled down)"
	}
	return size + `; coordinates are pixels of the screenshot, x to the right and
y down from its top-left corner. Each turn you get the current screenshot
and what happened since your last action. Answer with exactly one JSON
object and nothing else:

{"thought": "what you see and why", "action": "<kind>", ...the action's fields}

Actions and their fields (every other field is null or left out):
- click: x, y, or mark (the number of a box drawn on the screenshot, when
  it has marks); button (left, right, middle, back, forward; default
  left); count (1-3); keys: modifiers held, e.g. "ctrl"
- mouse_move: x, y (absolute) or dx, dy (relative)
- mouse_down, mouse_up: button
- drag: path [[x, y], ...] with at least two points; button
- scroll: x, y; dx, dy in wheel clicks (positive dy scrolls down)
- key: keys, a key or chord such as "Return", "Right", "ctrl+s"; repeat (1-100)
- key_down, key_up: key (held until key_up)
- type: text
- type_secret: secret, the name of a secret the task told you of (its
  value is typed for you; you never see it, and where the app shows it
  you read [secret:NAME])
- wait: ms
- done: success (true when the task is done, false when it cannot be
  done), message

For example: {"thought": "The OK button is at the bottom.", "action": "click", "x": 312, "y": 400}`
}

// parseAnswer reads one action from a model's text: a JSON object, also
// when wrapped in a Markdown code fence or preceded by prose (servers
// without schema support). Null fields are treated as absent, "thought" is
// returned apart. The action is decoded strictly (action.FromMap) but not
// validated against a screen.
func parseAnswer(content string) (action.Action, string, error) {
	s := strings.TrimSpace(content)
	if s == "" {
		return action.Action{}, "", fmt.Errorf("the answer is empty")
	}
	i := strings.IndexByte(s, '{')
	if i < 0 {
		return action.Action{}, "", fmt.Errorf("the answer has no JSON object")
	}
	dec := json.NewDecoder(strings.NewReader(s[i:]))
	dec.UseNumber()
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return action.Action{}, "", fmt.Errorf("the answer is not a valid JSON object: %v", err)
	}
	if raw == nil {
		return action.Action{}, "", fmt.Errorf("the answer is not a JSON object")
	}
	var thought string
	if t, ok := raw["thought"]; ok {
		if !isNull(t) {
			if err := json.Unmarshal(t, &thought); err != nil {
				return action.Action{}, "", fmt.Errorf("field \"thought\" must be a string")
			}
		}
		delete(raw, "thought")
	}
	for k, v := range raw {
		if isNull(v) {
			delete(raw, k)
		}
	}
	a, err := action.FromMap(raw)
	if err != nil {
		return a, thought, err
	}
	known := false
	for _, k := range chatKinds {
		known = known || a.Kind == k
	}
	if !known {
		return a, thought, fmt.Errorf("action %q is not available here; use one of %s", a.Kind, kindNames())
	}
	return a, thought, nil
}

func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

func kindNames() string {
	var s []string
	for _, k := range chatKinds {
		s = append(s, string(k))
	}
	return strings.Join(s, ", ")
}

// toScreenAction checks a parsed action against the screenshot the model
// saw and maps its coordinates to the screen exactly (relative motion is
// scaled; wheel clicks are not). The result is valid against screen.
func toScreenAction(a action.Action, v *observe.View, screen action.Limits) (action.Action, error) {
	if err := action.Validate(a, action.DefaultLimits(v.Frame.Width, v.Frame.Height)); err != nil {
		return a, err
	}
	if a.X != nil && a.Y != nil {
		x, y := v.ToScreen(*a.X, *a.Y)
		a.X, a.Y = &x, &y
	}
	if len(a.Path) > 0 {
		p := make(action.Path, len(a.Path))
		for i, q := range a.Path {
			p[i].X, p[i].Y = v.ToScreen(q.X, q.Y)
		}
		a.Path = p
	}
	if a.Kind == action.MouseMove && v.Scaled() {
		if a.DX != nil {
			a.DX = action.Int(*a.DX * v.Region.Dx() / v.Frame.Width)
		}
		if a.DY != nil {
			a.DY = action.Int(*a.DY * v.Region.Dy() / v.Frame.Height)
		}
	}
	if err := action.Validate(a, screen); err != nil {
		return a, err
	}
	return a, nil
}
