// Package store is agentbox's index of runs: one SQLite file (WAL mode,
// through the pure-Go driver modernc.org/sqlite, so the binary stays
// static) that holds a summary of every trace and eval it was told of —
// runs, their steps (number, actor, action kind, the result's outcome,
// durations) and events, evals and their episodes — so that `agentbox ls`
// answers from it without reading every trace directory.
//
// The traces stay the source of truth: every row is derived from a trace
// directory (run.json, steps.jsonl) or an eval's summary.json, and
// Rebuild recreates the store from them. A run indexes as it goes (the
// Indexer, called by trace.Writer after each record is written), in the
// order the trace is written; whatever the Indexer missed (a full queue,
// a store that could not be written, a run with --no-index) is caught up
// by Index, which re-reads a trace whose run.json is not the one indexed.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// SchemaVersion is the store's schema, kept in SQLite's user_version. A
// store of a newer version is refused; an older one is rebuilt.
//
//  1. the first
//  2. runs.sandbox: the named sandbox of a run (run --name)
const SchemaVersion = 2

// EnvPath names the environment variable that overrides DefaultPath; its
// value "off" turns the store off.
const EnvPath = "AGENTBOX_INDEX"

// Off is EnvPath's value (and --index's) that turns the store off.
const Off = "off"

// DefaultPath is where the store lives: $AGENTBOX_INDEX, else
// $XDG_DATA_HOME/agentbox/index.db, else ~/.local/share/agentbox/index.db.
func DefaultPath() (string, error) {
	if p := os.Getenv(EnvPath); p != "" {
		return p, nil
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "agentbox", "index.db"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("store: no home directory for the index (set %s): %w", EnvPath, err)
	}
	return filepath.Join(home, ".local", "share", "agentbox", "index.db"), nil
}

// BusyTimeoutMS is how long a writer waits for another (eval --parallel's
// episodes, other agentbox processes) before giving up.
const BusyTimeoutMS = 10000

// busyTimeoutMS is BusyTimeoutMS; a test makes it longer than any wait it
// holds the store locked for.
var busyTimeoutMS = BusyTimeoutMS

// Store is an open index. Its methods are safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string
}

// ErrDamaged is wrapped by the errors of a store whose file is not a
// SQLite database or is corrupt.
var ErrDamaged = errors.New("damaged")

// ErrNewer is wrapped by Open's error for a store of a newer schema.
var ErrNewer = errors.New("newer schema")

// Open opens (creating it and its directory if need be) the store at
// path. A store of an older schema is rebuilt empty (Index fills it again
// from the traces); one of a newer schema, or a damaged file, is an error
// naming the file.
func Open(path string) (*Store, error) {
	if path == "" || path == Off {
		return nil, errors.New("store: no path")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	dsn := "file:" + path + "?_pragma=busy_timeout(" + fmt.Sprint(busyTimeoutMS) + ")" +
		"&_pragma=journal_mode(wal)&_pragma=synchronous(normal)&_pragma=foreign_keys(on)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", path, err)
	}
	// One connection per process: writers of this process queue in Go,
	// writers of others wait on busy_timeout.
	db.SetMaxOpenConns(1)
	s := &Store{db: db, path: path}
	if err := s.migrate(context.Background()); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Path is the store's file.
func (s *Store) Path() string { return s.path }

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

// wrap turns a driver error into one that names the file, and, for a
// damaged file, says how to recover.
func (s *Store) wrap(err error) error {
	if err == nil {
		return nil
	}
	return wrapErr(s.path, err)
}

func wrapErr(path string, err error) error {
	if damaged(err) {
		return fmt.Errorf("store: %s is damaged (%v); `agentbox index --rebuild` recreates it from the traces: %w", path, err, ErrDamaged)
	}
	if errors.Is(err, ErrNewer) || errors.Is(err, ErrDamaged) {
		return err
	}
	return fmt.Errorf("store: %s: %w", path, err)
}

// damaged reports whether err says the file is not a database or corrupt.
func damaged(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			return true
		}
	}
	msg := err.Error()
	return strings.Contains(msg, "malformed") || strings.Contains(msg, "not a database")
}

const schema = `
CREATE TABLE runs(
	id INTEGER PRIMARY KEY,
	path TEXT NOT NULL UNIQUE,
	run_id TEXT NOT NULL DEFAULT '',
	status TEXT NOT NULL DEFAULT '',
	outcome TEXT NOT NULL DEFAULT '',
	reason TEXT NOT NULL DEFAULT '',
	message TEXT NOT NULL DEFAULT '',
	task TEXT NOT NULL DEFAULT '',
	app TEXT NOT NULL DEFAULT '',
	agent TEXT NOT NULL DEFAULT '',
	agent_name TEXT NOT NULL DEFAULT '',
	backend TEXT NOT NULL DEFAULT '',
	started TEXT NOT NULL DEFAULT '',
	started_ns INTEGER NOT NULL DEFAULT 0,
	duration_ms REAL NOT NULL DEFAULT 0,
	steps INTEGER NOT NULL DEFAULT 0,
	grade TEXT NOT NULL DEFAULT '',
	sandbox TEXT NOT NULL DEFAULT '',
	run_mtime_ns INTEGER,
	run_size INTEGER
);
CREATE INDEX runs_started ON runs(started_ns);
CREATE TABLE steps(
	run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	line INTEGER NOT NULL,
	step INTEGER NOT NULL,
	actor TEXT NOT NULL DEFAULT '',
	kind TEXT NOT NULL DEFAULT '',
	invalid TEXT NOT NULL DEFAULT '',
	t_ms REAL NOT NULL DEFAULT 0,
	decision_ms REAL NOT NULL DEFAULT 0,
	ok INTEGER,
	error TEXT NOT NULL DEFAULT '',
	duration_ms REAL,
	PRIMARY KEY(run, line)
) WITHOUT ROWID;
CREATE TABLE events(
	run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	line INTEGER NOT NULL,
	t_ms REAL NOT NULL DEFAULT 0,
	event TEXT NOT NULL DEFAULT '',
	data TEXT NOT NULL DEFAULT '',
	PRIMARY KEY(run, line)
) WITHOUT ROWID;
CREATE TABLE evals(
	id INTEGER PRIMARY KEY,
	path TEXT NOT NULL UNIQUE,
	run_id TEXT NOT NULL DEFAULT '',
	suite TEXT NOT NULL DEFAULT '',
	started TEXT NOT NULL DEFAULT '',
	started_ns INTEGER NOT NULL DEFAULT 0,
	duration_ms REAL NOT NULL DEFAULT 0,
	episodes INTEGER NOT NULL DEFAULT 0,
	passed INTEGER NOT NULL DEFAULT 0,
	outcome TEXT NOT NULL DEFAULT '',
	summary_mtime_ns INTEGER,
	summary_size INTEGER
);
CREATE TABLE episodes(
	eval INTEGER NOT NULL REFERENCES evals(id) ON DELETE CASCADE,
	task TEXT NOT NULL,
	n INTEGER NOT NULL,
	category TEXT NOT NULL DEFAULT '',
	outcome TEXT NOT NULL DEFAULT '',
	reason TEXT NOT NULL DEFAULT '',
	steps INTEGER NOT NULL DEFAULT 0,
	duration_ms REAL NOT NULL DEFAULT 0,
	trace TEXT NOT NULL DEFAULT '',
	PRIMARY KEY(eval, task, n)
) WITHOUT ROWID;
CREATE INDEX episodes_trace ON episodes(trace);
CREATE TABLE roots(
	path TEXT PRIMARY KEY,
	indexed_ns INTEGER NOT NULL
) WITHOUT ROWID;
`

// tables are the schema's tables, dropped by a rebuild.
var tables = []string{"episodes", "evals", "events", "steps", "runs", "roots"}

// migrate brings the file to SchemaVersion: creates the schema in an
// empty file, rebuilds an older one empty, refuses a newer one.
func (s *Store) migrate(ctx context.Context) error {
	var v int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return s.wrap(err)
	}
	switch {
	case v == SchemaVersion:
		// Touch the schema so a damaged file is found here, not mid-run.
		var n int
		return s.wrap(s.db.QueryRowContext(ctx, "SELECT count(*) FROM roots").Scan(&n))
	case v > SchemaVersion:
		return fmt.Errorf("store: %s has schema version %d, newer than this agentbox reads (%d); use a newer agentbox, or another file (--index, %s): %w",
			s.path, v, SchemaVersion, EnvPath, ErrNewer)
	}
	return s.recreate(ctx, false)
}

// recreate drops every table and creates the schema, in one transaction
// (unless force, a schema another process created meanwhile is taken as
// it is).
func (s *Store) recreate(ctx context.Context, force bool) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap(err)
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return s.wrap(err)
	}
	if v == SchemaVersion && !force {
		return nil // another process made it
	}
	for _, t := range tables {
		if _, err := tx.ExecContext(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
			return s.wrap(err)
		}
	}
	if _, err := tx.ExecContext(ctx, schema); err != nil {
		return s.wrap(err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)); err != nil {
		return s.wrap(err)
	}
	return s.wrap(tx.Commit())
}

// Remove deletes a store's file and its WAL and shared-memory files (for
// a rebuild of a damaged store).
func Remove(path string) error {
	var errs []error
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("store: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Rebuild empties the store at path, or, when it cannot be opened
// (damaged), removes the file and creates it anew. It returns the open
// store and what the old one had indexed, for the caller to index again:
// its roots (for Index), and the runs and evals outside them (for
// IndexTrace and IndexEval).
func Rebuild(ctx context.Context, path string) (s *Store, roots, others []string, err error) {
	s, err = Open(path)
	if err != nil {
		if errors.Is(err, ErrNewer) {
			return nil, nil, nil, err
		}
		if rerr := Remove(path); rerr != nil {
			return nil, nil, nil, errors.Join(err, rerr)
		}
		s, err = Open(path)
		return s, nil, nil, err
	}
	roots, others, err = s.known(ctx)
	if err != nil {
		s.Close()
		if rerr := Remove(path); rerr != nil {
			return nil, nil, nil, errors.Join(err, rerr)
		}
		s, err = Open(path)
		return s, nil, nil, err
	}
	if err := s.recreate(ctx, true); err != nil {
		s.Close()
		return nil, nil, nil, err
	}
	return s, roots, others, nil
}

// known lists the roots, and the runs and evals not below one.
func (s *Store) known(ctx context.Context) (roots, others []string, err error) {
	list := func(q string) ([]string, error) {
		rows, err := s.db.QueryContext(ctx, q)
		if err != nil {
			return nil, s.wrap(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var p string
			if err := rows.Scan(&p); err != nil {
				return nil, s.wrap(err)
			}
			out = append(out, p)
		}
		return out, s.wrap(rows.Err())
	}
	if roots, err = list("SELECT path FROM roots ORDER BY path"); err != nil {
		return nil, nil, err
	}
	for _, q := range []string{"SELECT path FROM evals ORDER BY path", "SELECT path FROM runs ORDER BY path"} {
		ps, err := list(q)
		if err != nil {
			return nil, nil, err
		}
		for _, p := range ps {
			if !underAny(p, roots) {
				others = append(others, p)
			}
		}
	}
	return roots, others, nil
}

func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if under(p, d) {
			return true
		}
	}
	return false
}

// under reports whether p is dir or below it.
func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
