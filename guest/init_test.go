package guest

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/codegirl-games/agentbox/internal/testenv"
	"golang.org/x/sys/unix"
)

// The reaper tells its own children from orphans by the pidfds Go's
// os/exec holds for them; if a Go release stops doing that, this fails.
func TestOSExecHoldsPidfds(t *testing.T) {
	testenv.Require(t, testenv.Condition("pidfds (Linux 5.4 or later)", pidfdsWork()))
	cmd := exec.Command("/bin/sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if !pidfdTargets()[cmd.Process.Pid] {
		t.Fatalf("os/exec holds no pidfd for its child %d: the reaper would take its exit status", cmd.Process.Pid)
	}
}

// An init must reap orphans but leave its own children's exit statuses to
// whoever waits for them. The test process plays the init by becoming a
// child subreaper: orphans of its children are reparented to it.
func TestReapOrphansLeavesOwnChildren(t *testing.T) {
	testenv.Require(t, testenv.Condition("pidfds (Linux 5.4 or later)", pidfdsWork()))
	testenv.Require(t, testenv.Condition("becoming a child subreaper", unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)))
	t.Cleanup(func() { unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	self := os.Getpid()

	// Our own child exits at once with code 7 and is waited for late.
	own := exec.Command("/bin/sh", "-c", "exit 7")
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	// Orphans: a shell leaves three children behind and exits (it is
	// waited for); they end up as our zombies.
	parent := exec.Command("/bin/sh", "-c", "for i in 1 2 3; do /bin/sh -c 'exit 3' & done; exit 0")
	if err := parent.Run(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the orphans and the own child to be zombies", func() bool {
		z := zombieChildren(self)
		return len(z) >= 4 && contains(z, own.Process.Pid)
	})
	if n := reapOrphans(self); n != 3 {
		t.Errorf("reaped %d orphans, want 3", n)
	}
	if z := zombieChildren(self); len(z) != 1 || z[0] != own.Process.Pid {
		t.Errorf("zombie children after reaping: %v, want only the own child %d", z, own.Process.Pid)
	}
	// The status of the own child is still its owner's to take.
	err := own.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
		t.Errorf("the own child's wait: %v, want exit status 7", err)
	}
	if z := zombieChildren(self); len(z) != 0 {
		t.Errorf("zombies left: %v", z)
	}
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A signal queued with rt_sigqueueinfo(2) that the Go runtime would take
// for a fault of its own kills a Go process; with faultSignals ignored it
// is dropped. Control: the same signals kill the process without it.
func TestFaultSignalsIgnored(t *testing.T) {
	if os.Getenv("AGENTBOX_TEST_FAULT_CHILD") != "" {
		faultChild()
		return
	}
	for _, tt := range []struct {
		name   string
		ignore bool
	}{{"ignored", true}, {"control: not ignored", false}} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestFaultSignalsIgnored$")
			cmd.Env = append(os.Environ(), "AGENTBOX_TEST_FAULT_CHILD=1")
			if tt.ignore {
				cmd.Env = append(cmd.Env, "AGENTBOX_TEST_FAULT_IGNORE=1")
			}
			out, err := cmd.CombinedOutput()
			survived := err == nil && strings.Contains(string(out), "SURVIVED")
			if survived != tt.ignore {
				t.Errorf("survived=%v, want %v: %v\n%s", survived, tt.ignore, err, out)
			}
		})
	}
}

// faultChild queues every fault signal to itself as another process
// would (si_code SI_QUEUE), then says it survived.
func faultChild() {
	if os.Getenv("AGENTBOX_TEST_FAULT_IGNORE") != "" {
		if err := ignoreFaultSignals(); err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(3)
		}
	}
	for _, s := range faultSignals {
		if err := sigqueue(os.Getpid(), s); err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(4)
		}
		if err := syscall.Kill(os.Getpid(), s); err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(4)
		}
	}
	time.Sleep(100 * time.Millisecond)
	os.Stdout.WriteString("SURVIVED\n")
	os.Exit(0)
}

// sigqueue sends sig to pid with si_code SI_QUEUE, as sigqueue(3) does.
func sigqueue(pid int, sig syscall.Signal) error {
	var info [128]byte // siginfo_t: signo, errno, code, then pid and uid
	*(*int32)(unsafe.Pointer(&info[0])) = int32(sig)
	*(*int32)(unsafe.Pointer(&info[8])) = -1 // SI_QUEUE
	*(*int32)(unsafe.Pointer(&info[16])) = int32(os.Getpid())
	*(*uint32)(unsafe.Pointer(&info[20])) = uint32(os.Getuid())
	_, _, e := syscall.Syscall(unix.SYS_RT_SIGQUEUEINFO, uintptr(pid), uintptr(sig), uintptr(unsafe.Pointer(&info[0])))
	if e != 0 {
		return e
	}
	return nil
}
