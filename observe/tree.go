package observe

import (
	"fmt"
	"strings"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/plural"
	"github.com/codegirl-games/agentbox/internal/textcut"
)

// Tree is an accessibility tree as a screen reader sees it (AT-SPI):
// every application on the sandbox's accessibility bus and, below each,
// its windows and their elements. Elements are in pre-order (a parent
// before its children); each names its parent by index.
//
// A read is bounded in elements, depth and time; Cut says what was left
// out and why, so a partial tree never passes for a whole one. Note
// explains an empty tree (no application exposes one: an X toolkit
// without accessibility, such as Xaw's xcalc).
type Tree struct {
	Elements []Element `json:"elements"`
	// Apps counts the applications on the bus (each is an element of role
	// "application" at depth 0).
	Apps int      `json:"apps"`
	Cut  []string `json:"cut,omitempty"`
	Note string   `json:"note,omitempty"`
	// Hidden counts elements left out because they are not showing (a
	// closed menu's items), with everything below them.
	Hidden int `json:"hidden,omitempty"`
	// ElapsedUS is how long the read took; Calls how many D-Bus calls it
	// made.
	ElapsedUS int64 `json:"elapsed_us"`
	Calls     int   `json:"calls,omitempty"`
}

// Element is one node of the tree.
type Element struct {
	// ID names the element for as long as it exists (its application's
	// bus name and object path, shortened: "1.7/12"); a selector may use
	// it.
	ID string `json:"id"`
	// Parent is the index of the parent element, -1 for an application.
	Parent int `json:"parent"`
	Depth  int `json:"depth"`
	// Role is AT-SPI's role name: "push button", "text", "check box",
	// "dialog", "frame", "label", "menu item", …
	Role string `json:"role"`
	Name string `json:"name,omitempty"`
	// Text is the content of an element with text (an entry, a text
	// view), clipped to MaxElementText bytes.
	Text string `json:"text,omitempty"`
	// Value is the current value of a slider, spin button, progress bar.
	Value *float64 `json:"value,omitempty"`
	// States are AT-SPI's states that are set: "focused", "focusable",
	// "checked", "enabled", "sensitive", "showing", "visible", "editable",
	// "selected", "pressed", "expanded", …
	States []string `json:"states,omitempty"`
	// Bounds is where the element is on the screen, in screen pixels
	// [x0, y0, x1, y1), when it has a place.
	Bounds *action.Rect `json:"bounds,omitempty"`
	// Keys are the keyboard shortcuts that press it, as chords
	// ("alt+d" for a button labelled _Delete, "ctrl+Delete" for a menu
	// item's accelerator), read for buttons, menu items, check boxes and
	// links.
	Keys []string `json:"keys,omitempty"`
}

// MaxElementText bounds an element's name and text.
const MaxElementText = 4096

// Has reports whether the element has the named state.
func (e *Element) Has(state string) bool {
	for _, s := range e.States {
		if s == state {
			return true
		}
	}
	return false
}

// Center is the middle of the element's bounds.
func (e *Element) Center() (action.Point, bool) {
	if e.Bounds == nil || e.Bounds.Dx() <= 0 || e.Bounds.Dy() <= 0 {
		return action.Point{}, false
	}
	b := *e.Bounds
	return action.Point{X: b[0] + b.Dx()/2, Y: b[1] + b.Dy()/2}, true
}

// Describe renders an element for messages: `push button "OK" (1.7/12) at [10 20 90 50]`.
func (e *Element) Describe() string {
	s := e.Role
	if e.Name != "" {
		s += fmt.Sprintf(" %q", clipText(e.Name, 80))
	}
	s += " (" + e.ID + ")"
	if e.Bounds != nil {
		s += fmt.Sprintf(" at %v", *e.Bounds)
	}
	return s
}

func clipText(s string, n int) string { return textcut.Runes(s, n, "…") }

// TreeLimits bound one read of the tree.
type TreeLimits struct {
	MaxNodes  int `json:"max_nodes"`
	MaxDepth  int `json:"max_depth"`
	TimeoutMS int `json:"timeout_ms"`
}

// DefaultTreeLimits are the bounds of a read that does not say: a dialog
// has tens of elements, a large window hundreds.
var DefaultTreeLimits = TreeLimits{MaxNodes: 2000, MaxDepth: 40, TimeoutMS: 3000}

// The largest bounds a read may ask for.
const (
	MaxTreeNodes   = 20000
	MaxTreeDepth   = 200
	MaxTreeTimeout = 30000
)

// OrDefault fills zero fields from DefaultTreeLimits and clamps the rest
// to the largest bounds.
func (l TreeLimits) OrDefault() TreeLimits {
	if l.MaxNodes <= 0 {
		l.MaxNodes = DefaultTreeLimits.MaxNodes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultTreeLimits.MaxDepth
	}
	if l.TimeoutMS <= 0 {
		l.TimeoutMS = DefaultTreeLimits.TimeoutMS
	}
	l.MaxNodes = min(l.MaxNodes, MaxTreeNodes)
	l.MaxDepth = min(l.MaxDepth, MaxTreeDepth)
	l.TimeoutMS = min(l.TimeoutMS, MaxTreeTimeout)
	return l
}

// NormRole is the form roles are compared in: lower case, "_" and "-" as
// spaces ("push_button" and "Push Button" are "push button").
func NormRole(r string) string {
	return strings.NewReplacer("_", " ", "-", " ").Replace(strings.ToLower(strings.TrimSpace(r)))
}

// matcher is a compiled selector.
type matcher struct {
	sel      action.Selector
	name     func(string) bool
	ancestor *matcher
}

func compile(s action.Selector) (*matcher, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	return compileChecked(s), nil
}

func compileChecked(s action.Selector) *matcher {
	m := &matcher{sel: s}
	m.name, _ = action.TitleMatcher(s.Name)
	if s.Ancestor != nil {
		m.ancestor = compileChecked(*s.Ancestor)
	}
	return m
}

// self reports whether e matches the selector's own fields (not the
// ancestor).
func (m *matcher) self(e *Element) bool {
	if m.sel.ID != "" && e.ID != m.sel.ID {
		return false
	}
	if m.sel.Role != "" && NormRole(e.Role) != NormRole(m.sel.Role) {
		return false
	}
	return m.sel.Name == "" || m.name(e.Name)
}

func (m *matcher) matches(t *Tree, i int) bool {
	e := &t.Elements[i]
	if !m.self(e) {
		return false
	}
	if m.ancestor == nil {
		return true
	}
	for p := e.Parent; p >= 0 && p < len(t.Elements); p = t.Elements[p].Parent {
		if m.ancestor.matches(t, p) {
			return true
		}
	}
	return false
}

// FindAll returns the indices of the elements s matches, in reading
// order, ignoring Index.
func (t *Tree) FindAll(s action.Selector) ([]int, error) {
	m, err := compile(s)
	if err != nil {
		return nil, err
	}
	var out []int
	for i := range t.Elements {
		if m.matches(t, i) {
			out = append(out, i)
		}
	}
	return out, nil
}

// Find returns the one element s picks. Nothing matching, or several
// without an index, is an error that names the near misses: elements of
// the same role with other names, or of the same name with other roles,
// or the several matches with their places.
func (t *Tree) Find(s action.Selector) (*Element, error) {
	all, err := t.FindAll(s)
	if err != nil {
		return nil, err
	}
	switch {
	case s.Index != nil && *s.Index < len(all):
		return &t.Elements[all[*s.Index]], nil
	case s.Index != nil:
		verb := "match"
		if len(all) == 1 {
			verb = "matches"
		}
		return nil, fmt.Errorf("%v: index %d, but %s %s%s%s", s, *s.Index, plural.S(len(all), "element"), verb, t.list(all), t.cutNote())
	case len(all) == 1:
		return &t.Elements[all[0]], nil
	case len(all) > 1:
		return nil, fmt.Errorf("%v: %d elements match; add index (0 for the first) or an ancestor:%s", s, len(all), t.list(all))
	}
	return nil, fmt.Errorf("%v: no element matches%s%s", s, t.nearMisses(s), t.cutNote())
}

// Transient returns the cuts another read may not have: the read ran out
// of its time, or an application did not answer a call in time (a busy
// machine, an app busy in its main loop). What such a read lacks may be
// there; a check that does not hold on it may hold on the next read. The
// other cuts (size, depth, nodes, an element that is no table) come from
// the limits and the app, and a second read has them too.
func (t *Tree) Transient() []string {
	var out []string
	for _, c := range t.Cut {
		if strings.HasPrefix(c, "time:") || strings.Contains(c, " did not answer") {
			out = append(out, c)
		}
	}
	return out
}

// cutNote says that a read that found nothing was cut, and how.
func (t *Tree) cutNote() string {
	if len(t.Cut) == 0 {
		return ""
	}
	return "; the read was cut: " + strings.Join(t.Cut, "; ")
}

// maxListed bounds the elements an error lists.
const maxListed = 8

func (t *Tree) list(idx []int) string {
	var b strings.Builder
	for n, i := range idx {
		if n == maxListed {
			fmt.Fprintf(&b, "\n  … and %d more", len(idx)-n)
			break
		}
		b.WriteString("\n  " + t.Elements[i].Describe())
	}
	return b.String()
}

// nearMisses lists what almost matched s: the same role under other
// names, the same name under other roles, and, for a selector with an
// ancestor, the matches outside it.
func (t *Tree) nearMisses(s action.Selector) string {
	if len(t.Elements) == 0 {
		note := t.Note
		if note == "" {
			note = "the tree is empty"
		}
		return " (" + note + ")"
	}
	var near []int
	seen := map[int]bool{}
	add := func(sel action.Selector) {
		if sel.ID == "" && sel.Role == "" && sel.Name == "" {
			return
		}
		idx, err := t.FindAll(sel)
		if err != nil {
			return
		}
		for _, i := range idx {
			if !seen[i] {
				seen[i] = true
				near = append(near, i)
			}
		}
	}
	if s.Ancestor != nil {
		add(action.Selector{ID: s.ID, Role: s.Role, Name: s.Name})
	}
	if s.Role != "" && s.Name != "" {
		add(action.Selector{Role: s.Role})
		add(action.Selector{Name: s.Name})
		// A name that differs in case or spacing only.
		for i := range t.Elements {
			e := &t.Elements[i]
			if !seen[i] && strings.EqualFold(strings.TrimSpace(strings.ReplaceAll(e.Name, "_", "")), strings.TrimSpace(s.Name)) {
				seen[i] = true
				near = append(near, i)
			}
		}
	}
	if len(near) == 0 {
		roles := map[string]int{}
		var order []string
		for i := range t.Elements {
			r := t.Elements[i].Role
			if roles[r] == 0 {
				order = append(order, r)
			}
			roles[r]++
		}
		var parts []string
		for _, r := range order {
			parts = append(parts, fmt.Sprintf("%s ×%d", r, roles[r]))
		}
		return fmt.Sprintf("; the tree has %d elements: %s", len(t.Elements), strings.Join(parts, ", "))
	}
	return "; near misses:" + t.list(near)
}

// ResolvedOf describes an element for a result.
func ResolvedOf(e *Element) *action.Resolved {
	r := &action.Resolved{ID: e.ID, Role: e.Role, Name: clipText(e.Name, 200)}
	if e.Bounds != nil {
		b := *e.Bounds
		r.Bounds = &b
	}
	return r
}

// Matcher is a compiled selector, for matching many elements (a policy's
// rules against the element under a point).
type Matcher struct{ m *matcher }

// CompileSelector checks s and compiles it.
func CompileSelector(s action.Selector) (*Matcher, error) {
	m, err := compile(s)
	if err != nil {
		return nil, err
	}
	return &Matcher{m}, nil
}

// Match reports whether element i of t matches the selector (its own
// fields, and its ancestor if it names one); Index is ignored.
func (m *Matcher) Match(t *Tree, i int) bool {
	return i >= 0 && i < len(t.Elements) && m.m.matches(t, i)
}

// At returns the index of the element under the point p: the deepest
// element whose bounds hold p, the last in reading order among equals
// (drawn above its earlier siblings); -1 when none holds it.
func (t *Tree) At(p action.Point) int {
	best := -1
	for i := range t.Elements {
		e := &t.Elements[i]
		if e.Bounds == nil || e.Role == "application" {
			continue
		}
		b := *e.Bounds
		if p.X < b[0] || p.Y < b[1] || p.X >= b[2] || p.Y >= b[3] {
			continue
		}
		if best < 0 || e.Depth >= t.Elements[best].Depth {
			best = i
		}
	}
	return best
}

// Focused returns the indices of the elements with the keyboard focus
// (one per application at most, as AT-SPI reports it).
func (t *Tree) Focused() []int {
	var out []int
	for i := range t.Elements {
		if t.Elements[i].Has("focused") {
			out = append(out, i)
		}
	}
	return out
}
