package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/environment/local"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
)

// requireCgroupHost needs what lets the local backend bound a sandbox by
// cgroups: root, on a host with a cgroup v2 hierarchy or cgroup v1's
// memory, cpu and pids controllers. (Facts of the host, not of the code:
// where they hold, a local backend without cgroups fails these tests.)
func requireCgroupHost(t *testing.T) {
	t.Helper()
	requireLocal(t)
	var why error
	v2 := fileExists("/sys/fs/cgroup/cgroup.controllers")
	v1 := fileExists("/sys/fs/cgroup/memory/memory.limit_in_bytes") && fileExists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") && fileExists("/sys/fs/cgroup/pids/cgroup.procs")
	switch {
	case os.Geteuid() != 0:
		why = errors.New("not root")
	case !v2 && !v1:
		why = errors.New("neither a cgroup v2 hierarchy nor cgroup v1's memory, cpu and pids controllers at /sys/fs/cgroup")
	}
	testenv.Require(t, testenv.Condition("root on a cgroup host", why))
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// forkallocApp is an app directory running e2e/testdata/forkalloc with args.
func forkallocApp(t *testing.T, args ...string) string {
	t.Helper()
	bin := testenv.Build(t, "./e2e/testdata/forkalloc")
	dir := t.TempDir()
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "forkalloc"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(args)
	if err := os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command":"forkalloc","wait_for_window":false,"args":`+string(a)+`}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLocalMemoryIsATotal (issue 22, finding 7): on the local backend
// --memory bounds the sandbox's total, not each process: four children
// each allocating up to 300 MB in 10 MB steps under --memory 512m do not
// all hold it — the limit stops them (the OOM killer ends some), what they
// hold at once stays below 512 MB, and run.json names the cgroup that did
// it. (With per-process rlimits all four held 1200 MB.) The app stops at
// its ceiling, so a bound that fails costs the machine 1.2 GB at most.
func TestLocalMemoryIsATotal(t *testing.T) {
	requireCgroupHost(t)
	script := writeScript(t, "steps:\n  - {wait_for: log, contains: FORKALLOC DONE, timeout_ms: 120000}\n")
	r := agentbox(t, "run", forkallocApp(t, "4", "300", "10"), "--backend", "local", "--memory", "512m", "--tmpfs", "64m", "--script", script)
	if r.code != 0 {
		t.Fatalf("the run failed:\n%s", r)
	}
	out, _ := os.ReadFile(filepath.Join(r.dir, trace.StdoutFile))
	var got struct {
		Children []struct {
			HeldMB int  `json:"held_mb"`
			Full   bool `json:"full"`
			Killed bool `json:"killed"`
		} `json:"children"`
		HeldMB int `json:"held_mb"`
		Killed int `json:"killed"`
	}
	line := ""
	for _, l := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(l, "FORKALLOC {"); ok {
			line = "{" + rest
		}
	}
	if err := json.Unmarshal([]byte(line), &got); err != nil || len(got.Children) != 4 {
		t.Fatalf("no FORKALLOC report (%v) in stdout.log:\n%s", err, out)
	}
	tr := openTrace(t, r.dir)
	limits := tr.Run.Env.Extra["limits"]
	t.Logf("children %+v; held at once %d MB, %d killed; limits %q", got.Children, got.HeldMB, got.Killed, limits)
	full := 0
	for _, c := range got.Children {
		if c.Full {
			full++
		}
	}
	if full == 4 {
		t.Errorf("all four children hold 300 MB (%d MB) under --memory 512m: memory is not bounded as a total", got.HeldMB)
	}
	if got.HeldMB >= 512 {
		t.Errorf("the children hold %d MB at once under --memory 512m", got.HeldMB)
	}
	if got.Killed == 0 {
		t.Errorf("no child was killed: the limit did not stop any (%+v)", got.Children)
	}
	if !strings.HasPrefix(limits, local.LimitsCgroup1+" ") && !strings.HasPrefix(limits, local.LimitsCgroup2+" ") ||
		!strings.Contains(limits, "512 MiB") {
		t.Errorf("run.json environment.extra.limits = %q, want the sandbox's cgroup with 512 MiB", limits)
	}
	assertNoSandboxes(t, tr.Run.ID)
}

// TestLocalPIDsByCgroup: on a cgroup host the sandbox's processes are
// bounded by its cgroup's pids.max (no longer only by RLIMIT_NPROC): a
// fork bomb stops below --pids, and run.json says the cgroup did it.
func TestLocalPIDsByCgroup(t *testing.T) {
	requireCgroupHost(t)
	r := agentbox(t, "run", hostileApp(t, "forkbomb"), "--backend", "local", "--pids", "64", "--script", writeScript(t, probeScript))
	if r.code != 0 {
		t.Fatalf("the probe run failed:\n%s", r)
	}
	out, _ := os.ReadFile(filepath.Join(r.dir, trace.StdoutFile))
	res := parseResults(t, string(out))
	fb, ok := res["fork until refused"]
	if !ok {
		t.Fatalf("no fork bomb result:\n%s", out)
	}
	limits := openTrace(t, r.dir).Run.Env.Extra["limits"]
	t.Logf("fork bomb: %+v; limits %q", fb, limits)
	if fb.OK || !strings.Contains(fb.Err, "resource temporarily unavailable") {
		t.Errorf("the fork bomb was not refused with EAGAIN: %+v", fb)
	}
	if !(strings.HasPrefix(limits, local.LimitsCgroup1+" ") || strings.HasPrefix(limits, local.LimitsCgroup2+" ")) || !strings.Contains(limits, "pids.max 64") {
		t.Errorf("run.json environment.extra.limits = %q, want the sandbox's cgroup with pids.max 64", limits)
	}
}

// TestLocalRefusesUnboundedLimits: where the local backend can make no
// cgroup (here: the cgroup root pointed at an empty directory), run, eval
// and replay refuse the sandbox's memory and CPU limits as a usage error
// (exit 2) naming them, why, the flag that accepts them unbounded and how
// to have them bounded, before anything starts; with
// --allow-unbounded-limits the run goes on.
func TestLocalRefusesUnboundedLimits(t *testing.T) {
	requireLocal(t)
	t.Cleanup(local.UseCgroupRoot(t.TempDir()))
	app := stubApp(t, `{"command": "mover", "wait_for_window": false}`)
	suite := filepath.Join(t.TempDir(), "suite.yaml")
	if err := os.WriteFile(suite, []byte("tasks:\n  - {name: t, target: "+app+", agent: idle, episodes: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"run", app, "--agent", "idle", "--backend", "local", "--memory", "1g"},
		{"run", app, "--agent", "idle", "--backend", "local"},
		{"eval", suite, "--backend", "local"},
	} {
		r := cliMain(t, args...)
		for _, want := range []string{"--memory is 1024 MiB and --cpus is 1, but the local backend cannot hold a sandbox to that on this machine",
			"no cgroup hierarchy at", "not the sandbox's total memory or its CPU", "--allow-unbounded-limits", "run agentbox as root"} {
			if r.code != 2 || !strings.Contains(r.stderr, want) {
				t.Errorf("%v: want exit 2 and %q:\n%s", args, want, r)
			}
		}
		if _, err := os.Stat(r.dir); err == nil {
			t.Errorf("%v: a trace was started", args)
		}
	}
	// Said plainly, the run goes on, bounded by rlimits.
	r := cliMain(t, "run", app, "--agent", "idle", "--agent-opt", "ms=100", "--backend", "local", "--allow-unbounded-limits",
		"--guest-binary", testenv.Build(t, "./cmd/agentbox"))
	if r.code == 2 || strings.Contains(r.stderr, "cannot hold a sandbox") {
		t.Errorf("--allow-unbounded-limits: still refused:\n%s", r)
	}
	if tr := openTrace(t, r.dir); !strings.HasPrefix(tr.Run.Env.Extra["limits"], local.LimitsRlimit+":") {
		t.Errorf("--allow-unbounded-limits: limits %q, want rlimits:\n%s", tr.Run.Env.Extra["limits"], r)
	}
}
