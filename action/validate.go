package action

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/codegirl-games/agentbox/internal/keysym"
	"github.com/codegirl-games/agentbox/internal/vault"
)

// Limits bounds what Validate accepts.
type Limits struct {
	Width, Height int // the screen; coordinates must lie inside it
	MaxText       int // characters in one type action
	MaxWaitMS     int // one wait action
	MaxPath       int // points in one drag
	MaxRepeat     int // key repeat
	MaxScroll     int // wheel clicks per axis
	MaxDelayMS    int // per-character typing delay
}

// DefaultLimits returns the limits for a screen of the given size.
func DefaultLimits(width, height int) Limits {
	return Limits{
		Width: width, Height: height,
		MaxText:    10000,
		MaxWaitMS:  120_000,
		MaxPath:    1000,
		MaxRepeat:  100,
		MaxScroll:  100,
		MaxDelayMS: 1000,
	}
}

// Validate checks a parsed action against the limits: required fields are
// present, numbers are in range, coordinates are on the screen and key names
// are known. It never modifies a.
func Validate(a Action, l Limits) error {
	if err := checkTarget(a); err != nil {
		return err
	}
	spec, ok := kindSpecs[a.Kind]
	if !ok {
		return errorf("", "action", "unknown action %q; known: %s", a.Kind, kindList())
	}
	for _, n := range spec.need {
		if !has(a, n.field) {
			msg := "required"
			if n.hint != "" {
				msg += ": " + n.hint
			}
			return &Error{Kind: a.Kind, Field: n.field, Msg: msg}
		}
	}
	if spec.check == nil {
		return nil
	}
	return spec.check(a, l)
}

// kindSpec is one kind of action: the fields it takes besides "action"
// (Parse refuses any other), those it needs, and the checks of its values
// against the limits, run after the needs are met.
type kindSpec struct {
	fields []string
	need   []need
	check  func(Action, Limits) error // nil: nothing more to check
}

// need is a field an action cannot do without; hint, if any, follows
// "required: " in the error.
type need struct{ field, hint string }

// kindSpecs are the action kinds: a new kind needs its row here (and its
// constant in Kinds), else TestEveryKindHasASpec fails.
var kindSpecs = map[Kind]kindSpec{
	Screenshot: {fields: []string{"region", "scale", "max_width"}, check: checkScreenshot},
	Key: {fields: []string{"keys", "key", "repeat"}, check: checkKey,
		need: []need{{"keys", "a key or a chord, e.g. Return or ctrl+c (the field may also be called key)"}}},
	KeyDown:           {fields: []string{"key"}, need: []need{{"key", ""}}, check: checkKeyName},
	KeyUp:             {fields: []string{"key"}, need: []need{{"key", ""}}, check: checkKeyName},
	Type:              {fields: []string{"text", "delay_ms", "target"}, need: []need{{"text", ""}}, check: checkType},
	MouseMove:         {fields: []string{"x", "y", "dx", "dy", "target", "mark"}, check: checkMouseMove},
	Click:             {fields: []string{"x", "y", "button", "count", "keys", "target", "mark"}, check: checkClick},
	MouseDown:         {fields: []string{"button"}, check: checkButtonOf},
	MouseUp:           {fields: []string{"button"}, check: checkButtonOf},
	Drag:              {fields: []string{"path", "button"}, check: checkDrag},
	Scroll:            {fields: []string{"x", "y", "dx", "dy", "keys", "target", "mark"}, check: checkScroll},
	Wait:              {fields: []string{"ms", "until", "title", "stable_ms", "file", "path"}, check: checkWait},
	CursorPosition:    {fields: []string{}},
	Done:              {fields: []string{"success", "message"}},
	AccessibilityTree: {fields: []string{}},
	TypeSecret: {fields: []string{"secret", "delay_ms", "target"}, check: checkTypeSecret,
		need: []need{{"secret", "the name of a secret of the run's vault (--vault)"}}},
}

// has reports whether a needed field has a value.
func has(a Action, field string) bool {
	switch field {
	case "keys":
		return a.Keys != ""
	case "key":
		return a.Key != ""
	case "text":
		return a.Text != ""
	case "secret":
		return a.Secret != ""
	}
	panic("action: no way to tell whether field " + field + " is given")
}

func checkScreenshot(a Action, l Limits) error {
	k := a.Kind
	if a.Region != nil {
		r := *a.Region
		if r[0] < 0 || r[1] < 0 || r[2] > l.Width || r[3] > l.Height || r.Dx() <= 0 || r.Dy() <= 0 {
			return errorf(k, "region", "%v is not a non-empty region inside the %dx%d screen", r, l.Width, l.Height)
		}
	}
	if a.Scale < 0 || a.Scale > 1 {
		return errorf(k, "scale", "must be in (0, 1], got %g", a.Scale)
	}
	if a.MaxWidth < 0 {
		return errorf(k, "max_width", "must be positive, got %d", a.MaxWidth)
	}
	return nil
}

func checkKey(a Action, l Limits) error {
	k := a.Kind
	if _, err := keysym.ParseChord(a.Keys); err != nil {
		return &Error{Kind: k, Field: "keys", Msg: err.Error()}
	}
	if a.Repeat < 0 || a.Repeat > l.MaxRepeat {
		return errorf(k, "repeat", "must be between 1 and %d, got %d", l.MaxRepeat, a.Repeat)
	}
	return nil
}

func checkKeyName(a Action, _ Limits) error {
	if _, err := keysym.Lookup(a.Key); err != nil {
		return &Error{Kind: a.Kind, Field: "key", Msg: err.Error()}
	}
	return nil
}

func checkType(a Action, l Limits) error {
	k := a.Kind
	if !utf8.ValidString(a.Text) {
		return errorf(k, "text", "is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(a.Text); n > l.MaxText {
		return errorf(k, "text", "has %d characters; the limit is %d", n, l.MaxText)
	}
	for i, r := range a.Text {
		if _, err := keysym.ForRune(r); err != nil {
			return errorf(k, "text", "character %U at byte %d cannot be typed: %v", r, i, err)
		}
	}
	if a.DelayMS < 0 || a.DelayMS > l.MaxDelayMS {
		return errorf(k, "delay_ms", "must be between 0 and %d, got %d", l.MaxDelayMS, a.DelayMS)
	}
	return nil
}

func checkTypeSecret(a Action, l Limits) error {
	if !vault.ValidName(a.Secret) {
		return errorf(a.Kind, "secret", "%q is no secret name (a letter or _, then letters, digits and _)", a.Secret)
	}
	if a.DelayMS < 0 || a.DelayMS > l.MaxDelayMS {
		return errorf(a.Kind, "delay_ms", "must be between 0 and %d, got %d", l.MaxDelayMS, a.DelayMS)
	}
	return nil
}

func checkMouseMove(a Action, l Limits) error {
	k := a.Kind
	abs := a.X != nil || a.Y != nil || a.Target != nil
	rel := a.DX != nil || a.DY != nil
	switch {
	case abs && rel:
		return errorf(k, "", "give x and y (absolute) or dx and dy (relative), not both")
	case abs:
		return checkPoint(k, a.X, a.Y, l)
	case rel:
		if err := checkDelta(k, "dx", a.DX, l.Width); err != nil {
			return err
		}
		return checkDelta(k, "dy", a.DY, l.Height)
	}
	return errorf(k, "", "needs x and y, or dx and dy")
}

func checkClick(a Action, l Limits) error {
	k := a.Kind
	if err := checkOptionalPoint(k, a.X, a.Y, l); err != nil {
		return err
	}
	if err := checkButton(k, a.Button); err != nil {
		return err
	}
	if a.Count < 0 || a.Count > 3 {
		return errorf(k, "count", "must be 1, 2 or 3, got %d", a.Count)
	}
	return checkModifiers(k, a.Keys)
}

func checkButtonOf(a Action, _ Limits) error { return checkButton(a.Kind, a.Button) }

func checkDrag(a Action, l Limits) error {
	k := a.Kind
	if len(a.Path) < 2 {
		return errorf(k, "path", "needs at least two points, got %d", len(a.Path))
	}
	if len(a.Path) > l.MaxPath {
		return errorf(k, "path", "has %d points; the limit is %d", len(a.Path), l.MaxPath)
	}
	for i, p := range a.Path {
		if !onScreen(p.X, p.Y, l) {
			return errorf(k, fmt.Sprintf("path[%d]", i), "(%d,%d) is outside the %dx%d screen", p.X, p.Y, l.Width, l.Height)
		}
	}
	return checkButton(k, a.Button)
}

func checkScroll(a Action, l Limits) error {
	k := a.Kind
	if err := checkOptionalPoint(k, a.X, a.Y, l); err != nil {
		return err
	}
	if a.DX == nil && a.DY == nil {
		return errorf(k, "", "needs dx or dy (wheel clicks; positive dy scrolls down)")
	}
	for _, f := range []struct {
		name string
		v    *int
	}{{"dx", a.DX}, {"dy", a.DY}} {
		if f.v != nil && (*f.v > l.MaxScroll || *f.v < -l.MaxScroll) {
			return errorf(k, f.name, "must be between -%d and %d clicks, got %d", l.MaxScroll, l.MaxScroll, *f.v)
		}
	}
	return checkModifiers(k, a.Keys)
}

func checkWait(a Action, l Limits) error {
	k := a.Kind
	if a.MS < 0 || a.MS > l.MaxWaitMS {
		return errorf(k, "ms", "must be between 0 and %d, got %d", l.MaxWaitMS, a.MS)
	}
	if a.File != "" && a.Until != UntilFile {
		return errorf(k, "file", "(or path) is only for until: file")
	}
	switch a.Until {
	case "":
		if a.Title != "" || a.StableMS != 0 {
			return errorf(k, "until", "title and stable_ms need until")
		}
	case UntilStable:
		return checkStableMS(a, l)
	case UntilWindow:
		if a.Title == "" {
			return errorf(k, "title", "required with until: window")
		}
	case UntilChange:
	case UntilFile:
		if a.File == "" {
			return errorf(k, "file", "required with until: file (a path below the home, e.g. ~/Documents/out.ods)")
		}
		if a.Title != "" {
			return errorf(k, "title", "only with until: window")
		}
		if _, err := HomeRel(a.File); err != nil {
			return errorf(k, "file", "%v", err)
		}
		return checkStableMS(a, l)
	default:
		return errorf(k, "until", "unknown condition %q; known: stable, window, change, file", a.Until)
	}
	return nil
}

func checkStableMS(a Action, l Limits) error {
	if a.StableMS < 0 || a.StableMS > l.MaxWaitMS {
		return errorf(a.Kind, "stable_ms", "must be between 0 and %d, got %d", l.MaxWaitMS, a.StableMS)
	}
	return nil
}

// HomeRel turns the file of a wait until file (~/a/b, below the home)
// into its slash-separated path relative to the home: no "..", no "."
// or empty segment, not the home itself.
func HomeRel(p string) (string, error) {
	rel, ok := strings.CutPrefix(p, "~/")
	if !ok {
		return "", fmt.Errorf("%q: want a path below the home, written ~/…", p)
	}
	if rel == "" || strings.ContainsRune(rel, 0) || strings.Contains(rel, "\\") {
		return "", fmt.Errorf("%q: want a file below the home, written ~/…", p)
	}
	for _, seg := range strings.Split(rel, "/") {
		switch seg {
		case "..":
			return "", fmt.Errorf("%q leaves the home (..)", p)
		case "", ".":
			return "", fmt.Errorf("%q: empty or . segment", p)
		}
	}
	return rel, nil
}

func onScreen(x, y int, l Limits) bool {
	return x >= 0 && y >= 0 && x < l.Width && y < l.Height
}

func checkPoint(k Kind, x, y *int, l Limits) error {
	if x == nil {
		return errorf(k, "x", "required with y")
	}
	if y == nil {
		return errorf(k, "y", "required with x")
	}
	if !onScreen(*x, *y, l) {
		return errorf(k, "", "(%d,%d) is outside the %dx%d screen", *x, *y, l.Width, l.Height)
	}
	return nil
}

func checkOptionalPoint(k Kind, x, y *int, l Limits) error {
	if x == nil && y == nil {
		return nil
	}
	return checkPoint(k, x, y, l)
}

func checkDelta(k Kind, field string, v *int, limit int) error {
	if v != nil && (*v > limit || *v < -limit) {
		return errorf(k, field, "%d is larger than the screen", *v)
	}
	return nil
}

func checkButton(k Kind, b Button) error {
	if b.Number() == 0 {
		return errorf(k, "button", "unknown button %q; known: left, middle, right, back, forward", b)
	}
	return nil
}

func checkModifiers(k Kind, keys string) error {
	if keys == "" {
		return nil
	}
	syms, err := keysym.ParseChord(keys)
	if err != nil {
		return &Error{Kind: k, Field: "keys", Msg: err.Error()}
	}
	for _, s := range syms {
		if !keysym.IsModifier(s) {
			return errorf(k, "keys", "%q is not a modifier; click and scroll hold modifiers only", keysym.Name(s))
		}
	}
	return nil
}

// checkTarget checks an action's target and mark: a valid selector, a
// positive mark, and no more than one way of saying where. A mark is
// resolved by the runtime before validation, so x and y beside it are its
// resolution, not a second place.
func checkTarget(a Action) error {
	k := a.Kind
	if a.Mark < 0 {
		return errorf(k, "mark", "must be a positive mark number, got %d", a.Mark)
	}
	if a.Mark > 0 && a.X == nil {
		return errorf(k, "mark", "mark %d was not resolved: marks name the numbered boxes of the screenshot a model is shown (--marks)", a.Mark)
	}
	if a.Target == nil {
		return nil
	}
	if a.X != nil || a.Y != nil || a.DX != nil && k == MouseMove {
		return errorf(k, "target", "give a target or a position, not both")
	}
	if a.Mark > 0 {
		return errorf(k, "target", "give a target or a mark, not both")
	}
	if err := a.Target.Check(); err != nil {
		return errorf(k, "target", "%v", err)
	}
	return nil
}

// IsInvalid reports whether err is a validation error.
func IsInvalid(err error) bool { return errors.Is(err, ErrInvalid) }
