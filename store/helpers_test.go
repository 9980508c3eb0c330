package store

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/eval"
	"github.com/codegirl-games/agentbox/trace"
)

// spec is a synthetic run.
type spec struct {
	app, agent, task string
	outcome          trace.Outcome
	steps            int
	started          time.Time
	unfinished       bool // never finalised (the writer "died")
}

// writeTrace writes a trace with the real trace.Writer: per step a step
// record, a result (every third one failed), and an event now and then.
func writeTrace(tb testing.TB, dir string, ix trace.Indexer, sp spec) {
	tb.Helper()
	w, err := trace.Create(dir, trace.Run{ID: filepath.Base(dir), Task: sp.task, Started: sp.started,
		App: trace.AppInfo{Target: sp.app}, Agent: trace.AgentInfo{Name: sp.agent}}, trace.Options{Encoders: 1, Indexer: ix})
	if err != nil {
		tb.Fatal(err)
	}
	kinds := []action.Kind{action.Click, action.Key, action.Type, action.Wait}
	for i := 1; i <= sp.steps; i++ {
		a := action.Action{Kind: kinds[i%len(kinds)]}
		if err := w.Record(trace.Record{Type: trace.TypeStep, Step: i, Actor: trace.ActorScript, Action: &a,
			Decision: &trace.Decision{LatencyMS: float64(i)}}); err != nil {
			tb.Fatal(err)
		}
		res := action.Result{OK: i%3 != 0}
		if !res.OK {
			res.Error = "no window"
		}
		if err := w.Record(trace.Record{Type: trace.TypeResult, Step: i, Result: &res, DurationMS: 1.5}); err != nil {
			tb.Fatal(err)
		}
		if i%5 == 0 {
			w.Record(trace.Record{Type: trace.TypeEvent, Event: "window_mapped", Data: map[string]any{"title": fmt.Sprint("w", i)}})
		}
	}
	if sp.unfinished {
		return // like a SIGKILL: run.json says running
	}
	if err := w.Finish(func(r *trace.Run) { r.Outcome, r.Reason = sp.outcome, trace.ReasonDone }); err != nil {
		tb.Fatal(err)
	}
}

// writeEval writes an eval's summary.json over episode traces already
// written at dir/TASK/NNN.
func writeEval(tb testing.TB, dir, suite string, started time.Time, eps []eval.Episode) {
	tb.Helper()
	sum := eval.Summary{Format: eval.SummaryFormat, Version: eval.SummaryVersion, Suite: suite, RunID: filepath.Base(dir),
		Started: started, Ended: started.Add(time.Minute), DurationMS: 60000, Episodes: eps}
	for _, e := range eps {
		sum.Totals.Episodes++
		if e.Category == eval.Passed {
			sum.Totals.Passed++
		} else {
			sum.Totals.Failed++
		}
	}
	data, _ := json.Marshal(sum)
	if err := os.WriteFile(filepath.Join(dir, eval.SummaryFile), data, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// dump is the store's content that derives from the traces, for
// comparing a live index with a rebuilt one.
func dump(tb testing.TB, s *Store) []string {
	tb.Helper()
	var out []string
	for _, q := range []string{
		`SELECT r.path, r.run_id, r.status, r.outcome, r.reason, r.task, r.app, r.agent, r.started, r.steps, r.duration_ms FROM runs r ORDER BY r.path`,
		`SELECT r.path, s.line, s.step, s.actor, s.kind, s.invalid, s.decision_ms, s.ok, s.error, s.duration_ms FROM steps s JOIN runs r ON r.id = s.run ORDER BY r.path, s.line`,
		`SELECT r.path, e.line, e.event, e.data FROM events e JOIN runs r ON r.id = e.run ORDER BY r.path, e.line`,
		`SELECT path, run_id, suite, started, episodes, passed, outcome FROM evals ORDER BY path`,
		`SELECT v.path, e.task, e.n, e.category, e.trace FROM episodes e JOIN evals v ON v.id = e.eval ORDER BY v.path, e.task, e.n`,
	} {
		rows, err := s.db.QueryContext(context.Background(), q)
		if err != nil {
			tb.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				tb.Fatal(err)
			}
			out = append(out, fmt.Sprint(vals...))
		}
		rows.Close()
	}
	return out
}

func openStore(tb testing.TB, path string) *Store {
	tb.Helper()
	s, err := Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func noWarn(tb testing.TB) func(string) {
	return func(w string) { tb.Errorf("warning: %s", w) }
}

func jsonMarshal(v any) ([]byte, error) { return json.MarshalIndent(v, "", "  ") }
