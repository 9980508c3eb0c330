package observe

import (
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/action"
)

func frameWith(w, h int, dots ...action.Point) *Frame {
	pix := make([]byte, 4*w*h)
	for _, p := range dots {
		pix[4*(p.Y*w+p.X)+1] = 255
	}
	return &Frame{Width: w, Height: h, Pix: pix}
}

func TestChangedRect(t *testing.T) {
	for _, c := range []struct {
		name          string
		a, b          *Frame
		want          action.Rect
		changed, same bool
	}{
		{"equal", frameWith(8, 6), frameWith(8, 6), action.Rect{}, false, true},
		{"one pixel", frameWith(8, 6), frameWith(8, 6, action.Point{X: 3, Y: 2}), action.Rect{3, 2, 4, 3}, true, true},
		{"two corners", frameWith(8, 6, action.Point{X: 0, Y: 0}), frameWith(8, 6, action.Point{X: 7, Y: 5}), action.Rect{0, 0, 8, 6}, true, true},
		{"a column", frameWith(8, 6), frameWith(8, 6, action.Point{X: 5, Y: 1}, action.Point{X: 5, Y: 4}), action.Rect{5, 1, 6, 5}, true, true},
		{"sizes differ", frameWith(8, 6), frameWith(4, 4), action.Rect{0, 0, 4, 4}, true, false},
		{"no earlier frame", nil, frameWith(4, 4), action.Rect{}, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, changed, ok := ChangedRect(c.a, c.b)
			if r != c.want || changed != c.changed || ok != c.same {
				t.Errorf("ChangedRect = %v, %v, %v; want %v, %v, %v", r, changed, ok, c.want, c.changed, c.same)
			}
		})
	}
}

func TestInterventionString(t *testing.T) {
	iv := &Intervention{By: "a person at the live page", DurationMS: 4200,
		Actions: []action.Action{{Kind: action.Type, Text: "héllo"}, {Kind: action.Click, X: action.Int(10), Y: action.Int(20)}}, More: 1,
		ScreenChanged: true, Changed: &action.Rect{1, 2, 30, 40}}
	got := iv.String()
	for _, want := range []string{"a person at the live page took control for 4.2s", "performed 3 actions", `type "héllo"`, "click 10,20", "and 1 more", "(1,2)-(30,40)"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	none := (&Intervention{DurationMS: 1000}).String()
	if !strings.Contains(none, "without acting") || !strings.Contains(none, "as you last saw it") {
		t.Errorf("%q", none)
	}
}
