package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv"
	"github.com/codegirl-games/agentbox/wire"
)

// env is one bubblewrap sandbox.
type env struct {
	cfg       environment.Config
	res       environment.Resources
	timings   map[string]int64
	extra     map[string]string
	startResp wire.StartResponse

	cmd      *exec.Cmd
	pid      int    // bubblewrap, on the host
	pidStart uint64 // its start time, against PID reuse
	stdin    *os.File
	stdout   *os.File
	exited   chan struct{} // closed when bubblewrap has exited
	waitErr  error

	nsInit      int    // the sandbox's PID 1 (the guest, bubblewrap's child), on the host
	nsInitStart uint64 //
	pidNS       string // "pid:[…]"
	cg          *cgroup

	guest *guestenv.Client

	tailMu     sync.Mutex
	tail       []string // the last lines of bubblewrap's and the guest's stderr
	stderrDone chan struct{}

	closeOnce sync.Once
	closeErr  error
}

var _ environment.Environment = (*env)(nil)

// freezableEnv is an env with a cgroup v2, which can freeze it.
type freezableEnv struct{ *env }

var _ environment.Freezer = freezableEnv{}

// Freeze implements environment.Freezer (cgroup.freeze).
func (f freezableEnv) Freeze(ctx context.Context) error { return f.cg.freeze(ctx, true) }

// Thaw implements environment.Freezer.
func (f freezableEnv) Thaw(ctx context.Context) error { return f.cg.freeze(ctx, false) }

// readStderr keeps the last lines of bubblewrap's and the guest's
// diagnostics for error messages and passes them on.
func (e *env) readStderr(r io.ReadCloser) {
	defer close(e.stderrDone)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		e.tailMu.Lock()
		e.tail = append(e.tail, line)
		if len(e.tail) > 20 {
			e.tail = e.tail[len(e.tail)-20:]
		}
		e.tailMu.Unlock()
		if e.cfg.GuestLog != nil {
			e.cfg.GuestLog(line)
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// explain adds how bubblewrap ended and what it and the guest said to a
// start error.
func (e *env) explain(err error) error {
	var parts []string
	if e.cmd != nil {
		select {
		case <-e.exited:
		case <-time.After(200 * time.Millisecond):
		}
		select {
		case <-e.exited:
			// Let the reader take the last words.
			select {
			case <-e.stderrDone:
			case <-time.After(200 * time.Millisecond):
			}
			parts = append(parts, "bubblewrap "+exitText(e.waitErr))
		default:
		}
	}
	e.tailMu.Lock()
	tail := strings.Join(e.tail, "\n  ")
	e.tailMu.Unlock()
	if tail != "" {
		parts = append(parts, "it said:\n  "+tail+usernsHint(tail))
	}
	if len(parts) == 0 {
		return err
	}
	return fmt.Errorf("%w; %s", err, strings.Join(parts, "; "))
}

func exitText(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "exited with code 0"
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "was killed by " + ws.Signal().String()
		}
		return "exited with code " + strconv.Itoa(ee.ExitCode())
	}
	return "failed: " + err.Error()
}

// Info implements environment.Environment.
func (e *env) Info() environment.Info {
	extra := make(map[string]string, len(e.extra))
	for k, v := range e.extra {
		extra[k] = v
	}
	return environment.Info{
		Backend: Name,
		ID:      "bwrap-" + strconv.Itoa(e.pid),
		Display: e.startResp.Display,
		WM:      e.startResp.WM,
		SHM:     e.startResp.SHM,
		Timings: e.timings,
		Extra:   extra,
	}
}

// Launch implements environment.Environment.
func (e *env) Launch(ctx context.Context, spec environment.LaunchSpec) (environment.LaunchResult, error) {
	sums, err := e.guest.Stage(ctx, spec.App)
	if err != nil {
		return environment.LaunchResult{}, e.explain(fmt.Errorf("stage the app: %w", err))
	}
	r, err := e.guest.Launch(ctx, spec, nil)
	r.Files = sums
	if errors.Is(err, environment.ErrGuest) {
		return r, e.explain(err)
	}
	return r, err // the app's own failure: its output is in the trace
}

// Observe implements environment.Environment.
func (e *env) Observe(ctx context.Context) (*action.Frame, environment.State, error) {
	f, st, err := e.guest.Observe(ctx)
	if errors.Is(err, environment.ErrGuest) {
		err = e.explain(err) // how the sandbox ended, what the guest said
	}
	return f, st, err
}

// Act implements environment.Environment.
func (e *env) Act(ctx context.Context, a action.Action) (action.Result, error) {
	r, err := e.guest.Act(ctx, a)
	if errors.Is(err, environment.ErrGuest) {
		err = e.explain(err)
	}
	return r, err
}

// Close implements environment.Environment: the guest stops the app and the
// display, its stdin closes and it exits, and with it bubblewrap and the
// sandbox's PID namespace; whatever does not end in time is killed.
func (e *env) Close(ctx context.Context) error {
	e.closeOnce.Do(func() { e.closeErr = e.close(ctx) })
	return e.closeErr
}

func (e *env) close(ctx context.Context) error {
	var errs []error
	if e.guest != nil {
		select {
		case <-e.guest.Done():
		default:
			// A guest that does not stop in time (busy with a launch
			// Close aborts, or broken) is killed below; what counts is
			// that nothing is left, which waitGone checks.
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, _ = e.guest.Stop(sctx, 2*time.Second)
			cancel()
		}
	}
	if e.stdin != nil {
		e.stdin.Close() // the guest sees EOF and exits
	}
	if e.cmd != nil {
		wait := func(d time.Duration) bool {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-e.exited:
				return true
			case <-t.C:
			case <-ctx.Done():
			}
			return false
		}
		if !wait(3 * time.Second) {
			// bubblewrap's group, then the sandbox's init, whose death
			// takes the whole PID namespace with it.
			_ = syscall.Kill(-e.pid, syscall.SIGKILL)
			kill(e.nsInit, e.nsInitStart)
			if !wait(5 * time.Second) {
				errs = append(errs, fmt.Errorf("bubblewrap (pid %d) did not exit after SIGKILL", e.pid))
			}
		}
		if err := e.waitGone(ctx); err != nil {
			errs = append(errs, err)
		}
		e.stdout.Close()
	}
	if e.cg != nil {
		if err := e.cg.remove(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if e.guest != nil {
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		e.guest.WaitServed(wctx)
		cancel()
	}
	return errors.Join(errs...)
}

// waitGone waits until no process of the sandbox's PID namespace is left.
// When its init exits the kernel kills the rest; that takes a moment, and
// an init whose parent bubblewrap was killed is reaped by the host's init.
func (e *env) waitGone(ctx context.Context) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if !running(e.nsInit, e.nsInitStart) && (e.pidNS == "" || len(inPIDNS(e.pidNS)) == 0) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			kill(e.nsInit, e.nsInitStart)
			return fmt.Errorf("processes of sandbox %s (%s) are still running", e.extra["pid"], e.pidNS)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Gone reports whether nothing of the sandbox described by info (an Info of
// this backend) is left: not bubblewrap, no process in its PID namespace,
// not its cgroup.
func Gone(_ context.Context, info environment.Info) (bool, error) {
	if info.Backend != Name {
		return false, fmt.Errorf("not a %s sandbox: %s", Name, info.Backend)
	}
	pid, err := strconv.Atoi(info.Extra["pid"])
	if err != nil {
		return false, fmt.Errorf("no bubblewrap pid in %v", info.Extra)
	}
	if run, ok := sandboxRun(pid); ok && run != "" {
		if st, ok := readStat(pid); ok && st.state != 'Z' {
			return false, nil
		}
	}
	if ns := info.Extra["pidns"]; ns != "" && len(inPIDNS(ns)) > 0 {
		return false, nil
	}
	if l := info.Extra["limits"]; strings.HasPrefix(l, LimitsCgroup2+" ") {
		dir, _, _ := strings.Cut(strings.TrimPrefix(l, LimitsCgroup2+" "), ":")
		if _, err := os.Stat(dir); err == nil {
			return false, nil
		}
	}
	return true, nil
}
