package llm

import (
	"fmt"
	"strings"

	"github.com/codegirl-games/agentbox/observe"
)

// Bounds of the accessibility text a model is shown each step.
const (
	maxTreeLines = 300
	maxTreeChars = 24 << 10
)

// MarkTool describes the mark a model may click, for the adapters whose
// tool cannot say it (a custom tool beside the computer tool).
const MarkTool = "click_mark"

// MarkToolDescription is what the adapters tell a model about MarkTool.
const MarkToolDescription = "Click the centre of a numbered mark drawn on the latest screenshot (the marks are listed with it). " +
	"Use it instead of coordinates when the element you want has a mark."

// shownStates are the states worth a model's attention; others (showing,
// visible, sensitive, …) hold for nearly everything it is shown.
var shownStates = []string{"focused", "checked", "selected", "pressed", "expanded", "collapsed", "editable", "read_only", "indeterminate", "modal"}

// MarksText lists the marks of a screenshot: number, role and name (from
// the app: untrusted).
func MarksText(marks []observe.Mark) string {
	if len(marks) == 0 {
		return ""
	}
	var b strings.Builder
	for _, m := range marks {
		fmt.Fprintf(&b, "[%d] %s", m.N, m.Role)
		if m.Name != "" {
			fmt.Fprintf(&b, " %q", m.Name)
		}
		b.WriteString("\n")
	}
	return "\nThe screenshot has numbered marks on its interactive elements; to click one, give its number (mark) instead of coordinates: " +
		Untrusted("accessibility marks", strings.TrimSuffix(b.String(), "\n"))
}

// TreeText renders an accessibility tree compactly, one element a line
// indented by depth, with its bounds mapped by at (the model's
// coordinates; nil: the screen's) and the states that matter. It is
// bounded; what is left out is said.
func TreeText(t *observe.Tree, at func(x, y int) (int, int)) string {
	if t == nil {
		return ""
	}
	if len(t.Elements) == 0 {
		return "\nAccessibility tree: empty (" + t.Note + ")."
	}
	var b strings.Builder
	n := 0
	for i := range t.Elements {
		e := &t.Elements[i]
		if n == maxTreeLines || b.Len() > maxTreeChars {
			fmt.Fprintf(&b, "… %d more elements\n", len(t.Elements)-i)
			break
		}
		n++
		b.WriteString(strings.Repeat("  ", min(e.Depth, 20)))
		b.WriteString(e.Role)
		if e.Name != "" {
			fmt.Fprintf(&b, " %q", clipRunes(e.Name, 100))
		}
		if e.Text != "" && e.Text != e.Name {
			fmt.Fprintf(&b, " text=%q", clipRunes(e.Text, 200))
		}
		if e.Value != nil {
			fmt.Fprintf(&b, " value=%g", *e.Value)
		}
		if e.Bounds != nil {
			r := *e.Bounds
			if at != nil {
				r[0], r[1] = at(r[0], r[1])
				r[2], r[3] = at(r[2], r[3])
			}
			fmt.Fprintf(&b, " at (%d,%d) %dx%d", r[0], r[1], r.Dx(), r.Dy())
		}
		var st []string
		for _, s := range shownStates {
			if e.Has(s) {
				st = append(st, s)
			}
		}
		if len(e.States) > 0 && !e.Has("enabled") && !e.Has("sensitive") {
			st = append(st, "disabled")
		}
		if len(st) > 0 {
			b.WriteString(" (" + strings.Join(st, ", ") + ")")
		}
		fmt.Fprintf(&b, " id=%s\n", e.ID)
	}
	for _, c := range t.Cut {
		b.WriteString("cut: " + c + "\n")
	}
	return "\nAccessibility tree (what a screen reader sees; act on an element by its place, or with target {\"id\": …} where targets are offered): " +
		Untrusted("accessibility tree", strings.TrimSuffix(b.String(), "\n"))
}

// MapTree returns a copy of t with every element's bounds mapped by at
// (to a model's coordinates); nil stays nil.
func MapTree(t *observe.Tree, at func(x, y int) (int, int)) *observe.Tree {
	if t == nil {
		return nil
	}
	c := *t
	c.Elements = make([]observe.Element, len(t.Elements))
	for i, e := range t.Elements {
		if e.Bounds != nil {
			r := *e.Bounds
			r[0], r[1] = at(r[0], r[1])
			r[2], r[3] = at(r[2], r[3])
			e.Bounds = &r
		}
		c.Elements[i] = e
	}
	return &c
}
