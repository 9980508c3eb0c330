package guest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestShellLauncher: the shell launcher raises the app's OOM score and
// passes the command and its arguments as they are (nothing expanded).
func TestShellLauncher(t *testing.T) {
	if _, err := os.Stat(shellPath); err != nil {
		t.Skipf("no %s here", shellPath)
	}
	run := func(bin string, args ...string) string {
		t.Helper()
		l, argv, err := launcherArgv(bin, args, true)
		if err != nil {
			t.Fatal(err)
		}
		if l != shellPath {
			t.Fatalf("launcher %s, want %s", l, shellPath)
		}
		out, err := exec.Command(l, argv...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %q: %v: %s", l, argv, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run("/bin/cat", "/proc/self/oom_score_adj"); got != "1000" {
		t.Errorf("the app's oom_score_adj is %q, want 1000", got)
	}
	if got, want := run("/bin/echo", "a  b", "$HOME", "*", "`id`", "-n"), "a  b $HOME * `id` -n"; got != want {
		t.Errorf("echo said %q, want %q", got, want)
	}
	// A file the kernel would not run (no ELF, no #!) is not handed to
	// the shell, which would run it as a script: the guest's launcher
	// fails on it as exec does.
	text := t.TempDir() + "/app"
	if err := os.WriteFile(text, []byte("echo ran as a script\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if l, _, err := launcherArgv(text, nil, true); err != nil || l == shellPath {
		t.Errorf("a file without #! launches through %s (%v)", l, err)
	}
	// Without the shell (or on a virtual clock) the guest binary launches.
	l, argv, err := launcherArgv("/bin/true", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if self, _ := os.Executable(); l != self || argv[1] != ExecAppFlag {
		t.Errorf("launcher %s %q, want the guest binary with %s", l, argv, ExecAppFlag)
	}
}
