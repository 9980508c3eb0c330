package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/eval"
	"github.com/codegirl-games/agentbox/internal/textcut"
	"github.com/codegirl-games/agentbox/trace"
)

// maxDepth bounds how deep Index looks for traces below a directory that
// is neither a trace nor an eval (eval suites put them at SUITE/TASK/NNN).
const maxDepth = 6

// maxEventData bounds an event's data as stored (the trace has it whole).
const maxEventData = 2048

// batch is how many traces Index writes per transaction.
const batch = 200

// Stats says what Index did.
type Stats struct {
	Runs, Evals int // indexed (new or changed)
	Unchanged   int // already indexed as they are
	Removed     int // rows of traces no longer on disk
}

// AppLabel is how ls names a run's app: TARGET as given, else the command.
func AppLabel(a trace.AppInfo) string {
	if a.Target != "" {
		return a.Target
	}
	return a.Command
}

// AgentLabel is how ls names a run's agent.
func AgentLabel(a trace.AgentInfo) string {
	if a.Name == "script" && a.Options["file"] != "" {
		return "script " + filepath.Base(a.Options["file"])
	}
	if a.Name == "replay" && a.Options["source"] != "" {
		return "replay of " + a.Options["source"]
	}
	return a.Name
}

// EvalOutcome is an eval's outcome in the words of its exit code.
func EvalOutcome(s *eval.Summary) string {
	switch s.ExitCode() {
	case 0:
		return "passed"
	case 1:
		return "failed"
	case 130:
		return "interrupted"
	}
	return "infrastructure"
}

func abs(dir string) (string, error) {
	a, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("store: %w", err)
	}
	return a, nil
}

// Index adds to the store what it lacks of the traces and evals under
// dirs: a trace whose run.json is not the one indexed (by size and
// modification time) is read again whole; rows of traces and evals under
// dirs that are gone are removed. With force every trace is read again.
// dirs become roots: ls answers for them from the store. Problems with
// single traces are passed to warn and skipped.
func (s *Store) Index(ctx context.Context, dirs []string, force bool, warn func(string)) (Stats, error) {
	var st Stats
	for _, d := range dirs {
		ad, err := abs(d)
		if err != nil {
			return st, err
		}
		if err := s.indexDir(ctx, ad, force, warn, &st); err != nil {
			return st, err
		}
	}
	return st, nil
}

type stamp struct{ mtime, size int64 }

func (s *Store) stamps(ctx context.Context, q, dir string) (map[string]stamp, error) {
	rows, err := s.db.QueryContext(ctx, q, dir, dir+"/", dir+"0")
	if err != nil {
		return nil, s.wrap(err)
	}
	defer rows.Close()
	m := map[string]stamp{}
	for rows.Next() {
		var p string
		var mt, sz sql.NullInt64
		if err := rows.Scan(&p, &mt, &sz); err != nil {
			return nil, s.wrap(err)
		}
		m[p] = stamp{mt.Int64, sz.Int64}
		if !mt.Valid {
			m[p] = stamp{-1, -1}
		}
	}
	return m, s.wrap(rows.Err())
}

// below is the condition "path is ?1 or below it" (?2 = ?1+"/", ?3 = ?1+"0",
// '0' being the byte after '/').
const below = "(path = ? OR (path >= ? AND path < ?))"

func (s *Store) indexDir(ctx context.Context, dir string, force bool, warn func(string), st *Stats) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("store: %s is not a directory", dir)
	}
	runs, err := s.stamps(ctx, "SELECT path, run_mtime_ns, run_size FROM runs WHERE "+below, dir)
	if err != nil {
		return err
	}
	evals, err := s.stamps(ctx, "SELECT path, summary_mtime_ns, summary_size FROM evals WHERE "+below, dir)
	if err != nil {
		return err
	}
	seenRuns, seenEvals := map[string]bool{}, map[string]bool{}
	var pendingRuns []string
	var pendingEvals []string
	flush := func() error {
		if len(pendingRuns) == 0 && len(pendingEvals) == 0 {
			return nil
		}
		err := s.tx(ctx, func(tx *wtx) error {
			for _, p := range pendingRuns {
				if err := indexTraceTx(ctx, tx, p); err != nil {
					if errors.Is(err, errSkip) {
						warn(strings.TrimPrefix(err.Error(), "trace: "))
						continue
					}
					return err
				}
				st.Runs++
			}
			for _, p := range pendingEvals {
				if err := indexEvalTx(ctx, tx, p); err != nil {
					if errors.Is(err, errSkip) {
						warn(strings.TrimPrefix(err.Error(), "eval: "))
						continue
					}
					return err
				}
				st.Evals++
			}
			return nil
		})
		pendingRuns, pendingEvals = pendingRuns[:0], pendingEvals[:0]
		return err
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			warn(err.Error())
			return fs.SkipDir
		}
		if !d.IsDir() {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if sfi, err := os.Stat(filepath.Join(p, eval.SummaryFile)); err == nil {
			seenEvals[p] = true
			if old, ok := evals[p]; force || !ok || old != (stamp{sfi.ModTime().UnixNano(), sfi.Size()}) {
				pendingEvals = append(pendingEvals, p)
			} else {
				st.Unchanged++
			}
			return nil // and its episodes below it
		}
		rfi, err := os.Stat(filepath.Join(p, trace.RunFile))
		if err != nil {
			rel, _ := filepath.Rel(dir, p)
			depth := 0
			if rel != "." {
				depth = strings.Count(rel, string(filepath.Separator)) + 1
			}
			if depth >= maxDepth || (p != dir && d.Name() == trace.ScreenshotsDir) {
				return fs.SkipDir
			}
			return nil
		}
		seenRuns[p] = true
		if old, ok := runs[p]; force || !ok || old != (stamp{rfi.ModTime().UnixNano(), rfi.Size()}) {
			pendingRuns = append(pendingRuns, p)
			if len(pendingRuns) >= batch {
				if err := flush(); err != nil {
					return err
				}
			}
		} else {
			st.Unchanged++
		}
		return fs.SkipDir // a trace's own folders hold no traces
	})
	if err != nil {
		if errors.Is(err, ErrDamaged) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return s.wrap(err)
	}
	if err := flush(); err != nil {
		return err
	}
	return s.tx(ctx, func(tx *wtx) error {
		for p := range runs {
			if !seenRuns[p] {
				if _, err := tx.ExecContext(ctx, "DELETE FROM runs WHERE path = ?", p); err != nil {
					return err
				}
				st.Removed++
			}
		}
		for p := range evals {
			if !seenEvals[p] {
				if _, err := tx.ExecContext(ctx, "DELETE FROM evals WHERE path = ?", p); err != nil {
					return err
				}
				st.Removed++
			}
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO roots(path, indexed_ns) VALUES(?, ?) ON CONFLICT(path) DO UPDATE SET indexed_ns = excluded.indexed_ns",
			dir, time.Now().UnixNano())
		return err
	})
}

// wtx is a write transaction whose statements are prepared once each.
type wtx struct {
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
}

func (w *wtx) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if st, ok := w.stmts[q]; ok {
		return st, nil
	}
	st, err := w.tx.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	w.stmts[q] = st
	return st, nil
}

// ExecContext runs q's prepared statement.
func (w *wtx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	st, err := w.stmt(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// QueryRowContext runs q's prepared statement for one row.
func (w *wtx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	st, err := w.stmt(ctx, q)
	if err != nil {
		return w.tx.QueryRowContext(ctx, q, args...) // reports the same error
	}
	return st.QueryRowContext(ctx, args...)
}

// tx runs f in one (immediate) transaction.
func (s *Store) tx(ctx context.Context, f func(*wtx) error) error {
	t, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap(err)
	}
	tx := &wtx{tx: t, stmts: map[string]*sql.Stmt{}}
	if err := f(tx); err != nil {
		t.Rollback()
		return s.wrap(err)
	}
	return s.wrap(t.Commit())
}

// errSkip marks a trace or eval that cannot be indexed (not the store's fault).
var errSkip = errors.New("skipped")

type skipError struct{ err error }

func (e *skipError) Error() string        { return e.err.Error() }
func (e *skipError) Is(target error) bool { return target == errSkip }
func (e *skipError) Unwrap() error        { return e.err }

// IndexTrace indexes one trace directory whole, from the trace.
func (s *Store) IndexTrace(ctx context.Context, dir string) error {
	ad, err := abs(dir)
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx *wtx) error { return indexTraceTx(ctx, tx, ad) })
}

// IndexEval indexes one eval directory (its summary.json and episodes;
// the episodes' traces are indexed on their own).
func (s *Store) IndexEval(ctx context.Context, dir string) error {
	ad, err := abs(dir)
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx *wtx) error { return indexEvalTx(ctx, tx, ad) })
}

func indexTraceTx(ctx context.Context, tx *wtx, dir string) error {
	fi, err := os.Stat(filepath.Join(dir, trace.RunFile))
	if err != nil {
		return &skipError{err}
	}
	t, err := trace.Open(dir)
	if err != nil {
		// A run.json alone (steps.jsonl lost) is still a run ls lists.
		run, rerr := trace.ReadRun(dir)
		if rerr != nil || !errors.Is(err, fs.ErrNotExist) {
			return &skipError{err}
		}
		t = &trace.Trace{Run: run}
	}
	id, err := upsertRun(ctx, tx, dir, t.Run)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM steps WHERE run = ?", id); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM events WHERE run = ?", id); err != nil {
		return err
	}
	stepLines := map[int]int{}
	for line, r := range t.Records {
		if err := recordTx(ctx, tx, id, line, summarize(r), stepLines); err != nil {
			return err
		}
	}
	_, err = tx.ExecContext(ctx, "UPDATE runs SET run_mtime_ns = ?, run_size = ? WHERE id = ?", fi.ModTime().UnixNano(), fi.Size(), id)
	return err
}

// upsertRun writes a run's row (its stamp cleared) and returns its id.
func upsertRun(ctx context.Context, tx *wtx, dir string, r trace.Run) (int64, error) {
	started := ""
	var startedNS int64
	if !r.Started.IsZero() {
		started, startedNS = r.Started.Format(time.RFC3339Nano), r.Started.UnixNano()
	}
	grade := ""
	if r.Grade != nil {
		grade = r.Grade.Outcome
	}
	var id int64
	err := tx.QueryRowContext(ctx, `INSERT INTO runs(path, run_id, status, outcome, reason, message, task, app, agent, agent_name,
		backend, started, started_ns, duration_ms, steps, grade, sandbox, run_mtime_ns, run_size)
		VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,NULL,NULL)
		ON CONFLICT(path) DO UPDATE SET run_id=excluded.run_id, status=excluded.status, outcome=excluded.outcome,
		reason=excluded.reason, message=excluded.message, task=excluded.task, app=excluded.app, agent=excluded.agent,
		agent_name=excluded.agent_name, backend=excluded.backend, started=excluded.started, started_ns=excluded.started_ns,
		duration_ms=excluded.duration_ms, steps=max(excluded.steps, runs.steps), grade=excluded.grade, sandbox=excluded.sandbox, run_mtime_ns=NULL, run_size=NULL
		RETURNING id`,
		dir, r.ID, r.Status, string(r.Outcome), r.Reason, textcut.Bytes(r.Message, 1024, "…"), r.Task, AppLabel(r.App), AgentLabel(r.Agent), r.Agent.Name,
		r.Env.Backend, started, startedNS, r.DurationMS, r.Steps, grade, r.Env.Sandbox).Scan(&id)
	return id, err
}

// rec is what the store keeps of one line of steps.jsonl.
type rec struct {
	typ        string
	step       int
	actor      string
	kind       string
	invalid    string
	tms        float64
	decisionMS float64
	ok         bool
	err        string
	durationMS float64
	event      string
	data       string
}

func summarize(r trace.Record) rec {
	x := rec{typ: r.Type, step: r.Step, actor: r.Actor, tms: r.TMS, invalid: textcut.Bytes(r.Invalid, 512, "…"), event: r.Event, durationMS: r.DurationMS}
	if r.Action != nil {
		x.kind = string(r.Action.Kind)
	}
	if r.Decision != nil {
		x.decisionMS = r.Decision.LatencyMS
	}
	if r.Result != nil {
		x.ok, x.err = r.Result.OK, textcut.Bytes(r.Result.Error, 512, "…")
	}
	if r.Type == trace.TypeStep && x.actor == "" {
		x.actor = trace.ActorAgent
	}
	if r.Type == trace.TypeEvent && len(r.Data) > 0 {
		if b, err := json.Marshal(r.Data); err == nil {
			x.data = textcut.Bytes(string(b), maxEventData, "…")
		}
	}
	return x
}

// recordTx writes line of a run's steps.jsonl: a step's row, the result
// onto its step's row, an event's row. Idempotent. stepLines holds the
// line of each step number's latest step record, as recordTx saw them
// (a result goes onto that row, as trace.Open pairs them).
func recordTx(ctx context.Context, tx *wtx, run int64, line int, x rec, stepLines map[int]int) error {
	var err error
	switch x.typ {
	case trace.TypeStep:
		stepLines[x.step] = line
		_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO steps(run, line, step, actor, kind, invalid, t_ms, decision_ms)
			VALUES(?,?,?,?,?,?,?,?)`, run, line, x.step, x.actor, x.kind, x.invalid, x.tms, x.decisionMS)
		if err == nil {
			_, err = tx.ExecContext(ctx, "UPDATE runs SET steps = ? WHERE id = ? AND steps < ?", x.step, run, x.step)
		}
	case trace.TypeResult:
		if sl, ok := stepLines[x.step]; ok {
			_, err = tx.ExecContext(ctx, "UPDATE steps SET ok = ?, error = ?, duration_ms = ? WHERE run = ? AND line = ?",
				x.ok, x.err, x.durationMS, run, sl)
			break
		}
		_, err = tx.ExecContext(ctx, `UPDATE steps SET ok = ?, error = ?, duration_ms = ?
			WHERE run = ? AND line = (SELECT max(line) FROM steps WHERE run = ? AND step = ? AND line < ?)`,
			x.ok, x.err, x.durationMS, run, run, x.step, line)
	case trace.TypeEvent:
		_, err = tx.ExecContext(ctx, "INSERT OR REPLACE INTO events(run, line, t_ms, event, data) VALUES(?,?,?,?,?)",
			run, line, x.tms, x.event, x.data)
	}
	return err
}

func indexEvalTx(ctx context.Context, tx *wtx, dir string) error {
	fi, err := os.Stat(filepath.Join(dir, eval.SummaryFile))
	if err != nil {
		return &skipError{err}
	}
	sum, err := eval.ReadSummary(dir)
	if err != nil {
		return &skipError{err}
	}
	started := ""
	var startedNS int64
	if !sum.Started.IsZero() {
		started, startedNS = sum.Started.Format(time.RFC3339Nano), sum.Started.UnixNano()
	}
	var id int64
	err = tx.QueryRowContext(ctx, `INSERT INTO evals(path, run_id, suite, started, started_ns, duration_ms, episodes, passed, outcome, summary_mtime_ns, summary_size)
		VALUES(?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT(path) DO UPDATE SET run_id=excluded.run_id, suite=excluded.suite, started=excluded.started, started_ns=excluded.started_ns,
		duration_ms=excluded.duration_ms, episodes=excluded.episodes, passed=excluded.passed, outcome=excluded.outcome,
		summary_mtime_ns=excluded.summary_mtime_ns, summary_size=excluded.summary_size
		RETURNING id`,
		dir, sum.RunID, sum.Suite, started, startedNS, sum.DurationMS, sum.Totals.Episodes, sum.Totals.Passed, EvalOutcome(sum),
		fi.ModTime().UnixNano(), fi.Size()).Scan(&id)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM episodes WHERE eval = ?", id); err != nil {
		return err
	}
	for _, ep := range sum.Episodes {
		tr := ""
		if ep.Trace != "" && filepath.IsLocal(filepath.FromSlash(ep.Trace)) {
			tr = filepath.Join(dir, filepath.FromSlash(ep.Trace))
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO episodes(eval, task, n, category, outcome, reason, steps, duration_ms, trace)
			VALUES(?,?,?,?,?,?,?,?,?)`, id, ep.Task, ep.N, ep.Category, string(ep.Outcome), ep.Reason, ep.Steps, ep.DurationMS, tr); err != nil {
			return err
		}
	}
	return nil
}

// Covered reports whether dir is a root or below one: whether ls may
// answer for it from the store.
func (s *Store) Covered(ctx context.Context, dir string) (bool, error) {
	ad, err := abs(dir)
	if err != nil {
		return false, err
	}
	rows, err := s.db.QueryContext(ctx, "SELECT path FROM roots WHERE path <= ?", ad)
	if err != nil {
		return false, s.wrap(err)
	}
	defer rows.Close()
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return false, s.wrap(err)
		}
		if under(ad, p) {
			return true, nil
		}
	}
	return false, s.wrap(rows.Err())
}
