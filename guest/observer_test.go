package guest

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/observe"
)

func startTestObserver(t *testing.T, root string, run bool) *observer {
	t.Helper()
	o, err := newObserver([]string{root}, filepath.Join(root, "home"), []string{filepath.Join(root, "home", ".run")})
	if err != nil {
		t.Fatal(err)
	}
	if run {
		go o.run()
	}
	t.Cleanup(o.close)
	return o
}

// fileEvents indexes checkpoints' file events by path, a path's
// operations over several checkpoints joined (the last one's hash kept).
func fileEvents(evs []observe.ActivityEvent) map[string]observe.ActivityEvent {
	m := map[string]observe.ActivityEvent{}
	for _, e := range evs {
		if e.Kind != observe.ActFile {
			continue
		}
		if old, ok := m[e.Path]; ok {
			var ops []string
			for _, op := range observe.FileOps {
				if old.Has(op) || e.Has(op) {
					ops = append(ops, op)
				}
			}
			e.Ops = ops
			if e.From == "" {
				e.From = old.From
			}
		}
		m[e.Path] = e
	}
	return m
}

func TestObserverFilesAndProcesses(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	if err := os.MkdirAll(filepath.Join(home, ".run"), 0o755); err != nil {
		t.Fatal(err)
	}
	o := startTestObserver(t, root, true)

	// What an app does: a child shell writes, renames over (an atomic
	// save), makes a directory with a file, deletes, and exits 3 once
	// told to (so the polling sees it run, whatever the machine's load).
	script := `echo hello > out.txt
echo draft > .doc.tmp && mv .doc.tmp doc.txt
mkdir -p sub/deep && echo x > sub/deep/y
echo gone > del && rm del
echo mine > .run/clock
echo ready
read go
exit 3`
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = home
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	// Its files are made before the first checkpoint.
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	running := o.checkpoint(0)
	stdin.Close()
	// Left a zombie until the observer has looked: its status is read
	// from /proc, as for a process the app has not reaped yet.
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if st, ok := parseStat(b); err != nil || !ok || st.state == 'Z' {
			break
		}
		runtime.Gosched()
	}
	o.mu.Lock()
	o.pollProcs(false)
	o.mu.Unlock()
	if err := cmd.Wait(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Fatalf("the script: %v", err)
	}
	evs := append(running, o.checkpoint(0)...)
	files := fileEvents(evs)

	sum := sha256.Sum256([]byte("hello\n"))
	want := map[string]struct {
		ops  []string
		hash string
		from string
	}{
		"~/out.txt":     {[]string{"created", "written"}, hex.EncodeToString(sum[:]), ""},
		"~/doc.txt":     {[]string{"created", "written", "renamed"}, "", "~/.doc.tmp"},
		"~/sub":         {[]string{"created"}, "", ""},
		"~/sub/deep/y":  {[]string{"created", "written"}, "", ""},
		"~/del":         {[]string{"created", "written", "deleted"}, "", ""},
		"~/.doc.tmp":    {nil, "", ""}, // folded into doc.txt
		"~/.run/clock":  {nil, "", ""}, // the guest's own
		"~/sub/deep":    {[]string{"created"}, "", ""},
		"~/sub/deep/y/": {nil, "", ""},
	}
	for p, w := range want {
		e, ok := files[p]
		if w.ops == nil {
			if ok {
				t.Errorf("%s: recorded (%v), want not", p, e)
			}
			continue
		}
		if !ok {
			t.Errorf("%s: not recorded; files: %v", p, files)
			continue
		}
		if !slices.Equal(e.Ops, w.ops) {
			t.Errorf("%s: ops %v, want %v", p, e.Ops, w.ops)
		}
		if w.hash != "" && e.SHA256 != w.hash {
			t.Errorf("%s: sha256 %q (%s), want %q", p, e.SHA256, e.NotHashed, w.hash)
		}
		if e.From != w.from {
			t.Errorf("%s: from %q, want %q", p, e.From, w.from)
		}
	}
	if e := files["~/del"]; e.SHA256 != "" || e.NotHashed != "gone at the checkpoint" {
		t.Errorf("~/del: %+v, want not hashed: gone", e)
	}

	// The shell's exec and its exit with the status read from the zombie.
	var execd, exited, unseen bool
	for _, e := range evs {
		switch {
		case e.Kind == observe.ActExec && e.PID == pid:
			execd = execd || len(e.Argv) == 3 && e.Argv[0] == "sh" && e.Argv[1] == "-c"
		case e.Kind == observe.ActExit && e.PID == pid:
			exited = exited || e.Exit != nil && e.Exit.Code == 3
		case e.Kind == observe.ActUnseen:
			unseen = e.N > 0
		}
	}
	_ = unseen // the host's other processes make it any number
	if !execd || !exited {
		t.Errorf("the shell: exec seen %v, exit 3 seen %v; events:\n%s", execd, exited, describe(evs))
	}

	// The next checkpoint starts afresh.
	if evs := fileEvents(o.checkpoint(0)); len(evs) != 0 {
		t.Errorf("second checkpoint: %v, want no file events", evs)
	}
}

func describe(evs []observe.ActivityEvent) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
}

// TestObserverBounds: past each bound an overflow event says what was
// lost, never silence: the checkpoint's event bound, and the kernel's
// queue overflowing while nothing drains it.
func TestObserverBounds(t *testing.T) {
	root := t.TempDir()
	o := startTestObserver(t, root, false) // no ticker: nothing drains
	for i := range 20 {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("f%02d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	evs := o.checkpoint(5)
	// The observer looks at every process it can see: in this test, the
	// host's, where other tests start processes of their own. A
	// checkpoint puts the processes (and the count of unseen ones) before
	// the files, so of the 5 events kept, those that are not files are
	// the host's, and each of them leaves one more file to the overflow.
	if len(evs) != 6 || evs[5].Kind != observe.ActOverflow {
		t.Fatalf("checkpoint(5) of 20 files: want 5 events and an overflow, got\n%s", describe(evs))
	}
	host := 0
	for i, e := range evs[:5] {
		if e.Kind != observe.ActFile {
			host++
			continue
		}
		if want := filepath.Join(root, fmt.Sprintf("f%02d", i-host)); e.Path != want {
			t.Fatalf("event %d is %s, want the file %s (the files in the order written)\n%s", i, e.Path, want, describe(evs))
		}
	}
	if host == 5 {
		t.Fatalf("the host started 5 processes or more during the test: nothing left to check of the files\n%s", describe(evs))
	}
	if evs[5].N != int64(15+host) {
		t.Fatalf("checkpoint(5) of 20 files and %d of the host's events: want an overflow of %d, got\n%s", host, 15+host, describe(evs))
	}

	max, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Skipf("no inotify queue bound to read: %v", err)
	}
	var n int
	fmt.Sscan(string(max), &n)
	if n > 1<<17 {
		t.Skipf("the kernel queues %d events; overflowing it takes too long", n)
	}
	// Three events a file (created, modified, closed); the kernel folds
	// only identical events in a row.
	for i := range n/3 + 10 {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("q%06d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	evs = o.checkpoint(0)
	var over bool
	for _, e := range evs {
		over = over || e.Kind == observe.ActOverflow && strings.Contains(e.Reason, "queue overflowed")
	}
	if !over {
		t.Fatalf("after %d writes undrained: no queue overflow event; got\n%s", n+10, describe(evs))
	}
}

func TestParseStat(t *testing.T) {
	line := "42 (a (b) c) Z 7 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 12345 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 768"
	s, ok := parseStat([]byte(line))
	if !ok || s.comm != "a (b) c" || s.state != 'Z' || s.ppid != 7 || s.start != 12345 || s.exitCode != 768 {
		t.Fatalf("parseStat = %+v, %v", s, ok)
	}
	if e := exitOfStatus(s.exitCode); e.Code != 3 || e.Signal != "" {
		t.Fatalf("status 768 = %+v, want exit code 3", e)
	}
	if e := exitOfStatus(9); e.Signal != "SIGKILL" {
		t.Fatalf("status 9 = %+v, want SIGKILL", e)
	}
	if _, ok := parseStat([]byte("42 comm")); ok {
		t.Fatal("parseStat accepted a line without (comm)")
	}
}

// BenchmarkObserverPoll is one look of the process observer at this
// machine's /proc: its processes listed (as many as are running, the
// guest's own in a sandbox, never read) and the observed ones read (the
// app's: here, 10 sleeping children).
func BenchmarkObserverPoll(b *testing.B) {
	o, err := newObserver(nil, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer o.close()
	for range 10 {
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		defer c.Wait()
		defer c.Process.Kill()
	}
	b.ReportMetric(float64(len(o.procs)), "listed")
	for b.Loop() {
		o.mu.Lock()
		o.pollProcs(false)
		o.events = o.events[:0]
		o.mu.Unlock()
	}
}

// BenchmarkObserverFileEvents is the observer's cost per file event: the
// kernel's events read and coalesced (a file created and written: three
// events), then the checkpoint (its hashing included). Its inverse is the
// rate of events one core keeps up with.
func BenchmarkObserverFileEvents(b *testing.B) {
	root := b.TempDir()
	o, err := newObserver([]string{root}, root, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer o.close()
	const files = 1000 // 3000 events: well inside the kernel's queue
	events := 0
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		for j := range files {
			if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("f%d-%d", i, j)), []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		o.mu.Lock()
		o.drain()
		o.mu.Unlock()
		evs := o.checkpoint(10 * files) // the host's own processes come too
		for _, e := range evs {
			if e.Kind == observe.ActOverflow {
				b.Fatalf("overflow: %s", e)
			}
		}
		events += 3 * files
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
}

// TestObserverExitStatusBeforeReap: the app's exit status is the
// observer's before the guest reaps it, so a look between the reaping and
// noteExit (a checkpoint at the wrong moment, on a busy machine) still
// finds the exit with its status.
func TestObserverExitStatusBeforeReap(t *testing.T) {
	o := startTestObserver(t, t.TempDir(), false)
	c := exec.Command("sh", "-c", "exit 3")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	pid := c.Process.Pid
	o.started(pid, c.Args)
	if !waitExited(pid) {
		t.Fatal("waitExited: false")
	}
	o.exiting(pid)
	c.Wait() // reaped; noteExit has not come
	var got *observe.ActivityEvent
	for _, e := range o.checkpoint(0) {
		if e.Kind == observe.ActExit && e.PID == pid {
			got = &e
		}
	}
	switch {
	case got == nil:
		t.Fatal("no exit event")
	case got.Exit == nil:
		t.Fatal("the exit has no status")
	case got.Exit.Code != 3:
		t.Errorf("exit status %+v, want code 3", *got.Exit)
	}
}
