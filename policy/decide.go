package policy

import (
	"slices"
	"strings"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/keysym"
	"github.com/codegirl-games/agentbox/observe"
)

// Subject is what the gate knows of an action at the moment it would run:
// where it acts, on which elements, whether it presses them.
type Subject struct {
	Action action.Action
	// Press says the action presses what it acts on (a click, a mouse
	// button, a drag's ends, the keyboard's activation of the focused
	// element).
	Press bool
	// Points are where it acts on the screen: the pointer's, or the
	// centre of the focused element a key presses.
	Points []action.Point
	// Tree is the accessibility tree read for it; nil without one.
	Tree *observe.Tree
	// Elements are the indices in Tree of the elements it acts on: under
	// its points, its resolved target, or the focused one for keys.
	Elements []int
	// TreeFailed says a tree was wanted and could not be read: a target
	// of an ask or deny rule is then taken to match (the gate fails
	// closed), a target of an allow rule not.
	TreeFailed bool
}

// activates reports whether a chord (or a key name) ends in a key that
// presses the focused element: Return, KP_Enter, space, KP_Space, with
// or without modifiers (a chord keysym cannot read presses nothing).
func activates(chord string) bool {
	syms, err := keysym.ParseChord(chord)
	if err != nil || len(syms) == 0 {
		return false
	}
	switch syms[len(syms)-1] {
	case 0x20, 0xff0d, 0xff8d, 0xff80:
		return true
	}
	return false
}

// SubjectOf builds the subject of a: cursor is where the pointer is (for
// a click without a point); tree is the tree read for it (nil: none).
func SubjectOf(a action.Action, cursor action.Point, tree *observe.Tree) Subject {
	s := Subject{Action: a, Tree: tree}
	pointAt := func(p action.Point) {
		s.Points = append(s.Points, p)
		if tree != nil {
			if i := tree.At(p); i >= 0 {
				s.Elements = append(s.Elements, i)
			}
		}
	}
	focused := func() {
		if tree == nil {
			return
		}
		for _, i := range tree.Focused() {
			s.Elements = append(s.Elements, i)
			if c, ok := tree.Elements[i].Center(); ok {
				s.Points = append(s.Points, c)
			}
		}
	}
	target := func() bool {
		if a.Target == nil || tree == nil {
			return false
		}
		idx, err := tree.FindAll(*a.Target)
		if err != nil || len(idx) == 0 {
			return false
		}
		if a.Target.Index != nil && *a.Target.Index < len(idx) {
			idx = idx[*a.Target.Index : *a.Target.Index+1]
		}
		for _, i := range idx {
			s.Elements = append(s.Elements, i)
			if c, ok := tree.Elements[i].Center(); ok {
				s.Points = append(s.Points, c)
			}
		}
		return true
	}
	switch a.Kind {
	case action.Click, action.MouseDown, action.MouseUp, action.MouseMove, action.Scroll:
		s.Press = a.Kind == action.Click || a.Kind == action.MouseDown || a.Kind == action.MouseUp
		switch {
		case a.Target != nil:
			if !target() && a.X != nil && a.Y != nil {
				pointAt(action.Point{X: *a.X, Y: *a.Y})
			}
		case a.X != nil && a.Y != nil:
			pointAt(action.Point{X: *a.X, Y: *a.Y})
		case a.Kind == action.MouseMove && (a.DX != nil || a.DY != nil):
			pointAt(action.Point{X: cursor.X + deref(a.DX), Y: cursor.Y + deref(a.DY)})
		default:
			pointAt(cursor)
		}
	case action.Drag:
		s.Press = true
		if len(a.Path) > 0 {
			pointAt(a.Path[0])
			if len(a.Path) > 1 {
				pointAt(a.Path[len(a.Path)-1])
			}
		}
	case action.Key:
		s.Press = activates(a.Keys)
		focused()
		if shortcut(&s, a.Keys, false) {
			s.Press = true
		}
	case action.KeyDown, action.KeyUp:
		s.Press = activates(a.Key)
		focused()
		// Which modifiers are held is not known here: a key pressed down
		// that ends a shortcut is taken as that shortcut (asks more, never
		// less).
		if a.Kind == action.KeyDown && shortcut(&s, a.Key, true) {
			s.Press = true
		}
	case action.Type:
		s.Press = strings.ContainsAny(a.Text, "\n\r ")
		if !target() {
			focused()
		}
	}
	return s
}

// shortcut adds to s the elements a keyboard shortcut presses (an
// element's Keys: a button's mnemonic, a menu item's accelerator) when
// chord is one of them — or, with lastOnly, ends in the same key.
func shortcut(s *Subject, chord string, lastOnly bool) bool {
	if s.Tree == nil {
		return false
	}
	want, err := keysym.ParseChord(chord)
	if err != nil || len(want) == 0 {
		return false
	}
	found := false
	for i := range s.Tree.Elements {
		e := &s.Tree.Elements[i]
		for _, k := range e.Keys {
			got, err := keysym.ParseChord(k)
			if err != nil || len(got) == 0 {
				continue
			}
			if (lastOnly && fold(got[len(got)-1]) == fold(want[len(want)-1])) || (!lastOnly && sameChord(got, want)) {
				s.Elements = append(s.Elements, i)
				if c, ok := e.Center(); ok {
					s.Points = append(s.Points, c)
				}
				found = true
				break
			}
		}
	}
	return found
}

// fold maps an upper-case Latin letter's keysym to its lower case: a
// shortcut names the key, not the case.
func fold(k keysym.Keysym) keysym.Keysym {
	if k >= 'A' && k <= 'Z' {
		return k + 'a' - 'A'
	}
	return k
}

// sameChord reports whether two chords press the same keys, in any
// order of modifiers.
func sameChord(a, b []keysym.Keysym) bool {
	if len(a) != len(b) {
		return false
	}
	fa, fb := make([]keysym.Keysym, len(a)), make([]keysym.Keysym, len(b))
	for i := range a {
		fa[i], fb[i] = fold(a[i]), fold(b[i])
	}
	slices.Sort(fa)
	slices.Sort(fb)
	return slices.Equal(fa, fb)
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// Verdict is the policy's decision on a subject.
type Verdict struct {
	// Rule is the rule that matched; nil: the default decided.
	Rule     *Rule
	Decision Decision
	// Element is the element the rule's target matched (nil without one).
	Element *observe.Element
}

// RuleName names the rule that decided ("default" for the default).
func (v Verdict) RuleName() string {
	if v.Rule == nil {
		return "default"
	}
	return v.Rule.Name
}

// Sensitive says the rule that decided is sensitive.
func (v Verdict) Sensitive() bool { return v.Rule != nil && v.Rule.Sensitive }

// Decide returns the decision of the first rule that matches s, or the
// default.
func (p *Policy) Decide(s Subject) Verdict {
	for i := range p.Rules {
		r := &p.Rules[i]
		if el, ok := r.match(s); ok {
			return Verdict{Rule: r, Decision: r.Decision, Element: el}
		}
	}
	return Verdict{Decision: p.Default}
}

// match reports whether r matches s, with the element its target matched.
func (r *Rule) match(s Subject) (*observe.Element, bool) {
	a := s.Action
	if len(r.Kinds) > 0 && !slices.Contains(r.Kinds, string(a.Kind)) &&
		!(s.Press && (slices.Contains(r.Kinds, Press) || slices.Contains(r.Kinds, string(action.Click)))) {
		return nil, false
	}
	if r.text != nil && (a.Kind != action.Type || !r.text(a.Text)) {
		return nil, false
	}
	if r.Region != nil && !slices.ContainsFunc(s.Points, func(p action.Point) bool { return inside(p, *r.Region) }) {
		return nil, false
	}
	if r.target == nil {
		return nil, true
	}
	if s.Tree == nil {
		return nil, s.TreeFailed && r.Decision != Allow
	}
	// The element, or one of its ancestors (a label inside the button).
	for _, i := range s.Elements {
		for e := i; e >= 0 && e < len(s.Tree.Elements); e = s.Tree.Elements[e].Parent {
			if r.target.Match(s.Tree, e) {
				return &s.Tree.Elements[e], true
			}
		}
	}
	return nil, false
}

func inside(p action.Point, r action.Rect) bool {
	return p.X >= r[0] && p.Y >= r[1] && p.X < r[2] && p.Y < r[3]
}
