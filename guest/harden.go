package guest

import (
	"fmt"
	"os"
	"strconv"
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

// ExecAppFlag is the guest's flag for running as the app's launcher.
const ExecAppFlag = "--exec-app"

// appOOMScoreAdj makes the app the OOM killer's first choice in the
// sandbox, before Xvfb, the window manager or the guest, so a memory bomb
// ends the app, not the desktop. Raising one's own score needs no
// privilege.
const appOOMScoreAdj = 1000

// launcherArgv wraps the app's command so that it starts through the guest
// binary in launcher mode (see ExecApp).
func launcherArgv(bin string, args []string) (string, []string, error) {
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
