package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv"
)

// sandbox is one bubblewrap sandbox: guestenv.Env does everything the
// guest does; bubblewrap is started in local.go, and explained and torn
// down here.
type sandbox struct {
	extra map[string]string

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
}

var (
	_ guestenv.Sandbox  = (*sandbox)(nil)
	_ guestenv.Freezing = (*sandbox)(nil)
)

// Freezer implements guestenv.Freezing: a sandbox with a cgroup v2 of its
// own freezes it (cgroup.freeze), one with cgroups v1 its freezer cgroup
// (freezer.state); one bounded by rlimits, or on a cgroup v1 host without
// the freezer, cannot freeze.
func (s *sandbox) Freezer() environment.Freezer {
	if s.cg == nil || !s.cg.canFreeze() {
		return nil
	}
	return cgroupFreezer{s.cg}
}

// cgroupFreezer freezes a sandbox's cgroup.
type cgroupFreezer struct{ cg *cgroup }

// Freeze implements environment.Freezer (cgroup.freeze, freezer.state).
func (f cgroupFreezer) Freeze(ctx context.Context) error { return f.cg.freeze(ctx, true) }

// Thaw implements environment.Freezer.
func (f cgroupFreezer) Thaw(ctx context.Context) error { return f.cg.freeze(ctx, false) }

// Explain implements guestenv.Sandbox: how bubblewrap ended, once it has.
func (s *sandbox) Explain(_ context.Context, lastWords <-chan struct{}) []string {
	if s.cmd == nil {
		return nil
	}
	select {
	case <-s.exited:
	case <-time.After(200 * time.Millisecond):
	}
	select {
	case <-s.exited:
		// Let the reader take the last words.
		select {
		case <-lastWords:
		case <-time.After(200 * time.Millisecond):
		}
		return []string{"bubblewrap " + exitText(s.waitErr)}
	default:
		return nil
	}
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

// Info implements guestenv.Sandbox.
func (s *sandbox) Info() environment.Info {
	extra := make(map[string]string, len(s.extra))
	for k, v := range s.extra {
		extra[k] = v
	}
	return environment.Info{ID: "bwrap-" + strconv.Itoa(s.pid), Extra: extra}
}

// Teardown implements guestenv.Sandbox: the guest's stdin closes and it
// exits, and with it bubblewrap and the sandbox's PID namespace; whatever
// does not end in time is killed.
func (s *sandbox) Teardown(ctx context.Context) error {
	var errs []error
	if s.stdin != nil {
		s.stdin.Close() // the guest sees EOF and exits
	}
	if s.cmd != nil {
		wait := func(d time.Duration) bool {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-s.exited:
				return true
			case <-t.C:
			case <-ctx.Done():
			}
			return false
		}
		if !wait(3 * time.Second) {
			// bubblewrap's group, then the sandbox's init, whose death
			// takes the whole PID namespace with it.
			_ = syscall.Kill(-s.pid, syscall.SIGKILL)
			kill(s.nsInit, s.nsInitStart)
			if !wait(5 * time.Second) {
				errs = append(errs, fmt.Errorf("bubblewrap (pid %d) did not exit after SIGKILL", s.pid))
			}
		}
		if err := s.waitGone(ctx); err != nil {
			errs = append(errs, err)
		}
		s.stdout.Close()
	}
	if s.cg != nil {
		if err := s.cg.remove(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// waitGone waits until no process of the sandbox's PID namespace is left.
// When its init exits the kernel kills the rest; that takes a moment, and
// an init whose parent bubblewrap was killed is reaped by the host's init.
func (s *sandbox) waitGone(ctx context.Context) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if nsEmpty(s.nsInit, s.nsInitStart, s.pidNS) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			kill(s.nsInit, s.nsInitStart)
			return fmt.Errorf("processes of sandbox %s (%s) are still running", s.extra["pid"], s.pidNS)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// nsEmpty reports whether a sandbox's PID namespace has no live process
// left. Its init known (pid and start time), that is exactly whether the
// init has ended: the kernel does not let a namespace's init finish
// exiting before every other process of the namespace is reaped
// (zap_pid_ns_processes). The namespace's inode (ns) is scanned for only
// while the init lives or when it is unknown: once the namespace is freed,
// the kernel gives its inode number to the next namespace made (another
// sandbox's, on a busy machine), whose processes must not count as this
// sandbox's.
func nsEmpty(init int, initStart uint64, ns string) bool {
	if init > 0 && initStart != 0 && !running(init, initStart) {
		return true
	}
	return ns == "" || len(inPIDNS(ns)) == 0
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
	start, _ := strconv.ParseUint(info.Extra["pid_start"], 10, 64)
	if run, ok := sandboxRun(pid); ok && run != "" && (start == 0 || processStart(pid) == start) {
		if st, ok := readStat(pid); ok && st.state != 'Z' {
			return false, nil
		}
	}
	initPID, _ := strconv.Atoi(info.Extra["ns_init_pid"])
	initStart, _ := strconv.ParseUint(info.Extra["ns_init_start"], 10, 64)
	if !nsEmpty(initPID, initStart, info.Extra["pidns"]) {
		return false, nil
	}
	// A cgroup v1 sandbox names its memory cgroup, removed last.
	for _, kind := range []string{LimitsCgroup2, LimitsCgroup1} {
		if l := info.Extra["limits"]; strings.HasPrefix(l, kind+" ") {
			dir, _, _ := strings.Cut(strings.TrimPrefix(l, kind+" "), ":")
			if _, err := os.Stat(dir); err == nil {
				return false, nil
			}
		}
	}
	return true, nil
}
