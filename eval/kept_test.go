package eval

import (
	"testing"

	"github.com/codegirl-games/agentbox/session"
)

// TestKeptSandboxes: an episode keeps its sandbox only while the sandboxes
// kept and being kept do not cover the task's episodes not started yet;
// one that could not be reset frees its place.
func TestKeptSandboxes(t *testing.T) {
	k := newKeptSandboxes()
	var eps []*Episode
	for range 5 {
		eps = append(eps, &Episode{Task: "a"})
	}
	eps = append(eps, &Episode{Task: "b"})
	k.expect(eps)

	// Two at once: each keeps (3 and 2 to come, nothing kept yet).
	p1, keep1 := k.start("a")
	p2, keep2 := k.start("a")
	if p1 != nil || p2 != nil || !keep1 || !keep2 {
		t.Fatalf("first two: %v %v %v %v", p1, keep1, p2, keep2)
	}
	// A third: 2 to come, 2 being kept: it need not keep.
	if p, keep := k.start("a"); p != nil || keep {
		t.Fatalf("third: %v %v", p, keep)
	}
	s1 := &session.Prepared{}
	k.put("a", s1)
	// The fourth takes it and keeps (1 to come, 1 being kept... by the
	// second, which then fails its reset).
	if p, keep := k.start("a"); p != s1 || keep {
		t.Fatalf("fourth: %v %v", p, keep)
	}
	k.put("a", nil) // the second's sandbox could not be reset
	// The fifth finds none kept, and none is left to come: no keep.
	if p, keep := k.start("a"); p != nil || keep {
		t.Fatalf("fifth: %v %v", p, keep)
	}
	// Task b's only episode keeps nothing.
	if p, keep := k.start("b"); p != nil || keep {
		t.Fatalf("b: %v %v", p, keep)
	}
	if k.pending["a"] != 0 || k.keeping["a"] != 0 || len(k.byID["a"]) != 0 {
		t.Errorf("left: pending %d, keeping %d, kept %d", k.pending["a"], k.keeping["a"], len(k.byID["a"]))
	}
}
