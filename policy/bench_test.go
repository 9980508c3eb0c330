package policy

import (
	"fmt"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
)

// BenchmarkDecide is the gate's own work at one step, without reading the
// tree: the element under a click's point found in a tree of n elements
// and the example policy's rules run.
//
//	go test -run '^$' -bench BenchmarkDecide ./policy/
func BenchmarkDecide(b *testing.B) {
	p, err := Parse("p.yaml", []byte(example))
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{10, 500, 5000} {
		t := dialog(0)
		for i := range n {
			x, y := 10+(i%30)*12, 60+(i/30)%20*6
			t.Elements = append(t.Elements, observe.Element{ID: fmt.Sprintf("1.1/%d", 10+i), Parent: 1, Depth: 2, Role: "label",
				Name: fmt.Sprintf("item %d", i), Bounds: &action.Rect{x, y, x + 10, y + 5}})
		}
		a := action.Action{Kind: action.Click, X: action.Int(140), Y: action.Int(220)}
		b.Run(fmt.Sprintf("elements=%d", len(t.Elements)), func(b *testing.B) {
			for b.Loop() {
				if v := p.Decide(SubjectOf(a, action.Point{}, t)); v.Decision != Ask {
					b.Fatal(v)
				}
			}
		})
	}
}
