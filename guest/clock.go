package guest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/codegirl-games/agentbox/internal/faketime"
	"github.com/codegirl-games/agentbox/wire"
)

// The virtual clock (LaunchRequest.ClockNS): Debian's libfaketime is
// preloaded into the app's processes (only theirs: Xvfb, Openbox and the
// guest keep the real clock) with FAKETIME_TIMESTAMP_FILE naming a file
// the guest rewrites. The file holds an absolute time ("SECONDS.NANOS",
// read with FAKETIME_FMT=%s), which libfaketime takes as a stopped clock:
// every clock the app reads (time, gettimeofday, clock_gettime's realtime
// and monotonic clocks) shows that instant until the guest writes
// another. FAKETIME_NO_CACHE=1 makes it read the file at every call
// (its default cache would show a new time up to 10 s late); the file is
// replaced by a rename, so a read never sees half a time.
//
// What it covers: programs that read the time through the C library and
// can be preloaded, which excludes static executables (no dynamic loader
// to preload anything) and Go programs (the Go runtime reads the kernel's
// vDSO itself). faketime.Check refuses those by what the executable is.

// vclock is an app's virtual clock.
type vclock struct {
	mu    sync.Mutex
	file  string // FAKETIME_TIMESTAMP_FILE
	nowNS int64
}

// newVClock writes the clock's file at start under dir and returns the
// clock and the environment that puts the app on it.
func newVClock(dir string, startNS int64) (*vclock, []string, error) {
	lib := faketime.Lib()
	if lib == "" {
		return nil, nil, wire.Errorf(wire.CodeInvalid, "a virtual clock needs libfaketime in the sandbox (Debian's package libfaketime: one of %s), and it is not installed", strings.Join(faketime.Libs, ", "))
	}
	if startNS <= 0 {
		return nil, nil, wire.Errorf(wire.CodeInvalid, "a virtual clock must start after 1970, got %d ns", startNS)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("virtual clock: %w", err)
	}
	c := &vclock{file: filepath.Join(dir, "faketime"), nowNS: startNS}
	if err := c.write(startNS); err != nil {
		return nil, nil, err
	}
	env := []string{
		"LD_PRELOAD=" + lib,
		"FAKETIME_TIMESTAMP_FILE=" + c.file,
		"FAKETIME_FMT=%s",
		"FAKETIME_NO_CACHE=1",
	}
	return c, env, nil
}

// write replaces the clock's file (a rename: a reader sees the old time
// or the new one).
func (c *vclock) write(ns int64) error {
	tmp := c.file + ".new"
	if err := os.WriteFile(tmp, []byte(faketime.Spec(ns)), 0o644); err != nil {
		return fmt.Errorf("virtual clock: %w", err)
	}
	if err := os.Rename(tmp, c.file); err != nil {
		return fmt.Errorf("virtual clock: %w", err)
	}
	return nil
}

// set moves the clock to ns; a time earlier than the clock's is refused
// (the app's time never runs backwards).
func (c *vclock) set(ns int64) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ns < c.nowNS {
		return c.nowNS, wire.Errorf(wire.CodeInvalid, "clock: %d ns is before the app's time %d ns (a virtual clock only moves forward)", ns, c.nowNS)
	}
	if ns == c.nowNS {
		return ns, nil
	}
	if err := c.write(ns); err != nil {
		return c.nowNS, err
	}
	c.nowNS = ns
	return ns, nil
}

// clock answers MethodClock.
func (g *Guest) clock(req wire.ClockRequest) (wire.ClockResponse, error) {
	if g.vclock == nil {
		return wire.ClockResponse{}, wire.Errorf(wire.CodeInvalid, "clock: the app was not launched with a virtual clock")
	}
	now, err := g.vclock.set(req.NowNS)
	return wire.ClockResponse{NowNS: now}, err
}
