package atspi_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/guest/atspi"
	"github.com/codegirl-games/agentbox/guest/xserver"
	"github.com/codegirl-games/agentbox/guest/xserver/xservertest"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/observe"
)

// launcherNeed is the bus launcher, where Debian installs it.
func launcherNeed() testenv.Need {
	_, err := os.Stat("/usr/libexec/at-spi-bus-launcher")
	return testenv.Condition("AT-SPI's bus launcher (at-spi2-core)", err)
}

// desktop is a display with a window manager and a running bus.
type desktop struct {
	display string
	home    string
	bus     *atspi.Bus
	env     []string // more environment for the programs it starts
}

func startDesktop(t testing.TB) *desktop {
	t.Helper()
	testenv.Require(t, testenv.Programs("Xvfb", "openbox", "dbus-daemon"), launcherNeed())
	srv := xservertest.Start(t, xserver.Config{Width: 800, Height: 600, Depth: 24})
	xservertest.StartWM(t, srv.Display())
	home := t.TempDir()
	run := filepath.Join(home, ".run")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var log strings.Builder
	bus, err := atspi.Start(ctx, atspi.Config{Dir: filepath.Join(run, "a11y"), Env: baseEnv(srv.Display(), home), Stderr: &syncWriter{b: &log}})
	if err != nil {
		t.Fatalf("start the bus: %v\n%s", err, log.String())
	}
	t.Cleanup(bus.Stop)
	return &desktop{display: srv.Display(), home: home, bus: bus}
}

func baseEnv(display, home string) []string {
	return []string{
		"DISPLAY=" + display, "HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8",
		"XDG_RUNTIME_DIR=" + filepath.Join(home, ".run"),
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
	}
}

// app starts a program on the desktop with the bus's environment; its
// stdout lines arrive on the returned channel.
func (d *desktop) app(t testing.TB, name string, args ...string) <-chan string {
	t.Helper()
	lines, _ := d.start(t, name, args...)
	return lines
}

// appPID starts a program as app does and returns its PID.
func (d *desktop) appPID(t testing.TB, name string, args ...string) int {
	t.Helper()
	_, pid := d.start(t, name, args...)
	return pid
}

func (d *desktop) start(t testing.TB, name string, args ...string) (<-chan string, int) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(append(baseEnv(d.display, d.home), d.bus.Env()...), d.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &syncWriter{b: &stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, stderr.String())
		}
	})
	return lines, cmd.Process.Pid
}

// waitTree reads the tree until ok accepts it.
func (d *desktop) waitTree(t testing.TB, what string, ok func(*observe.Tree) bool) *observe.Tree {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var last *observe.Tree
	for time.Now().Before(deadline) {
		tr, err := d.bus.Tree(t.Context(), observe.TreeLimits{})
		if err != nil {
			t.Fatalf("read the tree: %v", err)
		}
		last = tr
		if ok(tr) {
			return tr
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the tree never had %s; the last:\n%s", what, dump(last))
	return nil
}

func dump(t *observe.Tree) string {
	if t == nil {
		return "(none)"
	}
	var b strings.Builder
	for _, e := range t.Elements {
		fmt.Fprintf(&b, "%s%s\n", strings.Repeat("  ", e.Depth), e.Describe())
	}
	fmt.Fprintf(&b, "apps %d, cut %v, note %q, hidden %d, %dµs, %d calls\n", t.Apps, t.Cut, t.Note, t.Hidden, t.ElapsedUS, t.Calls)
	return b.String()
}

func TestZenityEntryTree(t *testing.T) {
	testenv.Require(t, testenv.Programs("zenity"))
	d := startDesktop(t)
	d.app(t, "zenity", "--entry", "--title=Name please", "--text=Your name:")
	tr := d.waitTree(t, "an OK button", func(tr *observe.Tree) bool {
		_, err := tr.Find(action.Selector{Role: "push button", Name: "OK"})
		return err == nil
	})
	t.Logf("%s", dump(tr))
	for _, sel := range []action.Selector{
		{Role: "push button", Name: "OK"},
		{Role: "push button", Name: "Cancel"},
		{Role: "text"},
		{Role: "label", Name: "Your name:"},
		{Role: "dialog", Name: "Name please"},
	} {
		e, err := tr.Find(sel)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if e.Bounds == nil || e.Bounds.Dx() <= 0 {
			t.Errorf("%s has no bounds", e.Describe())
		}
	}
}

// TestTreeBounds: a read cut by its node and depth bounds says so, and
// reads from several goroutines at once are served one after the other,
// each whole.
func TestTreeBounds(t *testing.T) {
	testenv.Require(t, testenv.Programs("zenity"))
	d := startDesktop(t)
	d.app(t, "zenity", "--entry", "--title=Bounds", "--text=Name:")
	full := d.waitTree(t, "an OK button", func(tr *observe.Tree) bool {
		_, err := tr.Find(action.Selector{Role: "push button", Name: "OK"})
		return err == nil
	})
	tests := []struct {
		lim     observe.TreeLimits
		max     int
		wantCut string
	}{
		{observe.TreeLimits{MaxNodes: 3}, 3, "nodes: 3 elements were read"},
		{observe.TreeLimits{MaxDepth: 2}, len(full.Elements), "depth: elements below depth 2"},
	}
	for _, tt := range tests {
		tr, err := d.bus.Tree(t.Context(), tt.lim)
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Elements) > tt.max || !strings.Contains(strings.Join(tr.Cut, "\n"), tt.wantCut) {
			t.Errorf("%+v: %d elements, cut %q", tt.lim, len(tr.Elements), tr.Cut)
		}
		for _, e := range tr.Elements {
			if tt.lim.MaxDepth > 0 && e.Depth > tt.lim.MaxDepth {
				t.Errorf("%+v: %s at depth %d", tt.lim, e.Describe(), e.Depth)
			}
		}
	}
	if len(full.Cut) != 0 {
		t.Errorf("a whole read says it was cut: %q", full.Cut)
	}

	const readers = 8
	errs := make(chan error, readers)
	for range readers {
		go func() {
			tr, err := d.bus.Tree(t.Context(), observe.TreeLimits{})
			if err == nil && len(tr.Elements) != len(full.Elements) {
				err = fmt.Errorf("a concurrent read has %d elements, a lone one %d", len(tr.Elements), len(full.Elements))
			}
			errs <- err
		}()
	}
	for range readers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestTreeStoppedApp: an application that stops answering (SIGSTOP) is
// left out of the read after the per-call deadline, and the read says
// so; it is not an error and does not wait for the read's whole budget.
func TestTreeStoppedApp(t *testing.T) {
	testenv.Require(t, testenv.Programs("zenity"))
	d := startDesktop(t)
	pid := d.appPID(t, "zenity", "--entry", "--title=Stopped", "--text=Name:")
	d.waitTree(t, "an OK button", func(tr *observe.Tree) bool {
		_, err := tr.Find(action.Selector{Role: "push button", Name: "OK"})
		return err == nil
	})
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	t0 := time.Now()
	tr, err := d.bus.Tree(t.Context(), observe.TreeLimits{TimeoutMS: 20000})
	took := time.Since(t0)
	if err != nil {
		t.Fatalf("the read failed: %v", err)
	}
	if !strings.Contains(strings.Join(tr.Cut, "\n"), "did not answer") || !strings.Contains(tr.Note, "did not answer") {
		t.Errorf("the read does not say the app did not answer: %s", dump(tr))
	}
	if took > 10*time.Second {
		t.Errorf("the read took %v: it waited for the stopped app beyond the per-call deadline", took)
	}
	t.Logf("read with a stopped app: %v; %s", took, dump(tr))
}

// TestTreeGTKList: a GTK list's table manages its descendants but says it
// has a few (rows × columns): its cells are read as children, named and
// placed, and the read is not cut. (Before, the corner lookup meant for
// Calc's 2^31 cells found a column header at the top left and gave up:
// the list read as an empty table.)
func TestTreeGTKList(t *testing.T) {
	testenv.Require(t, testenv.Programs("zenity"))
	args := []string{"--list", "--title=Many", "--width=700", "--height=560", "--column=Name", "--column=Kind", "--column=Size"}
	for i := range 60 {
		args = append(args, fmt.Sprintf("item %d", i), "kind", fmt.Sprint(i*7))
	}
	d := startDesktop(t)
	d.app(t, "zenity", args...)
	tr := d.waitTree(t, "an OK button", func(tr *observe.Tree) bool {
		_, err := tr.Find(action.Selector{Role: "push button", Name: "OK"})
		return err == nil
	})
	table, err := tr.Find(action.Selector{Role: "table"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"item 0", "item 5", "35"} {
		e, err := tr.Find(action.Selector{Role: "table cell", Name: name, Ancestor: &action.Selector{Role: "table"}})
		if err != nil {
			t.Errorf("%v\n%s", err, dump(tr))
			continue
		}
		if e.Bounds == nil || table.Bounds == nil || e.Bounds[1] < table.Bounds[1] || e.Bounds[3] > table.Bounds[3] {
			t.Errorf("%s is not placed in %s", e.Describe(), table.Describe())
		}
	}
	if len(tr.Cut) != 0 {
		t.Errorf("cut %q", tr.Cut)
	}
}

// TestFindRereadsCutRead: a target looked up while its app does not
// answer (stopped) is not "no element matches" at once: Find reads the
// tree again, and finds the button once the app answers (here: woken
// after the first read). An app that never answers gives the error with
// the cut after three reads.
func TestFindRereadsCutRead(t *testing.T) {
	testenv.Require(t, testenv.Programs("zenity"))
	d := startDesktop(t)
	pid := d.appPID(t, "zenity", "--entry", "--title=Stopped", "--text=Name:")
	ok := action.Selector{Role: "push button", Name: "OK"}
	d.waitTree(t, "an OK button", func(tr *observe.Tree) bool {
		_, err := tr.Find(ok)
		return err == nil
	})
	defer syscall.Kill(pid, syscall.SIGCONT)
	stop := func() {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	var reads []string
	restore := atspi.SetAfterFindRead(func(n int, tr *observe.Tree) {
		reads = append(reads, fmt.Sprintf("read %d: %d elements, cut %q", n, len(tr.Elements), tr.Cut))
		if n == 1 {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	})
	e, tr, err := d.bus.Find(t.Context(), ok)
	restore()
	if err != nil || len(reads) != 2 || !strings.Contains(reads[0], "did not answer") {
		t.Fatalf("Find with the app woken after the first read: %v, %v\n%s", e, err, strings.Join(reads, "\n"))
	}
	t.Logf("found %s on the second read (%d elements)", e.Describe(), len(tr.Elements))

	stop()
	reads = nil
	restore = atspi.SetAfterFindRead(func(n int, tr *observe.Tree) {
		reads = append(reads, fmt.Sprintf("read %d: cut %q", n, tr.Cut))
	})
	_, _, err = d.bus.Find(t.Context(), ok)
	restore()
	if err == nil || len(reads) != 3 || !strings.Contains(err.Error(), "no element matches") || !strings.Contains(err.Error(), "the read was cut: application") {
		t.Fatalf("Find with the app stopped: %v\n%s", err, strings.Join(reads, "\n"))
	}
}

type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func TestKeyBindings(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"<Alt>d", []string{"alt+d"}},
		{"<Alt>f;<Alt>f:d;<Control>Delete", []string{"alt+f", "ctrl+Delete"}},
		{";;<Primary><Shift>s", []string{"ctrl+shift+s"}},
		{"<Control>q;;<Control>q", []string{"ctrl+q"}},
		{"F2", []string{"F2"}},
		{"", nil},
		{"<Hyper>x", nil},
		{"<Alt", nil},
		{"<Alt>", nil},
		{"a b", nil},
	} {
		if got := atspi.KeyBindings(c.in); strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("KeyBindings(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
