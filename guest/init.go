package guest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The guest is the init (PID 1) of its sandbox's PID namespace on every
// backend (Docker without its own init, bubblewrap with --as-pid-1). That
// makes it the only holder of the protocol channel (its stdin and stdout)
// and puts it out of the app's reach: the app runs as the same user, but
// the guest is non-dumpable (no /proc/1/fd, no ptrace, no pidfd_getfd), and
// the kernel never delivers SIGKILL or SIGSTOP to a namespace's init from
// inside the namespace, nor any signal whose disposition is the default.
// What is left is in this file: signals the Go runtime catches, and
// reaping the orphans an init inherits.

// isInit reports whether the guest runs as the init of a PID namespace.
func isInit() bool { return os.Getpid() == 1 }

// faultSignals are the signals the Go runtime turns into a crash when they
// do not come from kill(2) or tgkill(2): a process that queues one with
// rt_sigqueueinfo(2) (si_code SI_QUEUE) or has the kernel send it through
// F_SETOWN/F_SETSIG could kill the guest, because the runtime takes it for
// a fault of its own. The init sets them to SIG_IGN at the kernel, where
// such signals are then dropped. A real fault in the guest still kills it
// (the kernel resets an ignored fault signal to the default action before
// it forces it), but without the Go runtime's stack trace: the price of
// an app that cannot end the run by signalling the guest. The guest's
// children start with these signals at their defaults again (the runtime
// resets every signal it had a handler for after fork).
var faultSignals = []syscall.Signal{unix.SIGILL, unix.SIGTRAP, unix.SIGBUS, unix.SIGFPE, unix.SIGSEGV, unix.SIGSTKFLT, unix.SIGSYS}

// stopSignals are the signals the Go runtime would end the process on when
// nobody listens. The init listens and ignores them: anything inside the
// sandbox may send them, and the host never does (it closes the guest's
// stdin, or kills the sandbox with SIGKILL).
var stopSignals = []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGABRT}

// kernelSigaction is struct sigaction as rt_sigaction(2) takes it on amd64
// and arm64.
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

// ignoreFaultSignals sets faultSignals to SIG_IGN (see faultSignals).
func ignoreFaultSignals() error {
	for _, s := range faultSignals {
		act := kernelSigaction{handler: 1} // SIG_IGN
		_, _, e := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(s), uintptr(unsafe.Pointer(&act)), 0, unsafe.Sizeof(act.mask), 0, 0)
		runtime.KeepAlive(&act)
		if e != 0 {
			return fmt.Errorf("rt_sigaction %v: %w", s, e)
		}
	}
	return nil
}

// initSignals makes the guest, as the sandbox's init, immune to signals
// from inside the sandbox; logf reports the first few it ignored.
func initSignals(logf func(format string, args ...any)) error {
	if err := ignoreFaultSignals(); err != nil {
		return err
	}
	ch := make(chan os.Signal, 8)
	signal.Notify(ch, stopSignals...)
	go func() {
		n := 0
		for s := range ch {
			if n++; n <= 5 {
				name := s.String()
				if sig, ok := s.(syscall.Signal); ok {
					name = unix.SignalName(sig)
				}
				logf("ignored %s: the guest is the sandbox's init; only the host stops it", name)
			}
		}
	}()
	return nil
}

// startReaper reaps, as an init must, the processes orphaned into the
// guest (a daemon's double fork, whatever the app leaves behind), without
// taking the exit status of a child the guest waits for itself (Xvfb,
// Openbox, the app). Those are the children the guest holds a pidfd for:
// Go's os/exec opens one for every child it starts (clone with
// CLONE_PIDFD) and closes it only once it has reaped the child, so a
// zombie without one is an orphan. If pidfds are not available here, the
// reaper does nothing and orphans stay zombies until the sandbox ends
// (they cost a PID each, within the sandbox's limit).
func startReaper(logf func(format string, args ...any)) {
	if err := pidfdsWork(); err != nil {
		logf("pidfds unavailable (%v): orphaned processes are reaped only when the sandbox ends", err)
		return
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGCHLD)
	go func() {
		t := time.NewTicker(reapInterval)
		defer t.Stop()
		for {
			select {
			case <-ch:
			case <-t.C: // a SIGCHLD can be coalesced with an earlier one
			}
			reaped.Add(int64(reapOrphans(os.Getpid())))
		}
	}()
}

// reapInterval is how often the reaper looks even without a SIGCHLD.
const reapInterval = 2 * time.Second

// reaped counts the orphans reaped (for tests and diagnostics).
var reaped atomic.Int64

// pidfdsWork checks what Go's os package checks before it uses pidfds.
func pidfdsWork() error {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Waitid(unix.P_PIDFD, fd, nil, unix.WEXITED|unix.WNOHANG, nil); err != unix.ECHILD {
		return fmt.Errorf("waitid(P_PIDFD): %v", err)
	}
	return nil
}

// reapOrphans reaps every zombie child of self that no pidfd of this
// process refers to, and returns how many it reaped. The zombies are read
// before the pidfds: a child whose owner reaps it in between is then
// simply gone (wait4 finds nothing), never mistaken for an orphan.
func reapOrphans(self int) int {
	zombies := zombieChildren(self)
	if len(zombies) == 0 {
		return 0
	}
	owned := pidfdTargets()
	n := 0
	for _, pid := range zombies {
		if owned[pid] {
			continue
		}
		var ws unix.WaitStatus
		if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err == nil && got == pid {
			n++
		}
	}
	return n
}

// zombieChildren lists the children of ppid that have exited and wait to
// be reaped.
func zombieChildren(ppid int) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var out []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command (which may hold spaces and parentheses):
		// state, ppid, …
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 2 || f[0] != "Z" {
			continue
		}
		if p, _ := strconv.Atoi(f[1]); p == ppid {
			out = append(out, pid)
		}
	}
	return out
}

// pidfdTargets returns the PIDs this process holds pidfds for.
func pidfdTargets() map[int]bool {
	out := map[int]bool{}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return out
	}
	for _, e := range entries {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err != nil || l != "anon_inode:[pidfd]" {
			continue
		}
		f, err := os.Open("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "Pid:"); ok {
				if pid, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && pid > 0 {
					out[pid] = true
				}
			}
		}
		f.Close()
	}
	return out
}
