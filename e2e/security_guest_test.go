package e2e

// The red-team suite, continued (SECURITY.md, "The guest and its
// channel"): the app must not be able to speak for the guest, stop it, or
// learn where the user keeps agentbox. Each test runs on both backends.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
)

// sandboxKind is a backend as the red-team tests drive it.
type sandboxKind struct {
	name    string
	flags   []string
	require func(*testing.T)
	gone    func(*testing.T, string) // fails if the run's sandbox is left
}

var sandboxKinds = []sandboxKind{
	{"docker", []string{"--image", testenv.TestImage}, func(t *testing.T) { testenv.Require(t, testenv.Image(testenv.TestImage)) }, assertNoContainers},
	{"local", []string{"--backend", "local"}, requireLocal, assertNoSandboxes},
}

// eachSandbox runs f as a subtest per backend.
func eachSandbox(t *testing.T, f func(*testing.T, sandboxKind)) {
	for _, k := range sandboxKinds {
		t.Run(k.name, func(t *testing.T) {
			k.require(t)
			f(t, k)
		})
	}
}

// probeOn runs a hostile mode on a backend until it prints PROBES DONE and
// returns its results and the run, whatever the outcome.
func probeOn(t *testing.T, k sandboxKind, args ...string) (map[string]probeResult, result, *trace.Trace) {
	t.Helper()
	argv := append([]string{"run", hostileApp(t, args...), "--script", writeScript(t, probeScript), "--timeout", "90s"}, k.flags...)
	r := agentbox(t, argv...)
	out, _ := os.ReadFile(filepath.Join(r.dir, trace.StdoutFile))
	tr := openTrace(t, r.dir)
	k.gone(t, tr.Run.ID)
	return parseResults(t, string(out)), r, tr
}

// forgedMark is what every frame the hostile app forges carries
// (e2e/testdata/hostile/channel.go).
const forgedMark = "FORGED-BY-THE-APP"

// The protocol channel belongs to the guest alone. The app tries every
// way to the guest's stdin and stdout — /proc/1/fd and /proc/<guest>/fd,
// pidfd_getfd, /proc/<pid>/mem, ptrace — and writes forged frames (app
// output, a window, error answers to request IDs 1–200, an OOM-killed
// exit) through whatever opens. None opens; the run and its trace are
// untouched. Controls: the same operations work on the app's own
// descriptors and on its own child.
func TestSecurityGuestChannel(t *testing.T) {
	eachSandbox(t, func(t *testing.T, k sandboxKind) {
		res, r, tr := probeOn(t, k, "channel")
		for name, p := range res {
			t.Logf("%s: ok=%v %s %s", name, p.OK, p.Errno, p.Info)
		}
		if r.code != 0 || tr.Run.Outcome != trace.Success {
			t.Errorf("the run did not succeed: %s/%s (%s)\n%s", tr.Run.Outcome, tr.Run.Reason, tr.Run.Message, r)
		}
		expect(t, res, true, "", "open /proc/self/fd/1 (control)", "open a child's /proc/PID/fd/1 (control)")
		if k.name == "local" {
			// Docker's seccomp profile refuses pidfd_getfd outright.
			expect(t, res, true, "", "pidfd_getfd a child's fd 1 (control)")
		}
		if g := res["the guest's pid"].Info; g != "1" {
			t.Errorf("the guest is pid %s in the sandbox, want 1 (its init)", g)
		}
		attacks := 0
		for name, p := range res {
			for _, prefix := range []string{"write frames to ", "read the host's requests ", "pidfd_getfd fd 1 of ", "open /proc/1/mem", "ptrace pid "} {
				if strings.HasPrefix(name, prefix) {
					attacks++
					if p.OK {
						t.Errorf("%s: it worked (%s)", name, p.Info)
					}
				}
			}
		}
		if attacks < 5 {
			t.Errorf("only %d attacks reported", attacks)
		}
		// Nothing forged reached the trace.
		filepath.Walk(r.dir, func(p string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() {
				if b, _ := os.ReadFile(p); strings.Contains(string(b), forgedMark) {
					t.Errorf("a forged frame reached %s", p)
				}
			}
			return nil
		})
	})
}

// The app cannot stop, kill or crash the guest with a signal: it is
// the sandbox's init, so SIGSTOP and SIGKILL from inside are never
// delivered, catchable signals are caught and ignored, and the fault
// signals the Go runtime would crash on when queued (SI_QUEUE) are
// ignored at the kernel. Controls: SIGSTOP stops the app's own child, and
// a queued SIGSEGV kills a Go process of its own.
func TestSecuritySignalsToGuest(t *testing.T) {
	eachSandbox(t, func(t *testing.T, k sandboxKind) {
		res, r, tr := probeOn(t, k, "signals")
		if r.code != 0 || tr.Run.Outcome != trace.Success {
			t.Errorf("the run did not succeed: %s/%s (%s)\n%s", tr.Run.Outcome, tr.Run.Reason, tr.Run.Message, r)
		}
		expect(t, res, true, "", "SIGSTOP stops the app's own child (control)", "a queued SIGSEGV kills a Go process (control)")
		n := 0
		for name, p := range res {
			if strings.HasSuffix(name, ": the guest runs on") {
				n++
				if !p.OK {
					t.Errorf("%s: no (%s)", name, p.Info)
				}
			}
		}
		if n < 16 {
			t.Errorf("only %d signals reported", n)
		}
	})
}

// A guest that stops answering is the environment's fault: stopped
// from outside the sandbox (here SIGSTOP from the host, which the kernel
// does deliver to a namespace's init) while the agent waits, the run ends
// as error/environment within the host's liveness bound, not at --timeout
// as the agent's failure.
func TestSecurityStalledGuest(t *testing.T) {
	eachSandbox(t, func(t *testing.T, k sandboxKind) {
		bin := testenv.Build(t, "./cmd/agentbox")
		dir := filepath.Join(t.TempDir(), "trace")
		args := append([]string{"run", moverApp(t, ""), "--out", dir, "--agent", "idle", "--agent-opt", "ms=120000", "--timeout", "100s"}, k.flags...)
		run := startBackground(t, bin, args...)
		run.waitForSteps(t, dir)
		tr := openTrace(t, dir)
		guest := guestHostPID(t, k, tr)
		if err := syscall.Kill(guest, syscall.SIGSTOP); err != nil {
			t.Fatalf("SIGSTOP the guest (host pid %d): %v", guest, err)
		}
		t.Cleanup(func() { syscall.Kill(guest, syscall.SIGCONT) })
		stopped := time.Now()
		code := run.wait(t, 150*time.Second, "after its guest was stopped")
		t.Logf("the run ended %v after the guest was stopped", time.Since(stopped).Round(time.Millisecond))
		tr = openTrace(t, dir)
		if code != 3 || tr.Run.Outcome != trace.Error || tr.Run.Reason != trace.ReasonEnvironment || !strings.Contains(tr.Run.Message, "stopped answering") {
			t.Errorf("exit %d, %s/%s (%s); want exit 3, error/environment saying the guest stopped answering\n%s",
				code, tr.Run.Outcome, tr.Run.Reason, tr.Run.Message, run.stderr.String())
		}
		if tr.Incomplete {
			t.Error("the trace is incomplete")
		}
		k.gone(t, tr.Run.ID)
	})
}

// guestHostPID finds the guest of a running trace's sandbox, as a host
// PID: the sandbox's init, or (before the guest was the init) the init's
// child that runs `agentbox guest`.
func guestHostPID(t *testing.T, k sandboxKind, tr *trace.Trace) int {
	t.Helper()
	var init int
	switch k.name {
	case "docker":
		cli, err := client.New(client.FromEnv)
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		ir, err := cli.ContainerInspect(t.Context(), tr.Run.Env.ID, client.ContainerInspectOptions{})
		if err != nil || ir.Container.State == nil {
			t.Fatalf("inspect the run's container %q: %v", tr.Run.Env.ID, err)
		}
		init = ir.Container.State.Pid
	case "local":
		init, _ = strconv.Atoi(tr.Run.Env.Extra["ns_init_pid"])
	}
	isGuest := func(pid int) bool {
		argv, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		return strings.Contains(string(argv), "agentbox\x00guest\x00--sandboxed")
	}
	if init > 0 && isGuest(init) {
		return init
	}
	kids, _ := os.ReadFile("/proc/" + strconv.Itoa(init) + "/task/" + strconv.Itoa(init) + "/children")
	for _, f := range strings.Fields(string(kids)) {
		if pid, _ := strconv.Atoi(f); isGuest(pid) {
			return pid
		}
	}
	t.Fatalf("no guest at or under the sandbox's init (host pid %d)", init)
	return 0
}

// The guest, as the sandbox's init, reaps what is orphaned into it (50
// processes that exit at once leave no zombie). Control: the app's own
// child, not yet waited for, is seen as a zombie.
func TestGuestReapsOrphans(t *testing.T) {
	eachSandbox(t, func(t *testing.T, k sandboxKind) {
		res, r, _ := probeOn(t, k, "orphans")
		if r.code != 0 {
			t.Fatalf("the probe run failed:\n%s", r)
		}
		expect(t, res, true, "", "the app's own unwaited child is a zombie (control)")
		if n := res["orphans left as zombies"].Info; n != "0" {
			t.Errorf("%s orphans left as zombies", n)
		}
	})
}

// What the sandbox shows of the host: the mount table does not name
// where the agentbox binary lives (a home directory, a build directory) —
// the guest is mounted from a neutral copy. The rest of the host's view
// (kernel, boot ID, load, CPU) is logged; SECURITY.md lists it.
func TestSecurityHostView(t *testing.T) {
	binDir := filepath.Dir(testenv.Build(t, "./cmd/agentbox"))
	eachSandbox(t, func(t *testing.T, k sandboxKind) {
		res, r, tr := probeOn(t, k, "host-view")
		if r.code != 0 {
			t.Fatalf("the probe run failed:\n%s", r)
		}
		mounts := res["read /proc/self/mountinfo"]
		if !mounts.OK || !strings.Contains(mounts.Info, "agentbox") {
			t.Fatalf("control: the mount table was not read, or lacks the guest's mount: %+v", mounts)
		}
		for _, line := range strings.Split(mounts.Info, "\n") {
			if strings.Contains(line, binDir) {
				t.Errorf("the mount table names the agentbox binary's directory %s:\n%s", binDir, line)
			}
			if strings.Contains(line, " /opt/agentbox/agentbox ") || strings.Contains(line, " /run/agentbox/agentbox ") {
				t.Logf("the guest's mount: %s", line)
			}
		}
		if g := tr.Run.Env.Extra["guest"]; g != "" && strings.Contains(g, binDir) {
			t.Errorf("the guest was mounted from %s", g)
		}
		view, _ := json.MarshalIndent(res, "", "  ")
		t.Logf("what the sandbox shows of the host:\n%s", view)
	})
}
