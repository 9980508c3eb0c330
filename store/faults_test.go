package store

import (
	"bufio"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
)

// TestMain lets the test binary play a process writing the store (the
// helper-process pattern): AGENTBOX_STORE_WRITER=PATH,ROOT,N writes N
// traces under ROOT (0: forever), each indexed live, every few also
// indexed again whole, acknowledging each on stdout.
func TestMain(m *testing.M) {
	if v := os.Getenv("AGENTBOX_STORE_WRITER"); v != "" {
		os.Exit(storeWriter(v))
	}
	os.Exit(m.Run())
}

func storeWriter(v string) int {
	parts := strings.Split(v, ",")
	path, root := parts[0], parts[1]
	n, _ := strconv.Atoi(parts[2])
	s, err := Open(path)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	failed := false
	ix := NewIndexer(s, func(err error) { fmt.Println("warning", err); failed = true })
	out := bufio.NewWriter(os.Stdout)
	tb := &fatalTB{}
	for i := 0; n == 0 || i < n; i++ {
		dir := filepath.Join(root, fmt.Sprintf("%05d", i))
		writeTrace(tb, dir, ix, spec{app: "mover", agent: "demo", task: "t", outcome: trace.Success, steps: 20 + i%7, started: time.Now()})
		if err := ix.Flush(context.Background()); err != nil {
			fmt.Println("error", err)
			return 1
		}
		if i%4 == 3 { // a whole re-read too: Index's transactions get killed as well
			if err := s.IndexTrace(context.Background(), dir); err != nil {
				fmt.Println("error", err)
				return 1
			}
		}
		fmt.Fprintf(out, "ack %d\n", i)
		out.Flush()
	}
	ix.Close(time.Minute)
	s.Close()
	if failed {
		return 1
	}
	return 0
}

// fatalTB is the testing.TB of writeTrace in a helper process.
type fatalTB struct{ testing.TB }

func (*fatalTB) Helper() {}
func (*fatalTB) Fatal(args ...any) {
	fmt.Println(append([]any{"error"}, args...)...)
	os.Exit(1)
}

func writer(t *testing.T, path, root string, n int) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("AGENTBOX_STORE_WRITER=%s,%s,%d", path, root, n))
	cmd.Stderr = os.Stderr
	return cmd
}

// consistent checks what the store holds against the traces: every run
// the store holds as indexed whole (stamped) has exactly its trace's
// steps and results, and no step or event is without its run.
func consistent(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
	var orphans int
	s.db.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM steps WHERE run NOT IN (SELECT id FROM runs)) + (SELECT count(*) FROM events WHERE run NOT IN (SELECT id FROM runs))").Scan(&orphans)
	if orphans > 0 {
		t.Errorf("%d steps or events without their run", orphans)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT r.path, (SELECT count(*) FROM steps s WHERE s.run = r.id), (SELECT count(*) FROM steps s WHERE s.run = r.id AND s.ok IS NOT NULL)
		FROM runs r WHERE r.run_mtime_ns IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var p string
		var steps, results int
		rows.Scan(&p, &steps, &results)
		tr, err := trace.Open(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		want := 0
		for _, st := range tr.Steps {
			if st.Result != nil {
				want++
			}
		}
		if steps != len(tr.Steps) || results != want {
			t.Errorf("%s: the store has %d steps (%d with results), the trace %d (%d)", p, steps, results, len(tr.Steps), want)
		}
	}
}

// TestSIGKILLWriter kills a process writing the store at random points:
// every time the store opens, passes SQLite's integrity check and holds
// nothing a trace contradicts; Index then catches up every trace.
func TestSIGKILLWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.db")
	root := t.TempDir()
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	rounds := 8
	if testing.Short() {
		rounds = 3
	}
	for round := range rounds {
		dir := filepath.Join(root, strconv.Itoa(round))
		cmd := writer(t, path, dir, 0)
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acks := make(chan string, 1000)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				acks <- sc.Text()
			}
			close(acks)
		}()
		// Wait for a first whole trace, then kill somewhere in the next.
		select {
		case line := <-acks:
			if !strings.HasPrefix(line, "ack") {
				cmd.Process.Kill()
				t.Fatalf("writer: %s", line)
			}
		case <-time.After(2 * time.Minute):
			cmd.Process.Kill()
			t.Fatal("writer: no trace in 2 minutes")
		}
		time.Sleep(time.Duration(rng.Intn(300)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		for line := range acks {
			if !strings.HasPrefix(line, "ack") {
				t.Errorf("writer: %s", line)
			}
		}
		s, err := Open(path)
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		consistent(t, s)
		s.Close()
	}
	s := openStore(t, path)
	if _, err := s.Index(context.Background(), []string{root}, false, noWarn(t)); err != nil {
		t.Fatal(err)
	}
	consistent(t, s)
	var unstamped int
	s.db.QueryRow("SELECT count(*) FROM runs WHERE run_mtime_ns IS NULL").Scan(&unstamped)
	if unstamped > 0 {
		t.Errorf("%d runs not caught up by Index", unstamped)
	}
	var before int
	s.db.QueryRow("SELECT count(*) FROM runs").Scan(&before)
	s.Close()

	// agentbox index --rebuild after the kills: the store emptied and
	// recreated from the traces holds what the caught-up one held.
	rs, roots, _, err := Rebuild(context.Background(), path)
	if err != nil {
		t.Fatalf("rebuild after SIGKILL: %v", err)
	}
	defer rs.Close()
	if _, err := rs.Index(context.Background(), append(roots, root), true, noWarn(t)); err != nil {
		t.Fatal(err)
	}
	consistent(t, rs)
	var after int
	rs.db.QueryRow("SELECT count(*) FROM runs").Scan(&after)
	if after != before || after == 0 {
		t.Errorf("rebuilt store: %d runs, the caught-up one had %d", after, before)
	}
}

// TestConcurrentWriters: several processes indexing at once (WAL,
// busy_timeout) lose nothing and warn of nothing.
func TestConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "index.db")
	root := t.TempDir()
	const procs, each = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, procs)
	for p := range procs {
		cmd := writer(t, path, filepath.Join(root, strconv.Itoa(p)), each)
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := cmd.Output()
			if err != nil {
				errs <- fmt.Errorf("writer %d: %v: %s", p, err, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s := openStore(t, path)
	consistent(t, s)
	var runs, stamped int
	s.db.QueryRow("SELECT count(*), count(run_mtime_ns) FROM runs").Scan(&runs, &stamped)
	if runs != procs*each || stamped != runs {
		t.Errorf("%d runs (%d indexed whole), want %d", runs, stamped, procs*each)
	}
}

// TestFullDiskIndex writes traces, indexed live, while the store's disk
// (a small tmpfs) fills up: the Indexer warns and the runs go on with
// their traces whole (the traces are the truth; the index is rebuilt
// from them); the store reopens, passes SQLite's integrity check and
// holds nothing a trace contradicts; once the disk has room again, Index
// catches every trace up.
func TestFullDiskIndex(t *testing.T) {
	testenv.Require(t, testenv.Root("mounting a small tmpfs"))
	disk := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", disk).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", disk).CombinedOutput(); err != nil {
			t.Errorf("umount: %v\n%s", err, out)
		}
	})
	path := filepath.Join(disk, "index.db")
	root := t.TempDir()
	s := openStore(t, path)
	var mu sync.Mutex
	var warned error
	ix := NewIndexer(s, func(err error) { mu.Lock(); warned = err; mu.Unlock() })
	n := 0
	for ; n < 400; n++ {
		writeTrace(t, filepath.Join(root, fmt.Sprintf("%05d", n)), ix, spec{app: "mover", agent: "demo", task: "a task long enough to take room " + strings.Repeat("x", 200),
			outcome: trace.Success, steps: 40, started: time.Now()})
		ix.Flush(context.Background())
		mu.Lock()
		w := warned
		mu.Unlock()
		if w != nil {
			if n == 0 {
				t.Fatalf("the store's disk is too small for a first trace: %v", w)
			}
			t.Logf("the store's disk filled at trace %d: %v", n, w)
			break
		}
	}
	if warned == nil {
		t.Fatalf("%d traces indexed on a 2m disk and no warning", n)
	}
	// A few more runs while the disk is full: their traces are whole.
	for i := 0; i < 3; i++ {
		n++
		writeTrace(t, filepath.Join(root, fmt.Sprintf("%05d", n)), ix, spec{app: "mover", agent: "demo", task: "t", outcome: trace.Success, steps: 10, started: time.Now()})
	}
	ix.Close(time.Minute)
	s.Close()
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		tr, err := trace.Open(filepath.Join(root, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if bad := trace.Validate(tr); bad != nil {
			t.Fatalf("%s: %v", e.Name(), bad)
		}
	}

	s, err := Open(path)
	if err != nil {
		t.Fatalf("reopen on the full disk: %v", err)
	}
	consistent(t, s)
	s.Close()

	if out, err := exec.Command("mount", "-o", "remount,size=64m", disk).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v\n%s", err, out)
	}
	s = openStore(t, path)
	defer s.Close()
	if _, err := s.Index(context.Background(), []string{root}, false, noWarn(t)); err != nil {
		t.Fatal(err)
	}
	consistent(t, s)
	var runs, unstamped int
	s.db.QueryRow("SELECT count(*), count(*) FILTER (WHERE run_mtime_ns IS NULL) FROM runs").Scan(&runs, &unstamped)
	if runs != len(entries) || unstamped > 0 {
		t.Errorf("after Index with room: %d runs (%d not caught up), %d traces", runs, unstamped, len(entries))
	}
}
