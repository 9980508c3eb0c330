package guest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
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

// TestAppOOMInherit: the app starts with the OOM score 1000 and no
// launcher between (it inherits the score with the fork), the guest's own
// score is as before; where the guest cannot raise its score and lower it
// again, the shell launcher gives the app its score instead.
func TestAppOOMInherit(t *testing.T) {
	own, err := os.ReadFile(oomScorePath)
	if err != nil {
		t.Skipf("no %s here: %v", oomScorePath, err)
	}
	if _, err := os.Stat(shellPath); err != nil {
		t.Skipf("no %s here", shellPath)
	}
	run := func(a *appOOM) (path, out string) {
		t.Helper()
		var b strings.Builder
		cmd := exec.Command("/bin/cat", "/proc/self/oom_score_adj")
		cmd.Stdout = &b
		warn, err := a.start(cmd, true)
		if warn != nil || err != nil {
			t.Fatalf("start: %v, %v", warn, err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		return cmd.Path, strings.TrimSpace(b.String())
	}
	for _, c := range []struct {
		name     string
		a        *appOOM
		launcher string
	}{
		{"inherited", &appOOM{}, "/bin/cat"},
		{"the score cannot be read", &appOOM{path: t.TempDir() + "/none"}, shellPath},
		{"the score cannot be lowered again", &appOOM{probed: true}, shellPath},
	} {
		t.Run(c.name, func(t *testing.T) {
			path, got := run(c.a)
			if path != c.launcher || got != "1000" {
				t.Errorf("started %s, the app's oom_score_adj %q; want %s and 1000", path, got, c.launcher)
			}
			if now, _ := os.ReadFile(oomScorePath); string(now) != string(own) {
				t.Errorf("the guest's own score is %q after the start, was %q", now, own)
			}
		})
	}
}

// BenchmarkAppStart: an app's start to its end (/bin/true), inherited
// score against the shell launcher, in the same run: what a launch saves.
//
//	go test -run '^$' -bench AppStart -benchtime 200x ./guest
func BenchmarkAppStart(b *testing.B) {
	if _, err := os.Stat(shellPath); err != nil {
		b.Skipf("no %s here", shellPath)
	}
	for _, c := range []struct {
		name string
		a    *appOOM
	}{
		{"inherited", &appOOM{}},
		{"shell-launcher", &appOOM{probed: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				cmd := exec.Command("/bin/true")
				if _, err := c.a.start(cmd, true); err != nil {
					b.Fatal(err)
				}
				if err := cmd.Wait(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestAppOOMInheritNonDumpable: as in a sandbox — the guest not root and
// non-dumpable (harden), whose /proc files then belong to root — the app
// still inherits its score with no launcher between, because harden
// opens the score's file before. The control: a guest that made itself
// non-dumpable before opening it cannot, and falls back to the launcher
// (every launch did so in every sandbox until 2026-12-06). The guest's
// part runs in a child of this test as uid 65534.
func TestAppOOMInheritNonDumpable(t *testing.T) {
	if order := os.Getenv("AGENTBOX_TEST_OOM_CHILD"); order != "" {
		oomChild(order)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root, to start the guest's part as another user")
	}
	if _, err := os.Stat(shellPath); err != nil {
		t.Skipf("no %s here", shellPath)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary, where uid 65534 may run it.
	dir, err := os.MkdirTemp("", "agentbox-oom-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "guest.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		order, want string
	}{
		{"harden", "/bin/cat 1000"},                 // the guest's order: the file opened, then non-dumpable
		{"non-dumpable-first", shellPath + " 1000"}, // the control
	} {
		t.Run(c.order, func(t *testing.T) {
			cmd := exec.Command(bin, "-test.run", "^TestAppOOMInheritNonDumpable$")
			cmd.Env = []string{"AGENTBOX_TEST_OOM_CHILD=" + c.order, "PATH=/usr/bin:/bin"}
			cmd.Dir = dir
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("the child: %v\n%s", err, out)
			}
			var got string
			for _, line := range strings.Split(string(out), "\n") {
				if s, ok := strings.CutPrefix(line, "started: "); ok {
					got = s
				}
			}
			if got != c.want {
				t.Errorf("the app started as %q, want %q (its path, then its oom_score_adj)\n%s", got, c.want, out)
			}
		})
	}
}

// oomChild is TestAppOOMInheritNonDumpable's guest: it makes itself
// non-dumpable in the given order, starts /bin/cat
// /proc/self/oom_score_adj and prints what ran and the score it read.
func oomChild(order string) {
	var a appOOM
	switch order {
	case "harden":
		if err := harden(&a); err != nil {
			fmt.Println("harden:", err)
			os.Exit(1)
		}
	default:
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			fmt.Println("prctl:", err)
			os.Exit(1)
		}
	}
	var b strings.Builder
	cmd := exec.Command("/bin/cat", "/proc/self/oom_score_adj")
	cmd.Stdout = &b
	if warn, err := a.start(cmd, true); warn != nil || err != nil {
		fmt.Println("start:", warn, err)
		os.Exit(1)
	}
	if err := cmd.Wait(); err != nil {
		fmt.Println("wait:", err)
		os.Exit(1)
	}
	fmt.Printf("started: %s %s\n", cmd.Path, strings.TrimSpace(b.String()))
}
