package observe

import (
	"fmt"
	"image"
	"image/color"
	"strconv"

	"github.com/codegirl-games/agentbox/action"
	"golang.org/x/image/draw"
	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Mark is one numbered box drawn on the screenshot a model is shown
// (set-of-marks prompting): the interactive element it surrounds. A model
// may answer `{"action": "click", "mark": 7}`; the mark resolves to the
// centre of the element's bounds.
type Mark struct {
	N      int         `json:"n"`
	ID     string      `json:"id"`
	Role   string      `json:"role"`
	Name   string      `json:"name,omitempty"`
	Bounds action.Rect `json:"bounds"`
}

// Center is the middle of the mark's box.
func (m Mark) Center() action.Point {
	return action.Point{X: m.Bounds[0] + m.Bounds.Dx()/2, Y: m.Bounds[1] + m.Bounds.Dy()/2}
}

// MaxMarks bounds the marks of one screenshot: more numbers than this
// hide the screen rather than explain it.
const MaxMarks = 200

// interactiveRoles are the roles a person acts on.
var interactiveRoles = map[string]bool{
	"push button": true, "toggle button": true, "check box": true, "radio button": true,
	"text": true, "entry": true, "password text": true, "combo box": true, "spin button": true,
	"slider": true, "scroll bar": false, "menu item": true, "check menu item": true,
	"radio menu item": true, "menu": true, "link": true, "list item": true, "page tab": true,
	"tree item": true, "table cell": false, "push button menu": true, "icon": false,
}

// Interactive reports whether e is something a person would click or type
// into: an interactive role (buttons, entries, menu items, tabs, …) or a
// focusable element, enabled, showing, with a place on the screen.
func Interactive(e *Element) bool {
	if e.Bounds == nil || e.Bounds.Dx() <= 0 || e.Bounds.Dy() <= 0 {
		return false
	}
	if e.Has("defunct") || !e.Has("showing") && !e.Has("visible") {
		return false
	}
	if len(e.States) > 0 && !e.Has("enabled") && !e.Has("sensitive") {
		return false
	}
	return interactiveRoles[NormRole(e.Role)] || e.Has("focusable") && NormRole(e.Role) != "frame" && NormRole(e.Role) != "dialog" && NormRole(e.Role) != "window"
}

// MarksOf numbers the interactive elements of t that lie on a screen of
// w×h, in reading order (at most MaxMarks); their boxes are clipped to
// the screen.
func MarksOf(t *Tree, w, h int) []Mark {
	if t == nil {
		return nil
	}
	var out []Mark
	for i := range t.Elements {
		e := &t.Elements[i]
		if !Interactive(e) {
			continue
		}
		b := *e.Bounds
		b = action.Rect{max(b[0], 0), max(b[1], 0), min(b[2], w), min(b[3], h)}
		if b.Dx() <= 0 || b.Dy() <= 0 {
			continue
		}
		if len(out) == MaxMarks {
			break
		}
		out = append(out, Mark{N: len(out) + 1, ID: e.ID, Role: e.Role, Name: clipText(e.Name, 80), Bounds: b})
	}
	return out
}

// FindMark returns the mark numbered n.
func FindMark(marks []Mark, n int) (Mark, error) {
	for _, m := range marks {
		if m.N == n {
			return m, nil
		}
	}
	if len(marks) == 0 {
		return Mark{}, fmt.Errorf("mark %d: the screenshot has no marks", n)
	}
	return Mark{}, fmt.Errorf("mark %d: the screenshot's marks are 1 to %d", n, len(marks))
}

// ResolveMark puts the centre of the mark a names into its X and Y (a
// click, mouse_move or scroll on a mark); an unknown mark is a validation
// error. Actions without a mark, or already resolved, are left alone.
func ResolveMark(a *action.Action, marks []Mark) error {
	if a.Mark <= 0 || a.X != nil || a.Y != nil {
		return nil
	}
	m, err := FindMark(marks, a.Mark)
	if err != nil {
		return &action.Error{Kind: a.Kind, Field: "mark", Msg: err.Error()}
	}
	c := m.Center()
	a.X, a.Y = &c.X, &c.Y
	return nil
}

// markColors cycle so that neighbouring boxes differ.
var markColors = []color.RGBA{
	{0xe6, 0x19, 0x4b, 0xff}, {0x3c, 0xb4, 0x4b, 0xff}, {0x43, 0x63, 0xd8, 0xff},
	{0xf5, 0x82, 0x31, 0xff}, {0x91, 0x1e, 0xb4, 0xff}, {0x00, 0x80, 0x80, 0xff},
}

// DrawMarks returns a copy of f with each mark's box outlined and its
// number on a filled label at the box's top-left corner. f is unchanged:
// the trace keeps the raw screenshot.
func DrawMarks(f *Frame, marks []Mark) *Frame {
	dst := image.NewRGBA(image.Rect(0, 0, f.Width, f.Height))
	copy(dst.Pix, f.Pix)
	face := basicfont.Face7x13
	for _, m := range marks {
		c := markColors[(m.N-1)%len(markColors)]
		r := image.Rect(m.Bounds[0], m.Bounds[1], m.Bounds[2], m.Bounds[3]).Intersect(dst.Rect)
		outline(dst, r, c, 2)
		label := strconv.Itoa(m.N)
		tw := font.MeasureString(face, label).Ceil()
		lx, ly := r.Min.X, r.Min.Y-15
		if ly < 0 {
			ly = r.Min.Y // inside the box when there is no room above
		}
		lr := image.Rect(lx, ly, lx+tw+4, ly+15).Intersect(dst.Rect)
		draw.Draw(dst, lr, &image.Uniform{c}, image.Point{}, draw.Src)
		d := font.Drawer{Dst: dst, Src: image.White, Face: face, Dot: fixed.P(lx+2, ly+12)}
		d.DrawString(label)
	}
	return &Frame{Width: f.Width, Height: f.Height, Pix: dst.Pix}
}

func outline(dst *image.RGBA, r image.Rectangle, c color.RGBA, w int) {
	u := &image.Uniform{c}
	for _, e := range []image.Rectangle{
		{r.Min, image.Pt(r.Max.X, r.Min.Y+w)},
		{image.Pt(r.Min.X, r.Max.Y-w), r.Max},
		{r.Min, image.Pt(r.Min.X+w, r.Max.Y)},
		{image.Pt(r.Max.X-w, r.Min.Y), r.Max},
	} {
		draw.Draw(dst, e.Intersect(r), u, image.Point{}, draw.Src)
	}
}
