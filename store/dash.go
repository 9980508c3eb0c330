package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// The dashboard's queries (agentbox dashboard): one run or eval by its
// row, pass rates by day, running runs, the indexed roots.

// ErrNotFound is wrapped by the errors of a row that is not in the store.
var ErrNotFound = errors.New("not in the index")

// Roots are the directories `agentbox index` walked.
func (s *Store) Roots(ctx context.Context) ([]string, error) {
	roots, _, err := s.known(ctx)
	return roots, err
}

// RunDetail is one run as the dashboard shows it.
type RunDetail struct {
	Entry
	AgentName string
	Message   string
	Backend   string
	Grade     string
	// Eval is the eval the run is an episode of ("" for none), EvalRow
	// its row.
	Eval    string
	EvalRow int64
}

// Run is the run at row.
func (s *Store) Run(ctx context.Context, row int64) (RunDetail, error) {
	d := RunDetail{Entry: Entry{Kind: KindRun, Row: row}}
	var started string
	var evalPath sql.NullString
	var evalRow sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT r.path, r.run_id, r.status, r.outcome, r.reason, r.task, r.steps, r.duration_ms, r.app, r.agent,
		r.started, r.agent_name, r.message, r.backend, r.grade,
		(SELECT v.path FROM episodes e JOIN evals v ON v.id = e.eval WHERE e.trace = r.path LIMIT 1),
		(SELECT v.id FROM episodes e JOIN evals v ON v.id = e.eval WHERE e.trace = r.path LIMIT 1)
		FROM runs r WHERE r.id = ?`, row).Scan(&d.Path, &d.ID, &d.Status, &d.Outcome, &d.Reason, &d.Task, &d.Steps, &d.DurationMS,
		&d.App, &d.Agent, &started, &d.AgentName, &d.Message, &d.Backend, &d.Grade, &evalPath, &evalRow)
	if errors.Is(err, sql.ErrNoRows) {
		return d, ErrNotFound
	}
	if err != nil {
		return d, s.wrap(err)
	}
	d.Started = parseTime(started)
	d.Eval, d.EvalRow = evalPath.String, evalRow.Int64
	return d, nil
}

// Eval is the eval at row.
func (s *Store) Eval(ctx context.Context, row int64) (Entry, error) {
	e := Entry{Kind: KindEval, Status: "complete", Row: row}
	var started string
	err := s.db.QueryRowContext(ctx, "SELECT path, run_id, outcome, duration_ms, suite, started, passed, episodes FROM evals WHERE id = ?", row).
		Scan(&e.Path, &e.ID, &e.Outcome, &e.DurationMS, &e.App, &started, &e.Passed, &e.Episodes)
	if errors.Is(err, sql.ErrNoRows) {
		return e, ErrNotFound
	}
	if err != nil {
		return e, s.wrap(err)
	}
	e.Started = parseTime(started)
	return e, nil
}

// Rate is how many episodes passed of a suite (Task "") or of one of its
// tasks on one day (UTC).
type Rate struct {
	Suite, Task      string
	Day              time.Time
	Passed, Episodes int
}

// PassRates are the pass rates by day of every suite, and of every task
// of each, of the evals f selects (its App, Outcome, Since, Until and
// Roots), oldest day first.
func (s *Store) PassRates(ctx context.Context, f Filter) (suites, tasks []Rate, err error) {
	w, args := evalsWhere(Filter{App: f.App, Outcome: f.Outcome, Since: f.Since, Until: f.Until, Roots: f.Roots})
	const day = "(started_ns / 86400000000000)"
	scan := func(q string, task bool) ([]Rate, error) {
		rows, err := s.db.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, s.wrap(err)
		}
		defer rows.Close()
		var out []Rate
		for rows.Next() {
			var r Rate
			var d int64
			dest := []any{&r.Suite, &d, &r.Passed, &r.Episodes}
			if task {
				dest = append(dest, &r.Task)
			}
			if err := rows.Scan(dest...); err != nil {
				return nil, s.wrap(err)
			}
			r.Day = time.Unix(d*86400, 0).UTC()
			out = append(out, r)
		}
		return out, s.wrap(rows.Err())
	}
	if suites, err = scan("SELECT suite, "+day+" AS d, sum(passed), sum(episodes) FROM evals"+w+" GROUP BY suite, d ORDER BY d, suite", false); err != nil {
		return nil, nil, err
	}
	tasks, err = scan(`SELECT suite, d, sum(e.category = 'passed'), count(*), e.task FROM episodes e
		JOIN (SELECT id, suite, `+day+` AS d FROM evals`+w+`) v ON v.id = e.eval
		GROUP BY suite, e.task, d ORDER BY d, suite, e.task`, true)
	return suites, tasks, err
}
