package store

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/eval"
	"github.com/codegirl-games/agentbox/trace"
)

var base = time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)

// fixture writes runs and an eval under root, through ix when given.
func fixture(t *testing.T, root string, ix trace.Indexer) {
	t.Helper()
	runs := filepath.Join(root, "agentbox-runs")
	writeTrace(t, filepath.Join(runs, "r1"), ix, spec{app: "examples/mover", agent: "demo", task: "Move right", outcome: trace.Success, steps: 6, started: base})
	writeTrace(t, filepath.Join(runs, "r2"), ix, spec{app: "xcalc", agent: "openai", task: "Add 2 and 2", outcome: trace.Failure, steps: 3, started: base.Add(time.Hour)})
	writeTrace(t, filepath.Join(runs, "r3"), ix, spec{app: "examples/mover", agent: "idle", steps: 2, started: base.Add(2 * time.Hour), unfinished: true})
	ev := filepath.Join(root, "agentbox-evals", "e1")
	writeTrace(t, filepath.Join(ev, "t", "001"), ix, spec{app: "/src/mover", agent: "script", task: "Eval task", outcome: trace.Success, steps: 4, started: base.Add(3 * time.Hour)})
	writeTrace(t, filepath.Join(ev, "t", "002"), ix, spec{app: "/src/mover", agent: "script", task: "Eval task", outcome: trace.Failure, steps: 5, started: base.Add(3 * time.Hour)})
	writeEval(t, ev, "nightly", base.Add(3*time.Hour), []eval.Episode{
		{Task: "t", N: 1, Category: eval.Passed, Outcome: trace.Success, Steps: 4, Trace: "t/001"},
		{Task: "t", N: 2, Category: eval.Failed, Outcome: trace.Failure, Steps: 5, Trace: "t/002"},
	})
}

func paths(es []Entry, root string) []string {
	var out []string
	for _, e := range es {
		rel, _ := filepath.Rel(root, e.Path)
		out = append(out, e.Kind+":"+filepath.ToSlash(rel))
	}
	return out
}

// TestIndexQuery: Index reads traces and evals; Query filters them as ls
// does; a second Index reads nothing again; a changed run.json is read
// again; a removed trace is forgotten.
func TestIndexQuery(t *testing.T) {
	root := t.TempDir()
	fixture(t, root, nil)
	s := openStore(t, filepath.Join(t.TempDir(), "index.db"))
	ctx := context.Background()
	st, err := s.Index(ctx, []string{root}, false, noWarn(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.Runs != 5 || st.Evals != 1 {
		t.Fatalf("stats %+v, want 5 runs and 1 eval", st)
	}
	c, _ := s.Count(ctx)
	if c.Steps != 6+3+2+4+5 || c.Episodes != 2 || c.Events != 2 {
		t.Errorf("counts %+v", c)
	}
	for _, tc := range []struct {
		name string
		f    Filter
		want []string
	}{
		{"all under root: the eval's episodes hidden", Filter{Under: root},
			[]string{"run:agentbox-runs/r3", "run:agentbox-runs/r2", "run:agentbox-runs/r1", "eval:agentbox-evals/e1"}},
		{"the eval's own dir lists its episodes", Filter{Under: filepath.Join(root, "agentbox-evals", "e1")},
			[]string{"run:agentbox-evals/e1/t/001", "run:agentbox-evals/e1/t/002", "eval:agentbox-evals/e1"}},
		{"app", Filter{Under: root, App: "MOVER"}, []string{"run:agentbox-runs/r3", "run:agentbox-runs/r1"}},
		{"agent", Filter{Under: root, Agent: "openai"}, []string{"run:agentbox-runs/r2"}},
		{"outcome", Filter{Under: root, Outcome: "failure"}, []string{"run:agentbox-runs/r2"}},
		{"incomplete", Filter{Under: root, Outcome: "incomplete"}, []string{"run:agentbox-runs/r3"}},
		{"eval outcome", Filter{Under: root, Outcome: "failed"}, []string{"eval:agentbox-evals/e1"}},
		{"task", Filter{Under: root, Task: "2 AND"}, []string{"run:agentbox-runs/r2"}},
		{"task with LIKE's wildcards taken literally", Filter{Under: root, Task: "%"}, nil},
		{"since until", Filter{Under: root, Since: base.Add(30 * time.Minute), Until: base.Add(2 * time.Hour)}, []string{"run:agentbox-runs/r2"}},
		{"eval by path", Filter{Eval: filepath.Join(root, "agentbox-evals", "e1")}, []string{"run:agentbox-evals/e1/t/001", "run:agentbox-evals/e1/t/002"}},
		{"eval by ID", Filter{Eval: "e1", Outcome: "failure"}, []string{"run:agentbox-evals/e1/t/002"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es, err := s.Query(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if got := paths(es, root); !slices.Equal(got, tc.want) {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}

	st, err = s.Index(ctx, []string{root}, false, noWarn(t))
	if err != nil || st.Runs != 0 || st.Evals != 0 || st.Unchanged != 6 {
		t.Errorf("second index: %+v %v, want all unchanged", st, err)
	}
	// r3 is finished after all (its run.json rewritten); r2 is removed.
	r3 := filepath.Join(root, "agentbox-runs", "r3")
	run, _ := trace.ReadRun(r3)
	run.Status, run.Outcome = trace.StatusComplete, trace.Interrupted
	writeRunJSON(t, r3, run)
	if err := os.RemoveAll(filepath.Join(root, "agentbox-runs", "r2")); err != nil {
		t.Fatal(err)
	}
	st, err = s.Index(ctx, []string{root}, false, noWarn(t))
	if err != nil || st.Runs != 1 || st.Removed != 1 {
		t.Errorf("third index: %+v %v, want r3 again and r2 removed", st, err)
	}
	es, _ := s.Query(ctx, Filter{Under: root, Outcome: "interrupted"})
	if got := paths(es, root); !slices.Equal(got, []string{"run:agentbox-runs/r3"}) {
		t.Errorf("after the change: %q", got)
	}
	if ok, _ := s.Covered(ctx, filepath.Join(root, "agentbox-runs")); !ok {
		t.Error("a directory below a root is not covered")
	}
	if ok, _ := s.Covered(ctx, filepath.Dir(root)); ok {
		t.Error("the root's parent is covered")
	}
}

func writeRunJSON(t *testing.T, dir string, r trace.Run) {
	t.Helper()
	data, err := jsonMarshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, trace.RunFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLiveEqualsRebuild: what the Indexer writes as the traces are written
// is what a rebuild from the traces writes.
func TestLiveEqualsRebuild(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(t.TempDir(), "index.db")
	s := openStore(t, path)
	var warned []error
	ix := NewIndexer(s, func(err error) { warned = append(warned, err) })
	fixture(t, root, ix)
	ix.Eval(filepath.Join(root, "agentbox-evals", "e1"))
	if err := ix.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	ix.Close(time.Minute)
	if len(warned) > 0 {
		t.Fatal(warned)
	}
	live := dump(t, s)
	if len(live) == 0 {
		t.Fatal("nothing indexed live")
	}
	// Live, a finished run has its stamp: Index reads nothing again.
	st, err := s.Index(context.Background(), []string{root}, false, noWarn(t))
	if err != nil || st.Runs != 1 || st.Unchanged != 5 {
		t.Errorf("index after live: %+v %v, want only the unfinished run read again", st, err)
	}
	s.Close()

	s2, roots, others, err := Rebuild(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if !slices.Equal(roots, []string{root}) || len(others) != 0 {
		t.Errorf("rebuild knew roots %q, others %q", roots, others)
	}
	if _, err := s2.Index(context.Background(), roots, true, noWarn(t)); err != nil {
		t.Fatal(err)
	}
	rebuilt := dump(t, s2)
	if !slices.Equal(live, rebuilt) {
		t.Errorf("live index and rebuild differ:\nlive:\n%s\nrebuilt:\n%s", strings.Join(live, "\n"), strings.Join(rebuilt, "\n"))
	}
}

// TestIndexerNeverBlocks: a store another process holds locked does not
// slow the trace writer; what was missed leaves no stamp, and Index
// catches it up. Not timed: the store's wait for the lock is made longer
// than the test holds it, so the whole trace is written while the
// indexer's first transaction still waits — a writer that waited for the
// index at any record would never end.
func TestIndexerNeverBlocks(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(t.TempDir(), "index.db")
	busyTimeoutMS = int((10 * time.Minute).Milliseconds())
	t.Cleanup(func() { busyTimeoutMS = BusyTimeoutMS })
	s := openStore(t, path)
	// Another connection holds the write lock throughout.
	other, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT INTO roots(path, indexed_ns) VALUES('/x', 1)"); err != nil {
		t.Fatal(err)
	}
	warned := make(chan error, 1)
	ix := NewIndexer(s, func(err error) { warned <- err })
	// Should the writer wait for the index after all, the store is
	// unlocked after a while (far longer than the writing takes on a busy
	// machine) so that the test ends, and says so.
	var unlocked atomic.Bool
	watchdog := time.AfterFunc(indexerWatchdog, func() { unlocked.Store(true); tx.Rollback() })
	dir := filepath.Join(root, "run")
	writeTrace(t, dir, ix, spec{app: "a", agent: "demo", outcome: trace.Success, steps: 3000, started: base})
	watchdog.Stop()
	if unlocked.Load() {
		t.Errorf("writing the trace ended only after the store was unlocked (%v): it waited for the index", indexerWatchdog)
	}
	if n := ix.attempts.Load(); n != 0 {
		t.Errorf("the index ended %d transactions while another connection held the store locked", n)
	}
	tx.Rollback()
	ix.Close(time.Minute)
	select {
	case err := <-warned:
		t.Logf("warned: %v", err)
	default:
		t.Error("no warning for a store that could not be written")
	}
	st, err := s.Index(context.Background(), []string{root}, false, noWarn(t))
	if err != nil || st.Runs != 1 {
		t.Fatalf("index: %+v %v, want the run caught up", st, err)
	}
	c, _ := s.Count(context.Background())
	if c.Steps != 3000 {
		t.Errorf("%d steps indexed, want 3000", c.Steps)
	}
}

// indexerWatchdog bounds TestIndexerNeverBlocks' wait for a writer that
// waits for the index.
var indexerWatchdog = 5 * time.Minute

// TestSchemaVersions: a newer schema is refused with the file named; an
// older one is rebuilt.
func TestSchemaVersions(t *testing.T) {
	dir := t.TempDir()
	newer := filepath.Join(dir, "newer.db")
	s := openStore(t, newer)
	if _, err := s.db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(newer)
	if err == nil || !errors.Is(err, ErrNewer) || !strings.Contains(err.Error(), newer) || !strings.Contains(err.Error(), "99") {
		t.Errorf("newer schema: %v", err)
	}

	older := filepath.Join(dir, "older.db")
	db, err := sql.Open("sqlite", "file:"+older)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE runs(path TEXT); INSERT INTO runs VALUES('/old')"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s = openStore(t, older)
	var v int
	s.db.QueryRow("PRAGMA user_version").Scan(&v)
	c, err := s.Count(context.Background())
	if v != SchemaVersion || err != nil || c.Runs != 0 {
		t.Errorf("older schema: version %d, %+v, %v; want it rebuilt empty", v, c, err)
	}
}

// TestDamaged: a file that is not a database, or a store cut short, is an
// error naming the file and suggesting agentbox index --rebuild, which
// recreates it.
func TestDamaged(t *testing.T) {
	root := t.TempDir()
	for i := range 40 {
		writeTrace(t, filepath.Join(root, "r", string(rune('a'+i%26))+string(rune('a'+i/26))), nil,
			spec{app: strings.Repeat("app", 50), agent: "demo", outcome: trace.Success, steps: 60, started: base})
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"garbage", func(t *testing.T, path string) {
			os.WriteFile(path, []byte(strings.Repeat("not a database ", 1000)), 0o644)
		}},
		{"truncated", func(t *testing.T, path string) {
			fi, _ := os.Stat(path)
			if err := os.Truncate(path, fi.Size()/3); err != nil {
				t.Fatal(err)
			}
		}},
		{"header overwritten", func(t *testing.T, path string) {
			f, _ := os.OpenFile(path, os.O_WRONLY, 0)
			f.WriteAt([]byte("SQLite format 3\x00\xff\xff\x09\x09"), 0)
			f.WriteAt(make([]byte, 4096), 4096)
			f.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "index.db")
			s := openStore(t, path)
			if _, err := s.Index(context.Background(), []string{root}, false, noWarn(t)); err != nil {
				t.Fatal(err)
			}
			s.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
			s.Close()
			tc.damage(t, path)
			err := func() error {
				s, err := Open(path)
				if err != nil {
					return err
				}
				defer s.Close()
				if _, err := s.Query(context.Background(), Filter{Under: root}); err != nil {
					return err
				}
				_, err = s.Index(context.Background(), []string{root}, true, func(string) {})
				return err
			}()
			if err == nil || !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "agentbox index --rebuild") {
				t.Fatalf("damaged store: %v; want an error naming %s and the rebuild", err, path)
			}
			s2, _, _, err := Rebuild(context.Background(), path)
			if err != nil {
				t.Fatalf("rebuild: %v", err)
			}
			defer s2.Close()
			if _, err := s2.Index(context.Background(), []string{root}, true, noWarn(t)); err != nil {
				t.Fatal(err)
			}
			if err := s2.Check(context.Background()); err != nil {
				t.Fatal(err)
			}
			if c, _ := s2.Count(context.Background()); c.Runs != 40 || c.Steps != 40*60 {
				t.Errorf("rebuilt: %+v", c)
			}
		})
	}
}
