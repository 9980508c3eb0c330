package guest

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// harden makes the guest process non-dumpable: the app runs as the same
// user, and without this it could ptrace the guest (there is no Yama
// policy inside a container) and forge what the host is told. Children the
// guest execs are dumpable again, as execve resets the flag.
func harden() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

// guestThreads is how many OS threads the guest starts at once and keeps.
const guestThreads = 24

// reserveThreads makes the Go runtime start about n OS threads now; idle
// threads are kept and reused, so the guest does not need a new one later.
// An app can use up the sandbox's process limit (a fork bomb), and the Go
// runtime aborts when it cannot create a thread it needs: without the
// reserve the guest could die with the app's misbehaviour (seen in two of
// three fork bombs under Docker).
func reserveThreads(n int) {
	// Each goroutine holds a thread of its own while locked to it; once
	// all are, they unlock and end, and their threads go idle, not away.
	var locked, release sync.WaitGroup
	release.Add(1)
	for i := 0; i < n; i++ {
		locked.Add(1)
		go func() {
			runtime.LockOSThread()
			locked.Done()
			release.Wait()
			runtime.UnlockOSThread()
		}()
	}
	locked.Wait()
	release.Done()
}

// ExecAppFlag is the guest's flag for running as the app's launcher.
const ExecAppFlag = "--exec-app"

// appOOMScoreAdj makes the app the OOM killer's first choice in the
// sandbox, before Xvfb, the window manager or the guest, so a memory bomb
// ends the app, not the desktop. Raising one's own score needs no
// privilege.
const appOOMScoreAdj = 1000

// shellLauncher is the launcher run by the system's shell: it raises the
// shell's OOM score, then replaces it with the app ("$0", its arguments
// "$@", never parsed by the shell) — what ExecApp does, without starting
// the guest's large binary again (its packages' initialisation alone took
// tens of milliseconds of every launch on a loaded machine).
var shellLauncher = "echo " + strconv.Itoa(appOOMScoreAdj) + ` 2>/dev/null >/proc/self/oom_score_adj || echo "agentbox guest: exec-app: oom_score_adj: not set" >&2; exec "$0" "$@"`

// shellPath is the shell the launcher runs with; a sandbox without it
// starts the app through the guest binary.
var shellPath = "/bin/sh"

// directlyExecutable says whether the kernel runs bin itself (an ELF
// file, or a script with its #! line): a shell's exec would run any
// other file as a shell script, where the guest's launcher fails with
// "exec format error".
func directlyExecutable(bin string) bool {
	f, err := os.Open(bin)
	if err != nil {
		return false
	}
	defer f.Close()
	var head [4]byte
	n, _ := io.ReadFull(f, head[:])
	return (n == 4 && string(head[:]) == "\x7fELF") || (n >= 2 && string(head[:2]) == "#!")
}

// launcherArgv wraps the app's command so that its OOM score is raised
// before it starts: through the system shell (shellLauncher) when there
// is one and shell is true, else through the guest binary in launcher
// mode (see ExecApp). An app on a virtual clock takes the guest binary:
// libfaketime, preloaded, would load into a dynamic shell as well.
func launcherArgv(bin string, args []string, shell bool) (string, []string, error) {
	if shell && directlyExecutable(bin) {
		if fi, err := os.Stat(shellPath); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return shellPath, append([]string{"-c", shellLauncher, bin}, args...), nil
		}
	}
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	return self, append([]string{"guest", ExecAppFlag, "--", bin}, args...), nil
}

// ExecApp is the launcher: it raises its own OOM score, then replaces
// itself with the app (argv[0] is the app's path). It returns only on
// failure.
func ExecApp(argv []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("exec-app: no command")
	}
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(appOOMScoreAdj)), 0); err != nil {
		fmt.Fprintf(os.Stderr, "agentbox guest: exec-app: oom_score_adj: %v\n", err)
	}
	err := syscall.Exec(argv[0], argv, os.Environ())
	return fmt.Errorf("exec %s: %w", argv[0], err)
}
