package local

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

// TestCgroup1Parent walks the cgroup v1 choice on a fake hierarchy: the
// memory, cpu and pids controllers are needed, the freezer is taken where
// it is, and each sandbox gets a cgroup with its limits in every one.
func TestCgroup1Parent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("writes a fake hierarchy as root would")
	}
	old := cgroupRoot
	t.Cleanup(func() { cgroupRoot = old })
	cgroupRoot = t.TempDir()
	mk := func(ctrl string, files ...string) {
		os.MkdirAll(filepath.Join(cgroupRoot, ctrl, "agentbox"), 0o755)
		for _, f := range append(files, "cgroup.procs") {
			os.WriteFile(filepath.Join(cgroupRoot, ctrl, f), nil, 0o644)
		}
		os.WriteFile(filepath.Join(cgroupRoot, ctrl, "agentbox", "cgroup.procs"), nil, 0o644)
	}
	mk("memory", "memory.limit_in_bytes")
	if p := findCgroupParent(); p.usable() || !strings.Contains(p.reason, "cpu, pids controllers are not mounted") {
		t.Errorf("v1 without cpu and pids: %+v", p)
	}
	mk("cpu", "cpu.cfs_quota_us")
	mk("pids")
	p := findCgroupParent()
	if p.version != 1 || p.freezes() || p.v1["memory"] != filepath.Join(cgroupRoot, "memory", "agentbox") {
		t.Fatalf("v1 without a freezer: %+v", p)
	}
	mk(v1Freezer)
	if p = findCgroupParent(); !p.freezes() {
		t.Fatalf("v1 with a freezer: %+v", p)
	}
	res := environment.Resources{CPUs: 1.5, MemoryMB: 512, PIDs: 64}.WithDefaults()
	// The memory controller accounts swap (memsw) in the sandbox's cgroup.
	cg, err := newSandboxCgroup(p, res)
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"memory/memory.limit_in_bytes": "536870912", "memory/memory.swappiness": "0", "pids/pids.max": "64",
		"cpu/cpu.cfs_quota_us": "150000", "cpu/cpu.cfs_period_us": "100000",
	} {
		ctrl, name, _ := strings.Cut(file, "/")
		if got, _ := os.ReadFile(filepath.Join(cg.v1[ctrl], name)); string(got) != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	if cg.dir != cg.v1["memory"] || !cg.canFreeze() {
		t.Errorf("cgroup %+v", cg)
	}
	if d := cg.describe(res); !strings.HasPrefix(d, LimitsCgroup1+" "+cg.dir+": memory.limit_in_bytes 512 MiB") || !strings.Contains(d, "pids.max 64") {
		t.Errorf("describe = %q", d)
	}
	if b := strings.Join(cg.binds(), " "); b != "--ro-bind "+cg.v1["memory"]+" /sys/fs/cgroup/memory" {
		t.Errorf("binds = %q", b)
	}
	// An empty directory is no cgroup host.
	cgroupRoot = t.TempDir()
	if p := findCgroupParent(); p.usable() || !strings.Contains(p.reason, "no cgroup hierarchy at") {
		t.Errorf("empty root: %+v", p)
	}
}

// cgroup1Host skips (fails under CI) unless this is root on a cgroup v1
// host with the memory, cpu, pids and freezer controllers.
func cgroup1Host(t *testing.T) cgroupParent {
	t.Helper()
	var why error
	switch {
	case os.Geteuid() != 0:
		why = errors.New("not root")
	default:
		for c, f := range v1Files {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", c, f)); err != nil {
				why = err
			}
		}
	}
	testenv.Require(t, testenv.Condition("root on a cgroup v1 host with the memory, cpu, pids and freezer controllers", why))
	// A parent of this test's own, so nothing of other sandboxes is touched.
	p := cgroupParent{version: 1, v1: map[string]string{}}
	for c := range v1Files {
		d := filepath.Join("/sys/fs/cgroup", c, "agentbox-test-"+strconv.Itoa(os.Getpid()))
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(d) })
		p.v1[c] = d
	}
	return p
}

// TestCgroup1Mechanics starts a process into a sandbox's cgroups v1 the way
// Create does (the forking thread joins them and returns), freezes and
// thaws it with the v1 freezer, and removes the cgroups with the process
// still in them; and the reaper removes cgroups of a gone agentbox.
func TestCgroup1Mechanics(t *testing.T) {
	p := cgroup1Host(t)
	ctx := t.Context()
	res := environment.Resources{CPUs: 0.5, MemoryMB: 256, PIDs: 64}.WithDefaults()
	cg, err := newSandboxCgroup(p, res)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cg.remove(ctx) })
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	cmd.SysProcAttr = sysProcAttr()
	if err := cg.startIn(cmd); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	pid := strconv.Itoa(cmd.Process.Pid)
	for c, d := range cg.v1 {
		procs, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if strings.TrimSpace(string(procs)) != pid {
			t.Errorf("%s cgroup.procs = %q, want only %s", c, procs, pid)
		}
	}
	// No thread of this process stayed behind.
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, tk := range tasks {
		own, _ := threadCgroups(tk.Name())
		for c, d := range cg.v1 {
			if own[c] == d {
				t.Errorf("thread %s of the test is in the sandbox's %s cgroup", tk.Name(), c)
			}
		}
	}
	if err := cg.freeze(ctx, true); err != nil {
		t.Fatal(err)
	}
	state, _ := os.ReadFile(filepath.Join(cg.v1[v1Freezer], "freezer.state"))
	before := cpuTicks(cmd.Process.Pid)
	time.Sleep(300 * time.Millisecond)
	if strings.TrimSpace(string(state)) != "FROZEN" || cpuTicks(cmd.Process.Pid) != before {
		t.Errorf("frozen: freezer.state %q, CPU ticks %d then %d", state, before, cpuTicks(cmd.Process.Pid))
	}
	if err := cg.freeze(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := cg.remove(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("remove did not end the process")
	}
	for c, d := range cg.v1 {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s cgroup %s still exists: %v", c, d, err)
		}
	}

	// A gone agentbox's sandbox cgroups, with a process left in them.
	gone := exec.Command("sh", "-c", "exit 0")
	if err := gone.Run(); err != nil {
		t.Fatalf("a process to be gone: %v", err)
	}
	name := "sandbox-" + strconv.Itoa(gone.Process.Pid) + "-1-1"
	left := &cgroup{v1: map[string]string{}}
	for c, d := range p.v1 {
		left.v1[c] = filepath.Join(d, name)
		if err := os.Mkdir(left.v1[c], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { left.remove(ctx) })
	left.dir = left.v1["memory"]
	sleeper := exec.Command("sleep", "60")
	sleeper.SysProcAttr = sysProcAttr()
	if err := left.startIn(sleeper); err != nil {
		t.Fatal(err)
	}
	go sleeper.Wait()
	reaped := reapCgroups(ctx, p, environment.ReapOptions{})
	if len(reaped) != 1 || reaped[0].ID != name || !reaped[0].Removed || reaped[0].Name != left.v1["memory"] {
		t.Fatalf("reaped %+v", reaped)
	}
	for c, d := range left.v1 {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("reaped %s cgroup %s still exists: %v", c, d, err)
		}
	}
	if running(sleeper.Process.Pid, processStart(sleeper.Process.Pid)) {
		t.Error("the process left in the reaped cgroups still runs")
	}
}

// cpuTicks is a process's user+system CPU time in clock ticks.
func cpuTicks(pid int) int {
	data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return -1
	}
	u, _ := strconv.Atoi(f[11])
	k, _ := strconv.Atoi(f[12])
	return u + k
}
