package script

import (
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
)

// treeObs is an observation whose tree holds a frame and, when cell is
// not empty, a table cell of that name with text "4242"; cut is the
// read's cut.
func treeObs(cell string, cut ...string) *observe.Observation {
	o := obs(frame(0, 0))
	t := &observe.Tree{Apps: 1, Cut: cut, Elements: []observe.Element{
		{ID: "1.3/0", Parent: -1, Role: "application", Name: "soffice"},
		{ID: "1.3/1", Parent: 0, Depth: 1, Role: "frame", Name: "Untitled 1"},
	}}
	if cell != "" {
		t.Elements = append(t.Elements, observe.Element{ID: "1.3/2", Parent: 1, Depth: 2, Role: "table cell", Name: cell, Text: "4242"})
	}
	o.Tree = t
	return o
}

const (
	cutTime   = "time: the read stopped at its 3000ms deadline; 640 references to elements at depth 9 and below were not followed"
	cutAnswer = "application :1.3 did not answer within 1s; what it did not answer is missing"
	cutNodes  = "nodes: 2000 elements were read; 40 more references to elements were not followed (max_nodes)"
)

// TestElementCheckRereadsCutTree: an element check whose verdict rests on
// a read that was cut for time, or by an application that did not answer
// in time, is no verdict. expect reads the tree again (a short wait) up
// to three times, and passes when a later read holds; a failure after
// that names the cut. A cut another read has too (max_nodes) is judged
// at once. wait_for absent does not pass on a cut read.
func TestElementCheckRereadsCutTree(t *testing.T) {
	present := "steps:\n  - {expect: element, target: {role: table cell, name: A1}, text: \"4242\"}\n"
	absent := "steps:\n  - {expect: element, target: {role: table cell, name: A1}, absent: true}\n"
	waitAbsent := "steps:\n  - {wait_for: element, target: {role: table cell, name: A1}, absent: true, timeout_ms: 150}\n"
	tests := []struct {
		name    string
		src     string
		reads   []*observe.Observation
		rereads int  // decisions that read again before the verdict
		ok      bool // the verdict
		seen    string
	}{
		{"complete read holds", present, []*observe.Observation{treeObs("A1")}, 0, true, ""},
		{"complete read fails at once", present, []*observe.Observation{treeObs("")}, 0, false, "no element matches"},
		{"cut for time, then whole", present, []*observe.Observation{treeObs("", cutTime), treeObs("A1")}, 1, true, ""},
		{"unanswered, then whole", present, []*observe.Observation{treeObs("", cutAnswer), treeObs("", cutAnswer), treeObs("A1")}, 2, true, ""},
		{"cut every time", present, []*observe.Observation{treeObs("", cutTime), treeObs("", cutTime), treeObs("", cutTime), treeObs("", cutTime)}, 3, false, "the read was cut: time: the read stopped"},
		{"cut by a limit", present, []*observe.Observation{treeObs("", cutNodes)}, 0, false, "the read was cut: nodes:"},
		{"found though cut", present, []*observe.Observation{treeObs("A1", cutTime)}, 0, true, ""},
		{"absent on a cut read", absent, []*observe.Observation{treeObs("", cutTime), treeObs("")}, 1, true, ""},
		{"absent, but there", absent, []*observe.Observation{treeObs("", cutTime), treeObs("A1")}, 1, false, "1: table cell"},
		{"absent, cut every time", absent, []*observe.Observation{treeObs("", cutAnswer), treeObs("", cutAnswer), treeObs("", cutAnswer), treeObs("", cutAnswer)}, 3, false, "none; the read was cut: application :1.3 did not answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := play(t, tt.src, tt.reads...)
			for i, d := range ds[:tt.rereads] {
				if d.Action.Kind != action.Wait || !strings.Contains(d.Message, "reading it again") {
					t.Fatalf("decision %d: want a re-read, got %v %q", i, d.Action, d.Message)
				}
			}
			if len(ds) != tt.rereads+1 {
				t.Fatalf("%d decisions for %d reads: want %d re-reads and a verdict", len(ds), len(tt.reads), tt.rereads)
			}
			d := ds[len(ds)-1]
			if d.Action.Kind != action.Done || d.Action.Succeeded() != tt.ok || !strings.Contains(d.Message, tt.seen) {
				t.Errorf("verdict %v ok=%v %q: want ok=%v and %q", d.Action.Kind, d.Action.Succeeded(), d.Message, tt.ok, tt.seen)
			}
		})
	}
	t.Run("wait_for absent", func(t *testing.T) {
		s, err := Parse("t.yaml", []byte(waitAbsent), observe.Screen{Width: 64, Height: 48, Depth: 24})
		if err != nil {
			t.Fatal(err)
		}
		a := New(s)
		d, _ := a.Decide(t.Context(), treeObs("", cutTime))
		if d.Action.Kind != action.Wait {
			t.Fatalf("wait_for absent passed on a read cut for time: %v %q", d.Action, d.Message)
		}
		for d.Action.Kind != action.Done {
			d, _ = a.Decide(t.Context(), treeObs("", cutTime))
		}
		if d.Action.Succeeded() || !strings.Contains(d.Message, "timed out") || !strings.Contains(d.Message, "the read was cut: time:") {
			t.Errorf("timeout: %s", d.Message)
		}
		a = New(s)
		if d, _ = a.Decide(t.Context(), treeObs("")); d.Action.Kind != action.Done || !d.Action.Succeeded() {
			t.Errorf("wait_for absent on a whole read without the cell: %v %q", d.Action, d.Message)
		}
	})
}
