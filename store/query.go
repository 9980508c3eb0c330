package store

import (
	"context"
	"fmt"
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
	// Roots: only what is in one of these directories (absolute) or
	// below it (the dashboard's trace roots); none: anywhere.
	Roots []string
	// Episodes lists the runs that are episodes of evals too, wherever
	// they are (the dashboard); without it they are listed as Under says.
	Episodes bool
	// ReplaysOnly: only replays (runs whose agent is replay).
	ReplaysOnly bool
	// Limit bounds the runs listed, and the evals apart (0: all); Offset
	// skips that many runs first.
	Limit, Offset int
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
	Sandbox    string // a run's named sandbox (run --name)
	Started    time.Time
	Passed     int // evals
	Episodes   int // evals
	// Row is the entry's row in the store (stable until a rebuild): how
	// the dashboard names it in its addresses.
	Row int64
}

func like(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(s) + "%"
}

// rootsCond is the condition that col is in one of roots or below. The
// column is written +col so that SQLite does not take the index on path
// for it: roots usually hold most of the store, and a page of the newest
// is then read in the order of started_ns's index, not sorted whole (a
// page of 100,000 runs: 0.1 s instead of 1.3 s).
func rootsCond(col string, roots []string) (string, []any) {
	col = "+" + col
	var ors []string
	var args []any
	for _, r := range roots {
		ors = append(ors, "("+col+" = ? OR ("+col+" >= ? AND "+col+" < ?))")
		args = append(args, r, r+"/", r+"0")
	}
	if len(ors) == 0 {
		return "0", nil
	}
	return "(" + strings.Join(ors, " OR ") + ")", args
}

// runsWhere is the WHERE clause (with its arguments) of the runs f selects.
func runsWhere(f Filter) (string, []any) {
	var where []string
	var args []any
	add := func(cond string, a ...any) { where = append(where, cond); args = append(args, a...) }
	if f.Under != "" {
		add("(r.path = ? OR (r.path >= ? AND r.path < ?))", f.Under, f.Under+"/", f.Under+"0")
	}
	if f.Roots != nil {
		c, a := rootsCond("r.path", f.Roots)
		add(c, a...)
	}
	switch {
	case f.Eval != "":
		add("EXISTS (SELECT 1 FROM episodes e JOIN evals v ON v.id = e.eval WHERE e.trace = r.path AND (v.path = ? OR v.run_id = ?))", f.Eval, f.Eval)
	case !f.Episodes:
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
	if f.ReplaysOnly {
		add("r.agent_name = 'replay'")
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
	if len(where) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(where, " AND "), args
}

// evalsListed reports whether f lists evals at all.
func evalsListed(f Filter) bool {
	return f.Eval == "" && f.Agent == "" && f.Task == "" && !f.ReplaysOnly
}

// Query lists the entries f selects, newest first: its runs, then its
// evals.
func (s *Store) Query(ctx context.Context, f Filter) ([]Entry, error) {
	out, err := s.queryRuns(ctx, f)
	if err != nil {
		return nil, err
	}
	if !evalsListed(f) {
		return out, nil
	}
	evals, err := s.queryEvals(ctx, f)
	if err != nil {
		return nil, err
	}
	return append(out, evals...), nil
}

// Totals counts what f selects, Limit and Offset aside.
func (s *Store) Totals(ctx context.Context, f Filter) (runs, evals int, err error) {
	w, args := runsWhere(f)
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM runs r"+w, args...).Scan(&runs); err != nil {
		return 0, 0, s.wrap(err)
	}
	if !evalsListed(f) {
		return runs, 0, nil
	}
	w, args = evalsWhere(f)
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM evals"+w, args...).Scan(&evals); err != nil {
		return 0, 0, s.wrap(err)
	}
	return runs, evals, nil
}

func limit(q string, n, offset int) string {
	if n > 0 {
		q += fmt.Sprintf(" LIMIT %d", n)
		if offset > 0 {
			q += fmt.Sprintf(" OFFSET %d", offset)
		}
	}
	return q
}

func (s *Store) queryRuns(ctx context.Context, f Filter) ([]Entry, error) {
	var out []Entry
	w, args := runsWhere(f)
	q := "SELECT r.id, r.path, r.run_id, r.status, r.outcome, r.reason, r.task, r.steps, r.duration_ms, r.app, r.agent, r.sandbox, r.started FROM runs r" + w
	if f.Limit > 0 {
		// A page: ties in order of the row, so that the index on
		// started_ns gives the order and no sort of every row is needed.
		q += " ORDER BY r.started_ns DESC, r.id DESC"
	} else {
		q += " ORDER BY r.started_ns DESC, r.path"
	}
	rows, err := s.db.QueryContext(ctx, limit(q, f.Limit, f.Offset), args...)
	if err != nil {
		return nil, s.wrap(err)
	}
	defer rows.Close()
	for rows.Next() {
		e := Entry{Kind: KindRun}
		var started string
		if err := rows.Scan(&e.Row, &e.Path, &e.ID, &e.Status, &e.Outcome, &e.Reason, &e.Task, &e.Steps, &e.DurationMS, &e.App, &e.Agent, &e.Sandbox, &started); err != nil {
			return nil, s.wrap(err)
		}
		e.Started = parseTime(started)
		out = append(out, e)
	}
	return out, s.wrap(rows.Err())
}

func evalsWhere(f Filter) (string, []any) {
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
	if f.Roots != nil {
		c, a := rootsCond("path", f.Roots)
		add(c, a...)
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
	if len(where) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(where, " AND "), args
}

func (s *Store) queryEvals(ctx context.Context, f Filter) ([]Entry, error) {
	w, args := evalsWhere(f)
	q := "SELECT id, path, run_id, outcome, duration_ms, suite, started, passed, episodes FROM evals" + w + " ORDER BY started_ns DESC, path"
	rows, err := s.db.QueryContext(ctx, limit(q, f.Limit, 0), args...)
	if err != nil {
		return nil, s.wrap(err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		e := Entry{Kind: KindEval, Status: "complete"}
		var started string
		if err := rows.Scan(&e.Row, &e.Path, &e.ID, &e.Outcome, &e.DurationMS, &e.App, &started, &e.Passed, &e.Episodes); err != nil {
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
