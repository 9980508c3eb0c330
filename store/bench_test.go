package store

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/trace"
)

// BenchmarkStep is the cost of one step (a step record and its result)
// to the trace alone, and with the live index: "indexed" is what the run
// waits for (the queue), "indexed+flushed" adds the store's own writing
// (its transactions, WAL) amortised per step.
//
//	go test -run '^$' -bench BenchmarkStep -benchtime 20000x ./store/
func BenchmarkStep(b *testing.B) {
	for _, mode := range []string{"trace", "indexed", "indexed+flushed"} {
		b.Run(mode, func(b *testing.B) {
			var ix *Indexer
			opts := trace.Options{Encoders: 1}
			if mode != "trace" {
				s := openStore(b, filepath.Join(b.TempDir(), "index.db"))
				ix = NewIndexer(s, func(err error) { b.Error(err) })
				opts.Indexer = ix
			}
			w, err := trace.Create(filepath.Join(b.TempDir(), "run"), trace.Run{ID: "bench"}, opts)
			if err != nil {
				b.Fatal(err)
			}
			x, y := 10, 20
			a := action.Action{Kind: action.Click, X: &x, Y: &y}
			res := action.Result{OK: true}
			b.ResetTimer()
			for i := 1; i <= b.N; i++ {
				w.Record(trace.Record{Type: trace.TypeStep, Step: i, Actor: trace.ActorAgent, Action: &a, Decision: &trace.Decision{LatencyMS: 1}})
				w.Record(trace.Record{Type: trace.TypeResult, Step: i, Result: &res, DurationMS: 2})
				if ix != nil && i%1000 == 0 { // keep the queue from overflowing
					if mode == "indexed" {
						b.StopTimer() // this mode is the run's side only
					}
					ix.Flush(context.Background())
					b.StartTimer()
				}
			}
			if mode == "indexed+flushed" {
				ix.Flush(context.Background())
			}
			b.StopTimer()
			w.Finish(nil)
			if ix != nil {
				ix.Close(time.Minute)
			}
		})
	}
}

// synth writes a minimal trace (run.json and steps.jsonl, as the writer
// leaves them) fast, for figures over many runs.
func synth(dir string, i int, started time.Time) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	outcomes := []trace.Outcome{trace.Success, trace.Success, trace.Failure, trace.Error}
	apps := []string{"examples/mover", "xcalc", "libreoffice-calc", "gimp", "chromium"}
	agents := []string{"demo", "script", "openai", "anthropic"}
	steps := 5
	r := trace.Run{Format: trace.Format, Version: trace.Version, ID: strconv.Itoa(i), Status: trace.StatusComplete,
		Outcome: outcomes[i%len(outcomes)], Reason: trace.ReasonDone, Task: fmt.Sprintf("task %d: make the cell B%d bold", i, i%50),
		App: trace.AppInfo{Target: apps[i%len(apps)]}, Agent: trace.AgentInfo{Name: agents[i%len(agents)]},
		Started: started, Ended: started.Add(3 * time.Second), DurationMS: 3000, Steps: steps}
	data, _ := json.Marshal(r)
	if err := os.WriteFile(filepath.Join(dir, trace.RunFile), data, 0o644); err != nil {
		return err
	}
	var lines []byte
	for s := 1; s <= steps; s++ {
		a := action.Action{Kind: action.Click, X: &s, Y: &s}
		st, _ := json.Marshal(trace.Record{Type: trace.TypeStep, Step: s, TMS: float64(s * 100), Actor: trace.ActorAgent, Action: &a})
		rs, _ := json.Marshal(trace.Record{Type: trace.TypeResult, Step: s, TMS: float64(s*100 + 5), Result: &action.Result{OK: true}, DurationMS: 5})
		lines = append(append(append(append(lines, st...), '\n'), rs...), '\n')
	}
	return os.WriteFile(filepath.Join(dir, trace.StepsFile), lines, 0o644)
}

// TestFigures100k measures the index over 100,000 synthetic runs (5 steps
// each, generated in a temporary directory, or in $AGENTBOX_FIGURES_DIR to
// keep them for timing the command): the time to index them, the index's
// size, a filtered query and an unfiltered one, against reading every
// run.json as ls does without the index. Off unless AGENTBOX_FIGURES=1:
//
//	AGENTBOX_FIGURES=1 go test -count=1 -run TestFigures100k -v -timeout 60m ./store/
func TestFigures100k(t *testing.T) {
	if os.Getenv("AGENTBOX_FIGURES") != "1" {
		t.Skip("figures: set AGENTBOX_FIGURES=1")
	}
	n := 100000
	if v, err := strconv.Atoi(os.Getenv("AGENTBOX_FIGURES_RUNS")); err == nil && v > 0 {
		n = v
	}
	root := os.Getenv("AGENTBOX_FIGURES_DIR")
	if root == "" {
		root = t.TempDir()
	}
	runs := filepath.Join(root, "runs")
	t0 := time.Now()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		if err := synth(filepath.Join(runs, fmt.Sprintf("%03d", i/1000), fmt.Sprintf("%06d", i)), i, start.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("generated %d runs in %v", n, time.Since(t0).Round(time.Millisecond))

	path := filepath.Join(root, "index.db")
	Remove(path)
	s := openStore(t, path)
	ctx := context.Background()
	t0 = time.Now()
	st, err := s.Index(ctx, []string{runs}, false, func(w string) { t.Error(w) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("index: %d runs in %v", st.Runs, time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	st, _ = s.Index(ctx, []string{runs}, false, func(w string) { t.Error(w) })
	t.Logf("index again (nothing new, %d unchanged): %v", st.Unchanged, time.Since(t0).Round(time.Millisecond))
	s.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	fi, _ := os.Stat(path)
	c, _ := s.Count(ctx)
	t.Logf("index size: %.1f MB (%d runs, %d steps; %.0f bytes a run)", float64(fi.Size())/1e6, c.Runs, c.Steps, float64(fi.Size())/float64(c.Runs))

	abs, _ := filepath.Abs(runs)
	for _, q := range []struct {
		name string
		f    Filter
	}{
		{"--app calc --outcome failure --since/--until (one month)", Filter{Under: abs, App: "calc", Outcome: "failure",
			Since: start.AddDate(0, 1, 0), Until: start.AddDate(0, 2, 0)}},
		{"--task 'B7 bold'", Filter{Under: abs, Task: "B7 bold"}},
		{"no filter", Filter{Under: abs}},
	} {
		best := time.Duration(1 << 62)
		var got int
		for range 3 {
			t0 = time.Now()
			es, err := s.Query(ctx, q.f)
			if err != nil {
				t.Fatal(err)
			}
			got = len(es)
			best = min(best, time.Since(t0))
		}
		t.Logf("query %s: %d entries in %v (best of 3)", q.name, got, best.Round(time.Microsecond))
	}
	t0 = time.Now()
	var read int
	filepath.WalkDir(runs, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			if _, err := trace.ReadRun(p); err == nil {
				read++
				return filepath.SkipDir
			}
		}
		return nil
	})
	t.Logf("reading every run.json (ls without the index): %d runs in %v", read, time.Since(t0).Round(time.Millisecond))
}
