package guest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/faketime"
	"github.com/codegirl-games/agentbox/internal/stagepath"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

var errAppExited = errors.New("the app exited")

// writeFile stores one staged entry under the app directory. The host
// checked the paths already; the guest checks again, since it trusts no
// input.
func (g *Guest) writeFile(req wire.WriteFileRequest, data []byte) error {
	if g.appDir == "" {
		return wire.Errorf(wire.CodeInvalid, "write_file: the display is not started")
	}
	if err := stagepath.Check(req.Path); err != nil {
		return wire.Errorf(wire.CodeInvalid, "write_file: %v", err)
	}
	dir := g.appDir
	if req.Home {
		dir = g.home // a task's input
		return writeStaged(dir, req, data)
	}
	g.staged.add(req, data)
	if err := writeStaged(dir, req, data); err != nil {
		return err
	}
	if g.base != nil { // only a sandboxed guest resets in place
		g.staged.wrote(dir, req)
	}
	return nil
}

// writeStaged writes one checked staged entry below dir (the app
// directory or the home).
func writeStaged(dir string, req wire.WriteFileRequest, data []byte) error {
	rel := req.Path
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("write_file: %w", err)
	}
	defer root.Close()
	name := filepath.FromSlash(rel)
	perm := os.FileMode(req.Mode).Perm()
	switch {
	case req.Dir:
		if err := root.Mkdir(name, perm|0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return wire.Errorf(wire.CodeInvalid, "write_file: %v", err)
		}
		return nil
	case req.Link != "":
		if err := stagepath.LinkInside(rel, req.Link); err != nil {
			return wire.Errorf(wire.CodeInvalid, "write_file: %s: %v", rel, err)
		}
		if err := root.Symlink(req.Link, name); err != nil {
			return wire.Errorf(wire.CodeInvalid, "write_file: %v", err)
		}
		return nil
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if req.Append {
		flags = os.O_WRONLY | os.O_APPEND
	}
	f, err := root.OpenFile(name, flags, perm|0o600)
	if err != nil {
		return wire.Errorf(wire.CodeInvalid, "write_file: %v", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		if errors.Is(err, syscall.ENOSPC) {
			return wire.Errorf(wire.CodeInvalid, "write_file: %s: the sandbox's tmpfs is full (raise --tmpfs)", rel)
		}
		return fmt.Errorf("write_file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write_file: %w", err)
	}
	return nil
}

// appProc is the running app.
type appProc struct {
	cmd     *exec.Cmd
	started time.Time     // just before it was started (wait until file)
	done    chan struct{} // closed when it has exited and its output is drained
	ready   *readyWatch   // LaunchRequest.ReadyOutput, when the launch waits for it
	held    atomic.Bool   // stopped by hold_app

	mu   sync.Mutex
	exit *observe.Exit
}

func (p *appProc) status() (running bool, exit *observe.Exit) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit == nil, p.exit
}

// terminate sends SIGTERM to the app's process group, then SIGKILL after
// grace. It returns the exit, or nil if the app was already gone before.
func (p *appProc) terminate(grace time.Duration) *observe.Exit {
	select {
	case <-p.done:
		return nil
	default:
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	if p.held.Load() { // a stopped process acts on SIGTERM only once continued
		for _, q := range appProcesses(pgid, os.Getpid()) {
			_ = syscall.Kill(q.pid, syscall.SIGCONT)
		}
	}
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(2 * time.Second):
		}
	}
	_, e := p.status()
	return e
}

// launchObserved is launch, then, when the request asks for it, the
// first screenshot in the same answer (the payload): the host's first
// observation without a round trip of its own.
func (g *Guest) launchObserved(ctx context.Context, req wire.LaunchRequest) (wire.LaunchResponse, []byte, error) {
	resp, err := g.launch(ctx, req)
	if err != nil || req.Screenshot == nil {
		return resp, nil, err
	}
	if p := g.app; p != nil && p.ready != nil && !p.ready.wait(ctx, p.started, req.ReadyMS, p.done) {
		return resp, nil, nil // the host waits for the ready output itself, and looks then
	}
	sr, payload, err := g.screenshot(ctx, *req.Screenshot)
	if err != nil {
		return resp, nil, fmt.Errorf("launch: the first screenshot: %w", err)
	}
	resp.Screenshot = &sr
	return resp, payload, nil
}

// launch starts the app and waits for its window.
func (g *Guest) launch(ctx context.Context, req wire.LaunchRequest) (wire.LaunchResponse, error) {
	var resp wire.LaunchResponse
	if g.x == nil {
		return resp, wire.Errorf(wire.CodeInvalid, "launch: the display is not up")
	}
	if g.app != nil {
		return resp, wire.Errorf(wire.CodeInvalid, "launch: an app is already running")
	}
	// No app has run since the app directory was staged (or restaged by
	// a reset, which killed every process of the last one): what its
	// watch saw so far was the guest's own writing.
	g.staged.settle()
	match, err := action.TitleMatcher(req.WindowTitle)
	if err != nil {
		return resp, wire.Errorf(wire.CodeInvalid, "launch: window_title: %v", err)
	}
	var bin string
	if req.InImage {
		bin, err = exec.LookPath(req.Command)
		if err != nil {
			return resp, wire.Errorf(wire.CodeNotFound, "command %q is not in the app directory and not a program of the image (PATH=%s)", req.Command, os.Getenv("PATH"))
		}
	} else {
		if !filepath.IsLocal(req.Command) {
			return resp, wire.Errorf(wire.CodeInvalid, "command %q is not a local path", req.Command)
		}
		bin = filepath.Join(g.appDir, filepath.FromSlash(req.Command))
		if _, err := os.Stat(bin); err != nil {
			return resp, wire.Errorf(wire.CodeNotFound, "command %q was not staged: %v", req.Command, err)
		}
	}

	env := g.appEnv(req.Env)
	if req.ClockNS != 0 {
		if err := faketime.Check(bin); err != nil {
			return resp, wire.Errorf(wire.CodeInvalid, "launch: --clock virtual: %v", err)
		}
		c, cenv, err := newVClock(filepath.Join(g.home, ".run", "clock"), req.ClockNS)
		if err != nil {
			return resp, err
		}
		g.vclock = c
		env = withClockEnv(env, cenv)
		resp.ClockNS = req.ClockNS
	}

	cmd := exec.Command(bin, g.homeArgs(req.Args)...) // started by g.oom, with its OOM score
	cmd.Dir = g.appDir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// As it is before g.oom.start, which may put a launcher in front.
	spec := &launchSpec{bin: bin, args: slices.Clone(cmd.Args[1:]), env: env, match: match}
	outR, outW, err := os.Pipe()
	if err != nil {
		return resp, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return resp, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.Stdin = nil // /dev/null
	if err := g.startObserver(); err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return resp, err
	}
	oomBefore := oomKills()
	t := time.Now()
	warn, err := g.oom.start(cmd, req.ClockNS == 0)
	if warn != nil {
		g.logf("warn", "launch: %v", warn)
	}
	if err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return resp, wire.Errorf(wire.CodeNotFound, "start %s: %v", req.Command, err)
	}
	outW.Close()
	errW.Close()
	p := &appProc{cmd: cmd, started: t, done: make(chan struct{})}
	if req.Screenshot != nil && req.ReadyOutput != "" {
		p.ready = newReadyWatch(req.ReadyOutput)
	}
	g.app = p
	g.launched = spec
	resp.PID = cmd.Process.Pid
	if g.obs != nil {
		g.obs.started(cmd.Process.Pid, append([]string{bin}, g.homeArgs(req.Args)...))
	}

	logCap := req.LogCap
	if logCap <= 0 {
		logCap = 8 << 20
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go g.forward(&readers, observe.Stdout, outR, logCap, p.ready)
	go g.forward(&readers, observe.Stderr, errR, logCap, p.ready)
	go func() {
		if g.obs != nil && waitExited(cmd.Process.Pid) {
			g.obs.exiting(cmd.Process.Pid) // its status, before it is reaped
		}
		err := cmd.Wait()
		e := exitOf(cmd.ProcessState, err)
		if e.Signal == "SIGKILL" && oomKills() > oomBefore {
			e.OOM = true
		}
		if g.obs != nil {
			g.obs.noteExit(cmd.Process.Pid, e)
		}
		// Give the readers a moment to drain what the app wrote last;
		// detached children may hold the pipes open for longer.
		drained := make(chan struct{})
		go func() { readers.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(300 * time.Millisecond):
		}
		if why := g.stopping.Load(); why != nil {
			e.Stopped = *why
		}
		p.mu.Lock()
		p.exit = &e
		p.mu.Unlock()
		_ = g.conn.Notify(wire.EventExit, e, nil)
		close(p.done)
	}()

	if !req.WaitWindow && req.WindowTitle == "" {
		resp.ReadyUS = time.Since(t).Microseconds()
		return resp, nil
	}
	wctx := ctx
	if req.ReadyMS > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, time.Duration(req.ReadyMS)*time.Millisecond)
		defer cancel()
	}
	w, err := g.waitWindow(wctx, match, p.done)
	switch {
	case errors.Is(err, errAppExited):
		_, e := p.status()
		return resp, wire.Errorf(wire.CodeAppExited, "the app exited before its window appeared (%s)", e)
	case errors.Is(err, context.DeadlineExceeded):
		what := "no window"
		if req.WindowTitle != "" {
			what = fmt.Sprintf("no window titled %q", req.WindowTitle)
		}
		seen := []string{}
		for _, w := range g.windowList() {
			seen = append(seen, fmt.Sprintf("%q", w.Title))
		}
		return resp, wire.Errorf(wire.CodeTimeout, "%s appeared within %v (windows now: [%s])", what,
			time.Duration(req.ReadyMS)*time.Millisecond, strings.Join(seen, ", "))
	case err != nil:
		return resp, err
	}
	g.focus(ctx, w)
	resp.Window = w
	resp.ReadyUS = time.Since(t).Microseconds()
	return resp, nil
}

// focus gives the app's window the keyboard focus, as a person would click
// it first, and waits briefly until the window manager says it has it: keys
// typed into a window without focus are lost (a complaint about peer
// tools). Best effort: an app may refuse focus.
//
// A window that already has the focus is waited for too: Openbox focuses
// a new window itself (SetInputFocus), and the focus is in the window
// before Openbox has handled the FocusIn that follows and painted the
// window's frame active. That FocusIn reached Openbox before a probe sent
// now, so once the probe is answered the frame is painted, and the first
// screenshot never shows it half-way (an inactive title on a focused
// window, seen beside a busy test suite). The window manager's answers are
// not the app's, so they have a longer bound than the wait for the focus
// below, which an app may refuse.
func (g *Guest) focus(ctx context.Context, w *observe.Window) {
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	var err error
	if w.Focused {
		err = g.x.SyncWM(actx)
	} else {
		err = g.x.Activate(actx, w.ID)
	}
	cancel()
	if err != nil || w.Focused {
		return
	}
	fctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for fctx.Err() == nil {
		g.winMu.Lock()
		ch := g.winCh
		for _, cur := range g.windows {
			if cur.ID == w.ID && cur.Focused {
				g.winMu.Unlock()
				w.Focused = true
				return
			}
		}
		g.winMu.Unlock()
		select {
		case <-ch:
		case <-fctx.Done():
		}
	}
}

// appEnv is the app's environment: a clean base plus the request's.
// Without the accessibility bus GTK's bridge stays off (NO_AT_BRIDGE: no
// bus to look for); with it, the app gets the bus's environment.
func (g *Guest) appEnv(extra []string) []string {
	env := append(g.baseEnv(), "LIBGL_ALWAYS_SOFTWARE=1")
	if g.bus != nil {
		env = append(env, g.bus.Env()...)
	} else {
		env = append(env, "NO_AT_BRIDGE=1")
	}
	env = append(env, g.net.env()...) // the proxy, with --allow-net
	return append(env, extra...)
}

// withClockEnv puts the virtual clock's variables into env: they replace
// the app's own, except LD_PRELOAD, where libfaketime comes first and the
// app's libraries after it. FAKETIME goes: libfaketime prefers it, even
// empty, to the clock's file.
func withClockEnv(env, clock []string) []string {
	keys := map[string]string{}
	for _, kv := range clock {
		k, v, _ := strings.Cut(kv, "=")
		keys[k] = v
	}
	out := env[:0:0]
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if k == "FAKETIME" {
			continue
		}
		if _, ok := keys[k]; !ok {
			out = append(out, kv)
			continue
		}
		if k == "LD_PRELOAD" && v != "" {
			keys[k] += ":" + v
		}
	}
	for _, kv := range clock {
		k, _, _ := strings.Cut(kv, "=")
		out = append(out, k+"="+keys[k])
	}
	return out
}

// baseEnv is what every process the guest starts for the desktop gets.
func (g *Guest) baseEnv() []string {
	_ = os.MkdirAll(filepath.Join(g.home, ".run"), 0o700)
	return []string{
		"DISPLAY=" + g.server.Display(),
		"HOME=" + g.home,
		"PATH=" + pathOr("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
		"LANG=" + envOr("LANG", "C.UTF-8"),
		"TMPDIR=/tmp",
		"XDG_RUNTIME_DIR=" + filepath.Join(g.home, ".run"),
		"XDG_CONFIG_HOME=" + filepath.Join(g.home, ".config"),
		"XDG_CACHE_HOME=" + filepath.Join(g.home, ".cache"),
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func pathOr(def string) string { return envOr("PATH", def) }

// forward copies one output stream to the host, up to cap bytes; beyond
// it, output is drained and counted so the app never blocks on a full pipe.
func (g *Guest) forward(wg *sync.WaitGroup, stream observe.Stream, r io.ReadCloser, cap int64, ready *readyWatch) {
	defer wg.Done()
	defer r.Close()
	buf := make([]byte, 32<<10)
	var sent, dropped int64
	lastReport := time.Now()
	for {
		n, err := r.Read(buf)
		if n > 0 {
			room := cap - sent
			switch {
			case room >= int64(n):
				_ = g.conn.Notify(wire.EventOutput, wire.OutputEvent{Stream: stream}, buf[:n])
				sent += int64(n)
			default:
				if room > 0 {
					_ = g.conn.Notify(wire.EventOutput, wire.OutputEvent{Stream: stream}, buf[:room])
					sent += room
				}
				dropped += int64(n) - max(room, 0)
				if time.Since(lastReport) > time.Second {
					_ = g.conn.Notify(wire.EventOutput, wire.OutputEvent{Stream: stream, Dropped: dropped}, nil)
					dropped, lastReport = 0, time.Now()
				}
			}
			ready.feed(stream, buf[:n]) // after the output went: the host has it before the launch's answer
		}
		if err != nil {
			if dropped > 0 {
				_ = g.conn.Notify(wire.EventOutput, wire.OutputEvent{Stream: stream, Dropped: dropped}, nil)
			}
			return
		}
	}
}

// exitOf turns a process state into an Exit.
func exitOf(ps *os.ProcessState, err error) observe.Exit {
	if ps == nil {
		return observe.Exit{Code: -1, Signal: fmt.Sprint(err)}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return observe.Exit{Code: -1, Signal: signalName(ws.Signal())}
	}
	return observe.Exit{Code: ps.ExitCode()}
}

func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return s.String()
}

// homeArgs expands a leading ~/ in the app's arguments to the home (an
// input named in args: ["~/Documents/sales.ods"]).
func (g *Guest) homeArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.HasPrefix(a, "~/") && g.home != "" {
			a = filepath.Join(g.home, a[2:])
			if strings.HasSuffix(args[i], "/") {
				a += "/"
			}
		}
		out[i] = a
	}
	return out
}
