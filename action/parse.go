package action

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/codegirl-games/agentbox/internal/textcut"
)

// ErrInvalid is wrapped by every error Parse and Validate return.
var ErrInvalid = errors.New("invalid action")

// Error describes what is wrong with an action and which field is at fault.
type Error struct {
	Kind  Kind   // the action kind, if known
	Field string // the offending field, if any
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Kind != "" {
		fmt.Fprintf(&b, "%s: ", e.Kind)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, "field %q: ", e.Field)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *Error) Unwrap() error { return ErrInvalid }

func errorf(k Kind, field, format string, args ...any) *Error {
	return &Error{Kind: k, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Fields returns the fields an action kind accepts besides "action", or nil
// for an unknown kind.
func Fields(k Kind) []string { return kindSpecs[k].fields }

// MaxJSON caps the size of one encoded action.
const MaxJSON = 1 << 20

// Parse decodes one action from JSON, strictly: the kind must be known, and
// every field must belong to it and have the right type. Values are range
// checked by Validate, not here.
func Parse(data []byte) (Action, error) {
	if len(data) > MaxJSON {
		return Action{}, errorf("", "", "action is %d bytes; the limit is %d", len(data), MaxJSON)
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return Action{}, errorf("", "", "not a JSON object: %v", err)
	}
	if dec.More() {
		return Action{}, errorf("", "", "trailing data after the JSON object")
	}
	if raw == nil {
		return Action{}, errorf("", "", "not a JSON object")
	}
	return FromMap(raw)
}

// FromMap builds an action from already-split JSON fields (used by script
// and model adapters that decode a larger document first).
func FromMap(raw map[string]json.RawMessage) (Action, error) {
	var a Action
	kindRaw, ok := raw["action"]
	if !ok {
		return a, errorf("", "action", "missing; it names the kind: one of %s", kindList())
	}
	var kind string
	if err := json.Unmarshal(kindRaw, &kind); err != nil {
		return a, errorf("", "action", "must be a string, got %s", short(kindRaw))
	}
	a.Kind = Kind(kind)
	spec, ok := kindSpecs[a.Kind]
	allowed := spec.fields
	if !ok {
		return a, errorf("", "action", "unknown action %q; known: %s", kind, kindList())
	}
	if a.Kind == Key && given(raw["key"]) && given(raw["keys"]) {
		return a, errorf(a.Kind, "key", "give keys (a key or chord) or key (one key), not both")
	}
	if a.Kind == Wait && given(raw["path"]) && given(raw["file"]) {
		return a, errorf(a.Kind, "path", "give file or path (the same: the file of until: file), not both")
	}
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if name == "action" {
			continue
		}
		if !slices.Contains(allowed, name) {
			if len(allowed) == 0 {
				return a, errorf(a.Kind, name, "unknown field; %s takes no fields", a.Kind)
			}
			return a, errorf(a.Kind, name, "unknown field; %s takes %s", a.Kind, strings.Join(allowed, ", "))
		}
		if err := a.set(name, raw[name]); err != nil {
			return a, err
		}
	}
	return a, nil
}

// given reports whether a field is present and not null.
func given(v json.RawMessage) bool {
	return v != nil && !bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

func (a *Action) set(name string, v json.RawMessage) error {
	k := a.Kind
	if !given(v) {
		return nil // null means "not given"
	}
	switch name {
	case "x":
		return decodeInt(k, name, v, func(n int) { a.X = &n })
	case "y":
		return decodeInt(k, name, v, func(n int) { a.Y = &n })
	case "dx":
		return decodeInt(k, name, v, func(n int) { a.DX = &n })
	case "dy":
		return decodeInt(k, name, v, func(n int) { a.DY = &n })
	case "count":
		return decodeInt(k, name, v, func(n int) { a.Count = n })
	case "repeat":
		return decodeInt(k, name, v, func(n int) { a.Repeat = n })
	case "delay_ms":
		return decodeInt(k, name, v, func(n int) { a.DelayMS = n })
	case "ms":
		return decodeInt(k, name, v, func(n int) { a.MS = n })
	case "stable_ms":
		return decodeInt(k, name, v, func(n int) { a.StableMS = n })
	case "max_width":
		return decodeInt(k, name, v, func(n int) { a.MaxWidth = n })
	case "mark":
		return decodeInt(k, name, v, func(n int) { a.Mark = n })
	case "target":
		sel, err := decodeSelector(v, 0)
		if err != nil {
			return errorf(k, name, "%v", err)
		}
		a.Target = sel
		return nil
	case "button":
		return decodeString(k, name, v, func(s string) { a.Button = Button(s) })
	case "keys":
		return decodeString(k, name, v, func(s string) { a.Keys = s })
	case "key":
		if k == Key {
			// key takes a chord in keys; key (what key_down and key_up
			// take) is the same field under its other name.
			return decodeString(k, name, v, func(s string) { a.Keys = s })
		}
		return decodeString(k, name, v, func(s string) { a.Key = s })
	case "text":
		return decodeString(k, name, v, func(s string) { a.Text = s })
	case "secret":
		return decodeString(k, name, v, func(s string) { a.Secret = s })
	case "until":
		return decodeString(k, name, v, func(s string) { a.Until = Until(s) })
	case "title":
		return decodeString(k, name, v, func(s string) { a.Title = s })
	case "file":
		return decodeString(k, name, v, func(s string) { a.File = s })
	case "message":
		return decodeString(k, name, v, func(s string) { a.Message = s })
	case "success":
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			return errorf(k, name, "must be true or false, got %s", short(v))
		}
		a.Success = &b
		return nil
	case "scale":
		f, err := decodeNumber(k, name, v)
		if err != nil {
			return err
		}
		a.Scale = f
		return nil
	case "region":
		var nums []json.Number
		if err := json.Unmarshal(v, &nums); err != nil || len(nums) != 4 {
			return errorf(k, name, "must be [x0, y0, x1, y1], got %s", short(v))
		}
		var r Rect
		for i, n := range nums {
			iv, err := toInt(k, name, n)
			if err != nil {
				return err
			}
			r[i] = iv
		}
		a.Region = &r
		return nil
	case "path":
		if k == Wait {
			// wait until file takes its file in file; path is the same
			// field under the name a person would give it.
			return decodeString(k, name, v, func(s string) { a.File = s })
		}
		var pts [][]json.Number
		if err := json.Unmarshal(v, &pts); err != nil {
			return errorf(k, name, "must be a list of [x, y] points, got %s", short(v))
		}
		a.Path = make(Path, 0, len(pts))
		for i, p := range pts {
			if len(p) != 2 {
				return errorf(k, name, "point %d must be [x, y], got %d numbers", i, len(p))
			}
			x, err := toInt(k, fmt.Sprintf("%s[%d][0]", name, i), p[0])
			if err != nil {
				return err
			}
			y, err := toInt(k, fmt.Sprintf("%s[%d][1]", name, i), p[1])
			if err != nil {
				return err
			}
			a.Path = append(a.Path, Point{x, y})
		}
		return nil
	}
	return errorf(k, name, "unknown field")
}

func decodeString(k Kind, name string, v json.RawMessage, set func(string)) error {
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return errorf(k, name, "must be a string, got %s", short(v))
	}
	set(s)
	return nil
}

func decodeNumber(k Kind, name string, v json.RawMessage) (float64, error) {
	var n json.Number
	if err := unmarshalNumber(v, &n); err != nil {
		return 0, errorf(k, name, "must be a number, got %s", short(v))
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errorf(k, name, "must be a finite number, got %s", n)
	}
	return f, nil
}

func decodeInt(k Kind, name string, v json.RawMessage, set func(int)) error {
	var n json.Number
	if err := unmarshalNumber(v, &n); err != nil {
		return errorf(k, name, "must be an integer, got %s", short(v))
	}
	i, err := toInt(k, name, n)
	if err != nil {
		return err
	}
	set(i)
	return nil
}

// unmarshalNumber decodes a JSON number; unlike json.Number's own decoding
// it refuses quoted numbers ("1").
func unmarshalNumber(v json.RawMessage, n *json.Number) error {
	t := bytes.TrimSpace(v)
	if len(t) == 0 || t[0] == '"' {
		return errors.New("not a number")
	}
	return json.Unmarshal(t, n)
}

// maxInt bounds every integer field; Validate applies tighter limits.
const maxInt = 1 << 30

func toInt(k Kind, name string, n json.Number) (int, error) {
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errorf(k, name, "must be an integer, got %s", n)
	}
	if f != math.Trunc(f) {
		return 0, errorf(k, name, "must be an integer, got %s", n)
	}
	if f > maxInt || f < -maxInt {
		return 0, errorf(k, name, "%s is out of range", n)
	}
	return int(f), nil
}

func short(v json.RawMessage) string {
	return textcut.Bytes(strings.TrimSpace(string(v)), 40, "…")
}

func kindList() string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// selectorFields are the fields of a target.
var selectorFields = []string{"id", "role", "name", "index", "ancestor"}

// decodeSelector reads a target strictly: an object of selectorFields.
func decodeSelector(v json.RawMessage, depth int) (*Selector, error) {
	if depth > maxSelectorDepth {
		return nil, fmt.Errorf("ancestors nest deeper than %d", maxSelectorDepth)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(v, &raw); err != nil || raw == nil {
		return nil, fmt.Errorf("must be an object such as {role: \"push button\", name: \"OK\"}, got %s", short(v))
	}
	var s Selector
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		fv := raw[name]
		switch name {
		case "id", "role", "name":
			var str string
			if err := json.Unmarshal(fv, &str); err != nil {
				return nil, fmt.Errorf("%s must be a string, got %s", name, short(fv))
			}
			switch name {
			case "id":
				s.ID = str
			case "role":
				s.Role = str
			default:
				s.Name = str
			}
		case "index":
			var n json.Number
			if err := unmarshalNumber(fv, &n); err != nil {
				return nil, fmt.Errorf("index must be an integer, got %s", short(fv))
			}
			i, err := toInt("", name, n)
			if err != nil {
				return nil, fmt.Errorf("index must be an integer, got %s", short(fv))
			}
			s.Index = &i
		case "ancestor":
			anc, err := decodeSelector(fv, depth+1)
			if err != nil {
				return nil, fmt.Errorf("ancestor: %w", err)
			}
			s.Ancestor = anc
		default:
			return nil, fmt.Errorf("unknown field %q; a target takes %s", name, strings.Join(selectorFields, ", "))
		}
	}
	return &s, nil
}
