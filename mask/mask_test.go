package mask

import (
	"fmt"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
)

func TestHasCardNumber(t *testing.T) {
	for _, c := range []struct {
		s    string
		want bool
	}{
		{"4111111111111111", true},             // a test Visa number
		{"card: 4111 1111 1111 1111 ok", true}, // groups with spaces
		{"5555-5555-5555-4444", true},          // dashes
		{"378282246310005", true},              // 15 digits (Amex test number)
		{"4111111111111112", false},            // fails Luhn
		{"123456789012", false},                // 12 digits
		{"order 2026 12 02 total 42", false},   // digits apart
		{"", false},
		{"x4111111111111111x", true},
		{"phone +44 20 7946 0018", false},
	} {
		if got := HasCardNumber(c.s); got != c.want {
			t.Errorf("HasCardNumber(%q) = %v, want %v", c.s, got, c.want)
		}
	}
}

func rect(x0, y0, x1, y1 int) *action.Rect { r := action.Rect{x0, y0, x1, y1}; return &r }

func tree() *observe.Tree {
	return &observe.Tree{Elements: []observe.Element{
		{ID: "1.1/0", Parent: -1, Role: "application", Name: "app", Bounds: rect(0, 0, 640, 480)},
		{ID: "1.1/1", Parent: 0, Depth: 1, Role: "frame", Name: "Sign in", Bounds: rect(0, 0, 640, 480)},
		{ID: "1.1/2", Parent: 1, Depth: 2, Role: "password text", Name: "Password", Bounds: rect(10, 10, 110, 30)},
		{ID: "1.1/3", Parent: 1, Depth: 2, Role: "text", Name: "Notes", Text: "pay with 4111 1111 1111 1111", Bounds: rect(10, 40, 310, 60)},
		{ID: "1.1/4", Parent: 1, Depth: 2, Role: "text", Name: "One-time code", Bounds: rect(10, 70, 110, 90)},
		{ID: "1.1/5", Parent: 1, Depth: 2, Role: "label", Name: "token s3cr3t-value here", Bounds: rect(10, 100, 210, 120)},
		{ID: "1.1/6", Parent: 1, Depth: 2, Role: "push button", Name: "Balance", Bounds: rect(400, 10, 500, 30)},
		{ID: "1.1/7", Parent: 1, Depth: 2, Role: "label", Name: "Plain", Bounds: rect(400, 40, 500, 60)},
		{ID: "1.1/8", Parent: 1, Depth: 2, Role: "label", Name: "no bounds"},
	}}
}

func TestRects(t *testing.T) {
	bal, err := NewRule("balance", &action.Selector{Role: "push button", Name: "Balance"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	corner, err := NewRule("corner", nil, rect(600, 440, 700, 500)) // clipped to the screen
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		m    *Masker
		tree *observe.Tree
		want []Area
	}{
		{"nil masker", nil, tree(), nil},
		{"inactive", New(nil, nil, false), tree(), nil},
		{"auto", New(nil, nil, true), tree(), []Area{
			{Rect: action.Rect{10, 10, 110, 30}, Why: WhyPassword},
			{Rect: action.Rect{10, 40, 310, 60}, Why: WhyCard},
			{Rect: action.Rect{10, 70, 110, 90}, Why: WhyCode},
		}},
		{"vault value only", New(nil, []string{"s3cr3t-value", "ab"}, false), tree(), []Area{
			{Rect: action.Rect{10, 100, 210, 120}, Why: WhySecret},
		}},
		{"rules", New([]Rule{bal, corner}, nil, false), tree(), []Area{
			{Rect: action.Rect{600, 440, 640, 480}, Why: WhyRule, Rule: "corner"},
			{Rect: action.Rect{400, 10, 500, 30}, Why: WhyRule, Rule: "balance"},
		}},
		{"no tree: regions only", New([]Rule{bal, corner}, []string{"s3cr3t-value"}, true), nil, []Area{
			{Rect: action.Rect{600, 440, 640, 480}, Why: WhyRule, Rule: "corner"},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.m.Rects(c.tree, 640, 480)
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("Rects =\n%v\nwant\n%v", got, c.want)
			}
		})
	}
}

func TestNewRule(t *testing.T) {
	for _, c := range []struct {
		name   string
		target *action.Selector
		region *action.Rect
	}{
		{"neither", nil, nil},
		{"both", &action.Selector{Role: "text"}, rect(0, 0, 1, 1)},
		{"empty region", nil, rect(10, 10, 10, 20)},
		{"negative region", nil, rect(-1, 0, 10, 10)},
		{"bad regex", &action.Selector{Name: "/(/"}, nil},
	} {
		if _, err := NewRule(c.name, c.target, c.region); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

func frame(w, h int) *observe.Frame {
	pix := make([]byte, 4*w*h)
	for i := range pix {
		pix[i] = byte(i)
	}
	return &observe.Frame{Width: w, Height: h, Pix: pix, Hash: 7}
}

func TestPaint(t *testing.T) {
	f := frame(64, 48)
	orig := append([]byte(nil), f.Pix...)
	if Paint(f, nil) != f {
		t.Error("no areas: not the same frame")
	}
	p := Paint(f, []Area{{Rect: action.Rect{10, 5, 20, 9}}, {Rect: action.Rect{60, 40, 100, 100}}})
	if string(f.Pix) != string(orig) || f.Hash != 7 {
		t.Fatal("Paint changed its input")
	}
	if p.Hash == f.Hash || p.Width != 64 || p.Height != 48 {
		t.Errorf("painted frame %dx%d hash %x", p.Width, p.Height, p.Hash)
	}
	in := func(x, y int) bool {
		return (x >= 10 && x < 20 && y >= 5 && y < 9) || (x >= 60 && y >= 40)
	}
	for y := 0; y < 48; y++ {
		for x := 0; x < 64; x++ {
			i := 4 * (y*64 + x)
			painted := [4]byte(p.Pix[i:i+4]) == Colour
			if in(x, y) != painted && !(in(x, y) == false && [4]byte(orig[i:i+4]) == Colour) {
				t.Fatalf("(%d,%d): painted %v, want %v", x, y, painted, in(x, y))
			}
		}
	}
	// Equal pixels, equal hashes: a painted frame's hash identifies it.
	if q := Paint(f, []Area{{Rect: action.Rect{10, 5, 20, 9}}, {Rect: action.Rect{60, 40, 100, 100}}}); q.Hash != p.Hash {
		t.Error("equal paintings hash apart")
	}
}

// BenchmarkMask is masking's cost per frame: the areas of a tree of 200
// elements found (rects), a frame painted (paint: copied, filled,
// hashed), and beside them the floor a paint cannot go below: one copy of
// the frame (copy).
func BenchmarkMask(b *testing.B) {
	bal, _ := NewRule("balance", &action.Selector{Role: "push button", Name: "/^Bal/"}, nil)
	m := New([]Rule{bal}, []string{"s3cr3t-value"}, true)
	base := tree()
	big := &observe.Tree{}
	for len(big.Elements) < 200 {
		big.Elements = append(big.Elements, base.Elements...)
	}
	b.Run("rects", func(b *testing.B) {
		for b.Loop() {
			m.Rects(big, 1920, 1080)
		}
	})
	for _, size := range []struct{ w, h int }{{640, 480}, {1920, 1080}} {
		f := frame(size.w, size.h)
		areas := m.Rects(big, f.Width, f.Height)
		b.Run(fmt.Sprintf("paint/%dx%d", size.w, size.h), func(b *testing.B) {
			b.SetBytes(int64(len(f.Pix)))
			for b.Loop() {
				Paint(f, areas)
			}
		})
		b.Run(fmt.Sprintf("copy/%dx%d", size.w, size.h), func(b *testing.B) {
			b.SetBytes(int64(len(f.Pix)))
			for b.Loop() {
				pix := make([]byte, len(f.Pix))
				copy(pix, f.Pix)
			}
		})
	}
}
