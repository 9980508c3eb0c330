package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/trace"
)

// TestPagesAndRoots: pages of a query (Limit, Offset) put together are the
// whole selection, in one order, with ties in start time; Roots keeps
// what is below them; Totals counts what Query lists.
func TestPagesAndRoots(t *testing.T) {
	base := t.TempDir()
	a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := range 11 {
		root := a
		if i%3 == 0 {
			root = b
		}
		// Pairs start at the same time: the page order must break ties.
		writeTrace(t, filepath.Join(root, fmt.Sprintf("r%02d", i)), nil, spec{app: "xcalc", agent: "demo", outcome: trace.Success, steps: 1, started: t0.Add(time.Duration(i/2) * time.Hour)})
	}
	s := openStore(t, filepath.Join(base, "index.db"))
	ctx := context.Background()
	if _, err := s.Index(ctx, []string{a, b}, false, noWarn(t)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		roots []string
		want  int
	}{{nil, 11}, {[]string{a}, 7}, {[]string{b}, 4}, {[]string{a, b}, 11}, {[]string{filepath.Join(base, "none")}, 0}, {[]string{}, 0}} {
		f := Filter{Roots: c.roots, Episodes: true}
		n, _, err := s.Totals(ctx, f)
		if err != nil || n != c.want {
			t.Errorf("roots %v: Totals %d (%v), want %d", c.roots, n, err, c.want)
		}
		var paged []string
		var last time.Time
		seen := map[int64]bool{}
		for off := 0; off < 20; off += 3 {
			f.Limit, f.Offset = 3, off
			es, err := s.Query(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				if e.Kind != KindRun {
					continue
				}
				if seen[e.Row] {
					t.Errorf("roots %v: %s on two pages", c.roots, e.Path)
				}
				seen[e.Row] = true
				if !last.IsZero() && e.Started.After(last) {
					t.Errorf("roots %v: %s (%v) after a run started at %v: not newest first", c.roots, e.Path, e.Started, last)
				}
				last = e.Started
				paged = append(paged, e.Path)
			}
		}
		if len(paged) != c.want {
			t.Errorf("roots %v: %d runs over the pages, want %d", c.roots, len(paged), c.want)
		}
	}
}
