package eval

import (
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/pool"
	"github.com/codegirl-games/agentbox/session"
)

// TestKeptSandboxes: an episode keeps its sandbox only while the sandboxes
// kept and being kept do not cover the task's episodes not started yet;
// one that could not be reset frees its place.
func TestKeptSandboxes(t *testing.T) {
	var eps []*Episode
	for range 5 {
		eps = append(eps, &Episode{Task: "a"})
	}
	eps = append(eps, &Episode{Task: "b"})
	k := newClaims(eps, true, 4)

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

// TestClaimsNeed: what a task's episodes not started yet may still take
// from the pool, as the claims tell it after each change: each episode
// without relaunch; with it, no more than run at once, less the sandboxes
// kept and being kept — and one more when a reset fails.
func TestClaimsNeed(t *testing.T) {
	var eps []*Episode
	for range 6 {
		eps = append(eps, &Episode{Task: "a"})
	}
	for _, tc := range []struct {
		relaunch bool
		want     []int // after each start
	}{
		{false, []int{5, 4, 3, 2, 1, 0}},
		// Parallel 2: two start, each keeping its sandbox for a later
		// episode; nothing more is needed (below: until a reset fails).
		{true, []int{1, 0}},
	} {
		c := newClaims(eps, tc.relaunch, 2)
		var told []int
		c.told = func(task string, n int) {
			if task != "a" {
				t.Errorf("told of task %q", task)
			}
			told = append(told, n)
		}
		if !tc.relaunch {
			for range 5 {
				c.start("a")
			}
			c.drop("a") // an episode whose agent would not start takes nothing either
			if !slices.Equal(told, tc.want) {
				t.Errorf("without relaunch: told %v, want %v", told, tc.want)
			}
			continue
		}
		c.start("a")
		c.start("a")
		if !slices.Equal(told, tc.want) {
			t.Fatalf("relaunch, two started: told %v, want %v", told, tc.want)
		}
		told = nil
		p := &session.Prepared{}
		c.put("a", p)   // lane 1 ends: kept (4 to come, 2 kept and keeping)
		c.start("a")    // takes it, keeps: 3 to come
		c.put("a", nil) // lane 2's reset failed: one sandbox short
		if want := []int{0, 0, 1}; !slices.Equal(told, want) {
			t.Errorf("relaunch, a reset failed: told %v, want %v", told, want)
		}
	}
}

// TestPoolMakesNoSandboxNobodyTakes: an eval's pool, deeper than its
// episodes can take, makes only the sandboxes they take: with relaunch no
// more than run at once, without it no more than one an episode.
func TestPoolMakesNoSandboxNobodyTakes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		relaunch bool
		episodes int
		want     int
	}{
		{"relaunch", true, 8, 2},
		{"fresh", false, 3, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "app/agentbox.json", `{"command": "xterm"}`)
			writeFile(t, dir, "play.yaml", "steps:\n  - expect: running\n")
			s, err := Load(writeFile(t, dir, "suite.yaml", "tasks:\n  - {name: a, target: app, script: play.yaml}\n"))
			if err != nil {
				t.Fatal(err)
			}
			var created atomic.Int64
			b := &guestenvtest.Backend{Relaunch: true, New: func() *guestenvtest.Guest { created.Add(1); return &guestenvtest.Guest{} }}
			var st pool.Stats
			sum, err := Run(t.Context(), s, Options{Backend: b, Out: filepath.Join(dir, "out"), RunID: "p", Parallel: 2, Episodes: tc.episodes,
				Pool: 4, Relaunch: tc.relaunch, PoolStats: func(s pool.Stats) { st = s }})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Totals.Passed != tc.episodes {
				t.Fatalf("passed %d of %d: %+v", sum.Totals.Passed, tc.episodes, sum.Episodes)
			}
			// Every sandbox the pool made was taken. An episode may still
			// start cold: with relaunch, the last one can start in a lane
			// freed by an episode that kept nothing, before the other lane
			// puts its sandbox back.
			if n := created.Load(); n-st.Cold != st.Warm || st.Warm > int64(tc.want) {
				t.Errorf("%d sandboxes created for %d episodes at --parallel 2: %d taken from the pool (at most %d), %d cold; the pool made some nobody took (pool: %+v)", n, tc.episodes, st.Warm, tc.want, st.Cold, st)
			}
		})
	}
}
