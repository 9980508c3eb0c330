package observe

import (
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/action"
)

// dialogTree is the tree of zenity --entry as the guest reads it (the
// shape recorded by guest/atspi's test of the real dialog).
func dialogTree() *Tree {
	r := func(x0, y0, x1, y1 int) *action.Rect { return &action.Rect{x0, y0, x1, y1} }
	show := []string{"enabled", "sensitive", "showing", "visible"}
	focus := []string{"enabled", "focusable", "sensitive", "showing", "visible"}
	return &Tree{Apps: 1, Elements: []Element{
		{ID: "1.2/root", Parent: -1, Role: "application", Name: "zenity"},
		{ID: "1.2/1", Parent: 0, Depth: 1, Role: "dialog", Name: "Name please", Bounds: r(303, 240, 499, 384), States: show},
		{ID: "1.2/5", Parent: 1, Depth: 2, Role: "filler", Bounds: r(317, 273, 485, 330), States: show},
		{ID: "1.2/7", Parent: 2, Depth: 3, Role: "label", Name: "Your name:", Bounds: r(317, 273, 485, 290), States: show},
		{ID: "1.2/8", Parent: 2, Depth: 3, Role: "text", Text: "Ada", Bounds: r(317, 296, 485, 330), States: append([]string{"editable", "focused"}, focus...)},
		{ID: "1.2/6", Parent: 1, Depth: 2, Role: "filler", Bounds: r(311, 338, 491, 372), States: show},
		{ID: "1.2/9", Parent: 5, Depth: 3, Role: "push button", Name: "Cancel", Bounds: r(315, 338, 401, 372), States: focus},
		{ID: "1.2/10", Parent: 5, Depth: 3, Role: "push button", Name: "OK", Bounds: r(405, 338, 491, 372), States: focus},
		{ID: "1.3/root", Parent: -1, Role: "application", Name: "other"},
		{ID: "1.3/4", Parent: 8, Depth: 1, Role: "push button", Name: "OK", Bounds: r(0, 0, 10, 10), States: focus},
	}}
}

func idx(i int) *int { return &i }

func TestTreeFind(t *testing.T) {
	tr := dialogTree()
	tests := []struct {
		sel     action.Selector
		want    string // the ID found
		wantErr string // a part of the error
	}{
		{sel: action.Selector{Role: "push button", Name: "Cancel"}, want: "1.2/9"},
		{sel: action.Selector{Role: "Push_Button", Name: "Canc*"}, want: "1.2/9"},
		{sel: action.Selector{Role: "push button", Name: "/^C.n/"}, want: "1.2/9"},
		{sel: action.Selector{ID: "1.2/8"}, want: "1.2/8"},
		{sel: action.Selector{Role: "text"}, want: "1.2/8"},
		{sel: action.Selector{Role: "push button", Name: "OK", Ancestor: &action.Selector{Role: "dialog", Name: "Name*"}}, want: "1.2/10"},
		{sel: action.Selector{Role: "push button", Name: "OK", Index: idx(1)}, want: "1.3/4"},
		{sel: action.Selector{Role: "push button", Name: "OK"}, wantErr: "2 elements match; add index"},
		{sel: action.Selector{Role: "push button", Name: "OK", Index: idx(2)}, wantErr: "index 2, but 2 elements match"},
		{sel: action.Selector{Role: "push button", Name: "Ok"}, wantErr: `near misses:`},
		{sel: action.Selector{Role: "check box"}, wantErr: "the tree has 10 elements: application ×2"},
		{sel: action.Selector{Role: "push button", Name: "Help", Ancestor: &action.Selector{Role: "dialog"}}, wantErr: `push button "Cancel"`},
		{sel: action.Selector{}, wantErr: "needs id, role or name"},
		{sel: action.Selector{Name: "/(/"}, wantErr: "bad regular expression"},
	}
	for _, tt := range tests {
		e, err := tr.Find(tt.sel)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Find(%v) = %v, %v; want an error with %q", tt.sel, e, err, tt.wantErr)
			}
		case err != nil:
			t.Errorf("Find(%v): %v", tt.sel, err)
		case e.ID != tt.want:
			t.Errorf("Find(%v) = %s, want %s", tt.sel, e.ID, tt.want)
		}
	}
	// Near misses name the element that almost matched, by name and role.
	_, err := tr.Find(action.Selector{Role: "push button", Name: "Ok"})
	if !strings.Contains(err.Error(), `push button "OK" (1.2/10)`) {
		t.Errorf("near misses do not name the OK button:\n%v", err)
	}
	// An empty tree says why it is empty.
	empty := &Tree{Note: "no application exposes an accessibility tree"}
	if _, err := empty.Find(action.Selector{Role: "push button"}); err == nil || !strings.Contains(err.Error(), "no application exposes") {
		t.Errorf("empty tree: %v", err)
	}
}

func TestMarks(t *testing.T) {
	tr := dialogTree()
	marks := MarksOf(tr, 640, 480)
	var got []string
	for _, m := range marks {
		got = append(got, m.Role+" "+m.Name)
	}
	// The entry and the three buttons; not the labels, fillers or dialog.
	want := []string{"text ", "push button Cancel", "push button OK", "push button OK"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("marks = %q, want %q", got, want)
	}
	a := action.Action{Kind: action.Click, Mark: 3}
	if err := ResolveMark(&a, marks); err != nil {
		t.Fatal(err)
	}
	if *a.X != 448 || *a.Y != 355 { // the OK button's centre
		t.Errorf("mark 3 resolved to %d,%d, want 448,355", *a.X, *a.Y)
	}
	if err := action.Validate(a, action.DefaultLimits(640, 480)); err != nil {
		t.Errorf("a resolved mark is invalid: %v", err)
	}
	if err := ResolveMark(&action.Action{Kind: action.Click, Mark: 9}, marks); err == nil || !action.IsInvalid(err) || !strings.Contains(err.Error(), "1 to 4") {
		t.Errorf("unknown mark: %v", err)
	}

	// Drawing marks leaves the frame alone and outlines each box.
	f := &Frame{Width: 640, Height: 480, Pix: make([]byte, 640*480*4)}
	for i := 3; i < len(f.Pix); i += 4 {
		f.Pix[i] = 0xff
	}
	m := DrawMarks(f, marks)
	for i, b := range f.Pix {
		if i%4 != 3 && b != 0 {
			t.Fatalf("DrawMarks changed the frame it was given at byte %d", i)
		}
	}
	ok := marks[2].Bounds
	if r, g, b := m.At(ok[0], (ok[1]+ok[3])/2); r == 0 && g == 0 && b == 0 {
		t.Errorf("no outline on the OK button's left edge")
	}
	if r, g, b := m.At((ok[0]+ok[2])/2, (ok[1]+ok[3])/2); r != 0 || g != 0 || b != 0 {
		t.Errorf("the OK button's middle was painted over")
	}
}

// TestTreeTransientCuts: the cuts another read may not have (time, an
// application that did not answer) are told from those of the limits,
// and a selector that matches nothing in a cut read says the cut.
func TestTreeTransientCuts(t *testing.T) {
	for _, c := range []struct {
		cut       []string
		transient int
	}{
		{nil, 0},
		{[]string{"time: the read stopped at its 3000ms deadline; 7 references to elements at depth 9 and below were not followed"}, 1},
		{[]string{"application :1.3 did not answer within 1s; what it did not answer is missing"}, 1},
		{[]string{"nodes: 2000 elements were read; 4 more references to elements were not followed (max_nodes)", "depth: elements below depth 40 were not read (max_depth)"}, 0},
		{[]string{`descendants: table "" manages its descendants and is no table: its children were not read`, "time: the read stopped"}, 1},
	} {
		tr := &Tree{Cut: c.cut, Elements: []Element{{ID: "1.2/0", Parent: -1, Role: "application"}}}
		if got := tr.Transient(); len(got) != c.transient {
			t.Errorf("%q: transient %q, want %d", c.cut, got, c.transient)
		}
		_, err := tr.Find(action.Selector{Role: "push button"})
		if said := err != nil && strings.Contains(err.Error(), "; the read was cut: "); said != (len(c.cut) > 0) {
			t.Errorf("%q: %v", c.cut, err)
		}
	}
}
