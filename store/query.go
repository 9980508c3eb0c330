package store

import (
	"context"
	"strings"
	"time"
)

// Kinds of entries.
const (
	KindRun  = "run"
	KindEval = "eval"
)

// Filter selects runs and evals. Zero fields select everything.
type Filter struct {
	// Under: runs and evals in this directory or below it (absolute). A
	// run that is an episode of an eval is listed only when Under is that
	// eval (as ls does).
	Under string
	// Eval: only the episodes of this eval (its directory, absolute, or
	// its run ID); evals themselves are not listed.
	Eval string
	// App, Agent, Task: text the run's app (an eval's suite), agent or
	// task contains (case-insensitive). With Agent or Task, evals are not
	// listed.
	App, Agent, Task string
	// Outcome: a run's outcome (success, failure, error, interrupted, or
	// incomplete for a run never finalised) or an eval's (passed, failed,
	// interrupted, infrastructure).
	Outcome string
	// Since, Until bound when it started: Since <= started < Until.
	Since, Until time.Time
}

// Entry is a run or an eval as ls lists it.
type Entry struct {
	Kind       string
	Path       string // absolute
	ID         string
	Status     string
	Outcome    string
	Reason     string
	Task       string
	Steps      int
	DurationMS float64
	App        string
	Agent      string
	Started    time.Time
	Passed     int // evals
	Episodes   int // evals
}

func like(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(s) + "%"
}

// Query lists the entries f selects, newest first.
func (s *Store) Query(ctx context.Context, f Filter) ([]Entry, error) {
	var out []Entry
	var where []string
	var args []any
	add := func(cond string, a ...any) { where = append(where, cond); args = append(args, a...) }
	if f.Under != "" {
		add("(r.path = ? OR (r.path >= ? AND r.path < ?))", f.Under, f.Under+"/", f.Under+"0")
	}
	if f.Eval != "" {
		add("EXISTS (SELECT 1 FROM episodes e JOIN evals v ON v.id = e.eval WHERE e.trace = r.path AND (v.path = ? OR v.run_id = ?))", f.Eval, f.Eval)
	} else {
		add("NOT EXISTS (SELECT 1 FROM episodes e JOIN evals v ON v.id = e.eval WHERE e.trace = r.path AND v.path <> ?)", f.Under)
	}
	if f.App != "" {
		add(`r.app LIKE ? ESCAPE '\'`, like(f.App))
	}
	if f.Agent != "" {
		add(`r.agent LIKE ? ESCAPE '\'`, like(f.Agent))
	}
	if f.Task != "" {
		add(`r.task LIKE ? ESCAPE '\'`, like(f.Task))
	}
	switch f.Outcome {
	case "":
	case "incomplete":
		add("r.status <> 'complete'")
	default:
		add("r.status = 'complete' AND r.outcome = ?", f.Outcome)
	}
	if !f.Since.IsZero() {
		add("r.started_ns >= ?", f.Since.UnixNano())
	}
	if !f.Until.IsZero() {
		add("r.started_ns < ?", f.Until.UnixNano())
	}
	q := "SELECT r.path, r.run_id, r.status, r.outcome, r.reason, r.task, r.steps, r.duration_ms, r.app, r.agent, r.started FROM runs r"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY r.started_ns DESC, r.path"
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.wrap(err)
	}
	for rows.Next() {
		e := Entry{Kind: KindRun}
		var started string
		if err := rows.Scan(&e.Path, &e.ID, &e.Status, &e.Outcome, &e.Reason, &e.Task, &e.Steps, &e.DurationMS, &e.App, &e.Agent, &started); err != nil {
			rows.Close()
			return nil, s.wrap(err)
		}
		e.Started = parseTime(started)
		out = append(out, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.wrap(err)
	}
	if f.Eval != "" || f.Agent != "" || f.Task != "" {
		return out, nil
	}
	evals, err := s.queryEvals(ctx, f)
	if err != nil {
		return nil, err
	}
	return append(out, evals...), nil
}

func (s *Store) queryEvals(ctx context.Context, f Filter) ([]Entry, error) {
	var where []string
	var args []any
	add := func(cond string, a ...any) { where = append(where, cond); args = append(args, a...) }
	if f.Under != "" {
		add("(path = ? OR (path >= ? AND path < ?))", f.Under, f.Under+"/", f.Under+"0")
		// An eval inside another listed eval is not listed (ls does not
		// look inside an eval below DIR).
		add("NOT EXISTS (SELECT 1 FROM evals o WHERE o.path <> evals.path AND o.path <> ? AND evals.path > o.path || '/' AND evals.path < o.path || '0' AND (o.path >= ? AND o.path < ?))",
			f.Under, f.Under+"/", f.Under+"0")
	}
	if f.App != "" {
		add(`suite LIKE ? ESCAPE '\'`, like(f.App))
	}
	if f.Outcome != "" {
		add("outcome = ?", f.Outcome)
	}
	if !f.Since.IsZero() {
		add("started_ns >= ?", f.Since.UnixNano())
	}
	if !f.Until.IsZero() {
		add("started_ns < ?", f.Until.UnixNano())
	}
	q := "SELECT path, run_id, outcome, duration_ms, suite, started, passed, episodes FROM evals"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY started_ns DESC, path"
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.wrap(err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		e := Entry{Kind: KindEval, Status: "complete"}
		var started string
		if err := rows.Scan(&e.Path, &e.ID, &e.Outcome, &e.DurationMS, &e.App, &started, &e.Passed, &e.Episodes); err != nil {
			return nil, s.wrap(err)
		}
		e.Started = parseTime(started)
		out = append(out, e)
	}
	return out, s.wrap(rows.Err())
}

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// Counts are the store's row counts (for figures and tests).
type Counts struct{ Runs, Steps, Events, Evals, Episodes int }

// Count counts the store's rows.
func (s *Store) Count(ctx context.Context) (Counts, error) {
	var c Counts
	for _, x := range []struct {
		t string
		n *int
	}{{"runs", &c.Runs}, {"steps", &c.Steps}, {"events", &c.Events}, {"evals", &c.Evals}, {"episodes", &c.Episodes}} {
		if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM "+x.t).Scan(x.n); err != nil {
			return c, s.wrap(err)
		}
	}
	return c, nil
}

// Check runs SQLite's integrity check; nil when the file is consistent.
func (s *Store) Check(ctx context.Context) error {
	var res string
	if err := s.db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&res); err != nil {
		return s.wrap(err)
	}
	if res != "ok" {
		return wrapErr(s.path, &checkError{res})
	}
	return nil
}

type checkError struct{ msg string }

func (e *checkError) Error() string { return "integrity check: malformed: " + e.msg }
