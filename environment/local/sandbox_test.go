package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/local"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

// create starts a sandbox for a test and closes it at the end.
func create(t *testing.T, cfg environment.Config) environment.Environment {
	t.Helper()
	if cfg.RunID == "" {
		cfg.RunID = "localtest-" + t.Name() + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	if cfg.GuestBinary == "" {
		cfg.GuestBinary = guestBinary(t)
	}
	env, err := (&local.Backend{}).Create(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		env.Close(ctx)
	})
	return env
}

func statusField(pid, field string) string {
	data, _ := os.ReadFile("/proc/" + pid + "/status")
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return strings.Fields(v)[0]
		}
	}
	return ""
}

// TestLimits: the guest runs with the limits the backend reports, and as
// an unprivileged host user when agentbox is root.
func TestLimits(t *testing.T) {
	requireHost(t)
	env := create(t, environment.Config{Resources: environment.Resources{PIDs: 77, MemoryMB: 700, TmpfsMB: 100}})
	info := env.Info()
	t.Logf("extra: %v", info.Extra)
	// The guest is the sandbox's init (--as-pid-1): no other process holds
	// its stdio.
	guest := info.Extra["ns_init_pid"]
	if argv, _ := os.ReadFile("/proc/" + guest + "/cmdline"); !strings.Contains(string(argv), "guest\x00--sandboxed") {
		t.Fatalf("the sandbox's init (pid %s) is %q, want the guest", guest, argv)
	}
	limits, _ := os.ReadFile("/proc/" + guest + "/limits")
	switch l := info.Extra["limits"]; {
	case strings.HasPrefix(l, local.LimitsRlimit+":"):
		for _, want := range []string{"Max processes 77 77", "Max data size 734003200 734003200", "Max file size 104857600 104857600"} {
			if !strings.Contains(strings.Join(strings.Fields(string(limits)), " "), want) {
				t.Errorf("guest limits lack %q:\n%s", want, limits)
			}
		}
	case strings.HasPrefix(l, local.LimitsCgroup2+" "), strings.HasPrefix(l, local.LimitsCgroup1+" "):
	default:
		t.Errorf("limits = %q", l)
	}
	if os.Geteuid() == 0 {
		for _, pid := range []string{info.Extra["pid"], guest} {
			if uid := statusField(pid, "Uid"); uid != strconv.Itoa(local.RootHostUID) {
				t.Errorf("pid %s runs as host uid %s, want %d", pid, uid, local.RootHostUID)
			}
		}
	}
	if s := statusField(guest, "NoNewPrivs"); s != "1" {
		t.Errorf("guest NoNewPrivs %s", s)
	}
	if _, ok := env.(environment.Freezer); ok != (&local.Backend{}).Capabilities().Freeze {
		t.Errorf("Freezer %v, Capabilities().Freeze %v, with limits %q", ok, !ok, info.Extra["limits"])
	}
}

func TestCreateRefuses(t *testing.T) {
	b := &local.Backend{}
	ctx := t.Context()
	if _, err := b.Create(ctx, environment.Config{Image: "agentbox/runtime:bookworm"}); !errors.Is(err, environment.ErrImage) || !strings.Contains(err.Error(), "no images") {
		t.Errorf("--image: %v", err)
	}
	if _, err := b.Create(ctx, environment.Config{Runtime: "runsc"}); !errors.Is(err, environment.ErrUnavailable) {
		t.Errorf("--runtime: %v", err)
	}
	if _, err := b.Create(ctx, environment.Config{Resources: environment.Resources{MemoryMB: 256, TmpfsMB: 256}}); err == nil {
		t.Error("tmpfs above memory accepted")
	}
	if err := b.Probe(ctx); err == nil {
		if _, err := b.Create(ctx, environment.Config{GuestBinary: "/etc/hostname"}); !errors.Is(err, environment.ErrGuest) {
			t.Errorf("a non-executable guest: %v", err)
		}
	}
}

// TestReapRunID: the forced stop (second Ctrl-C) removes a run's sandbox at
// once; Close afterwards still succeeds.
func TestReapRunID(t *testing.T) {
	requireHost(t)
	env := create(t, environment.Config{RunID: "localtest-reap-" + strconv.FormatInt(time.Now().UnixNano(), 36)})
	info := env.Info()
	b := &local.Backend{}
	dry, err := b.Reap(t.Context(), environment.ReapOptions{Mine: true, DryRun: true})
	if err != nil || len(dry) != 1 || dry[0].ID != info.ID || dry[0].Removed {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	got, err := b.Reap(t.Context(), environment.ReapOptions{RunID: dry[0].RunID})
	if err != nil || len(got) != 1 || !got[0].Removed {
		t.Fatalf("reap: %+v %v", got, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		gone, _ := local.Gone(t.Context(), info)
		if gone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reaped sandbox is still there")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := env.Close(t.Context()); err != nil {
		t.Errorf("Close after reaping: %v", err)
	}
	// Nothing of this process is left to reap; other runs are not touched.
	if again, _ := b.Reap(t.Context(), environment.ReapOptions{Mine: true}); len(again) != 0 {
		t.Errorf("second reap: %+v", again)
	}
}

// TestCgroup1Sandbox (issue 22, finding 7): on a cgroup v1 host, as root,
// a sandbox gets cgroups of its own in the memory, cpu, pids and freezer
// hierarchies with its limits, every process of it inside (and no thread
// of agentbox), the runtime freezes and thaws it, and Close removes them.
func TestCgroup1Sandbox(t *testing.T) {
	requireHost(t)
	var why error
	for _, f := range []string{"memory/memory.limit_in_bytes", "cpu/cpu.cfs_quota_us", "pids/cgroup.procs", "freezer/cgroup.procs"} {
		if _, err := os.Stat("/sys/fs/cgroup/" + f); err != nil {
			why = err
		}
	}
	if os.Geteuid() != 0 {
		why = errors.New("not root")
	}
	testenv.Require(t, testenv.Condition("root on a cgroup v1 host with the memory, cpu, pids and freezer controllers", why))
	env := create(t, environment.Config{Resources: environment.Resources{CPUs: 0.5, MemoryMB: 512, PIDs: 64, TmpfsMB: 64}})
	info := env.Info()
	l := info.Extra["limits"]
	t.Logf("limits: %s", l)
	mem, _, _ := strings.Cut(strings.TrimPrefix(l, local.LimitsCgroup1+" "), ":")
	if !strings.HasPrefix(l, local.LimitsCgroup1+" /sys/fs/cgroup/memory/agentbox/sandbox-") {
		t.Fatalf("limits = %q, want cgroups v1 under /sys/fs/cgroup/*/agentbox", l)
	}
	name := filepath.Base(mem)
	dir := func(ctrl string) string { return filepath.Join("/sys/fs/cgroup", ctrl, "agentbox", name) }
	for file, want := range map[string]string{
		"memory/memory.limit_in_bytes": "536870912", "pids/pids.max": "64",
		"cpu/cpu.cfs_quota_us": "50000", "cpu/cpu.cfs_period_us": "100000", "freezer/freezer.state": "THAWED",
	} {
		ctrl, f, _ := strings.Cut(file, "/")
		if got, _ := os.ReadFile(filepath.Join(dir(ctrl), f)); strings.TrimSpace(string(got)) != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	if got, err := os.ReadFile(filepath.Join(dir("memory"), "memory.memsw.limit_in_bytes")); err == nil && strings.TrimSpace(string(got)) != "536870912" {
		t.Errorf("memory.memsw.limit_in_bytes = %q, want the memory limit (no swap)", got)
	}
	// bubblewrap and the sandbox's init are in every one; agentbox is in none.
	for _, ctrl := range []string{"memory", "cpu", "pids", "freezer"} {
		procs, _ := os.ReadFile(filepath.Join(dir(ctrl), "cgroup.procs"))
		tasks, _ := os.ReadFile(filepath.Join(dir(ctrl), "tasks"))
		in := strings.Fields(string(procs))
		for _, pid := range []string{info.Extra["pid"], info.Extra["ns_init_pid"]} {
			if !slices.Contains(in, pid) {
				t.Errorf("%s cgroup.procs %v lacks %s", ctrl, in, pid)
			}
		}
		self, _ := os.ReadDir("/proc/self/task")
		for _, tk := range self {
			if slices.Contains(strings.Fields(string(tasks)), tk.Name()) {
				t.Errorf("thread %s of agentbox is in the sandbox's %s cgroup", tk.Name(), ctrl)
			}
		}
	}
	fr, ok := env.(environment.Freezer)
	if !ok || !(&local.Backend{}).Capabilities().Freeze {
		t.Fatalf("no Freezer (%v) or Capabilities().Freeze false", ok)
	}
	if err := fr.Freeze(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir("freezer"), "freezer.state")); strings.TrimSpace(string(got)) != "FROZEN" {
		t.Errorf("after Freeze freezer.state = %q", got)
	}
	if err := fr.Thaw(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := env.Observe(t.Context()); err != nil {
		t.Errorf("Observe after Thaw: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := env.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ctrl := range []string{"memory", "cpu", "pids", "freezer"} {
		if _, err := os.Stat(dir(ctrl)); !os.IsNotExist(err) {
			t.Errorf("%s still exists after Close: %v", dir(ctrl), err)
		}
	}
}
