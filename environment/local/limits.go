package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codegirl-games/agentbox/environment"
)

// How a sandbox's resources are bounded.
const (
	// LimitsCgroup2: a cgroup v2 of its own (memory.max, memory.swap.max,
	// pids.max, cpu.max) for the whole sandbox.
	LimitsCgroup2 = "cgroup2"
	// LimitsRlimit: resource limits on the guest, inherited by everything it
	// starts: processes per sandbox (RLIMIT_NPROC counts per user namespace),
	// data memory per process, file size. CPU is not bounded.
	LimitsRlimit = "rlimit"
)

// cgroupRoot is where the cgroup v2 hierarchy is mounted.
var cgroupRoot = "/sys/fs/cgroup"

// controllers are the cgroup v2 controllers a sandbox's limits need.
var controllers = []string{"cpu", "memory", "pids"}

// cgroupParent is the cgroup under which sandboxes get their own, or why
// there is none.
type cgroupParent struct {
	dir    string // "" when cgroup v2 cannot be used
	reason string // why not, for doctor and Info.Extra
}

var (
	parentOnce sync.Once
	parent     cgroupParent
	cgroupSeq  atomic.Int64
)

// cgroupV2 finds (once) a cgroup v2 directory this process may create
// sandbox cgroups under, with the cpu, memory and pids controllers
// enabled for its children:
//
//   - as root on a cgroup v2 host: <root>/agentbox, made next to systemd's
//     slices (as Docker's cgroupfs driver does);
//   - otherwise in a delegated cgroup (systemd-run --user --scope -p
//     Delegate=yes agentbox …): agentbox moves itself into a leaf child
//     ("agentbox-host") so the controllers can be enabled for its siblings,
//     the sandboxes.
func cgroupV2() cgroupParent {
	parentOnce.Do(func() { parent = findCgroupParent() })
	return parent
}

func findCgroupParent() cgroupParent {
	avail, err := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.controllers"))
	if err != nil {
		if _, verr := os.Stat(filepath.Join(cgroupRoot, "memory")); verr == nil {
			return cgroupParent{reason: "cgroup v1 host (no unified cgroup v2 hierarchy at " + cgroupRoot + ")"}
		}
		return cgroupParent{reason: "no cgroup v2 hierarchy at " + cgroupRoot}
	}
	if missing := missingControllers(string(avail)); len(missing) > 0 {
		noun := " controller"
		if len(missing) > 1 {
			noun += "s"
		}
		return cgroupParent{reason: "cgroup v2 lacks the " + strings.Join(missing, ", ") + noun}
	}
	var reasons []string
	// Root of the hierarchy (privileged).
	if unix.Access(filepath.Join(cgroupRoot, "cgroup.subtree_control"), unix.W_OK) == nil {
		dir := filepath.Join(cgroupRoot, "agentbox")
		err := enable(cgroupRoot)
		if err == nil {
			err = os.Mkdir(dir, 0o755)
			if errors.Is(err, os.ErrExist) {
				err = nil
			}
		}
		if err == nil {
			err = enable(dir)
		}
		if err == nil {
			return cgroupParent{dir: dir}
		}
		reasons = append(reasons, fmt.Sprintf("%s: %v", dir, err))
	}
	// A delegated cgroup of our own.
	own, err := ownCgroup()
	if err != nil {
		return cgroupParent{reason: strings.Join(append(reasons, err.Error()), "; ")}
	}
	if own != cgroupRoot && unix.Access(filepath.Join(own, "cgroup.subtree_control"), unix.W_OK) == nil &&
		unix.Access(filepath.Join(own, "cgroup.procs"), unix.W_OK) == nil {
		if err := delegate(own); err == nil {
			return cgroupParent{dir: own}
		} else {
			reasons = append(reasons, fmt.Sprintf("%s: %v", own, err))
		}
	} else {
		reasons = append(reasons, "this process's cgroup "+strings.TrimPrefix(own, cgroupRoot)+" is not delegated to it")
	}
	return cgroupParent{reason: strings.Join(reasons, "; ")}
}

func missingControllers(avail string) []string {
	have := map[string]bool{}
	for _, c := range strings.Fields(avail) {
		have[c] = true
	}
	var missing []string
	for _, c := range controllers {
		if !have[c] {
			missing = append(missing, c)
		}
	}
	return missing
}

// enable turns the controllers on for dir's children.
func enable(dir string) error {
	cur, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	if len(missingControllers(string(cur))) == 0 {
		return nil
	}
	var b strings.Builder
	for _, c := range controllers {
		b.WriteString("+" + c + " ")
	}
	return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.TrimSpace(b.String())), 0)
}

// ownCgroup is this process's cgroup v2 directory.
func ownCgroup() (string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return filepath.Join(cgroupRoot, filepath.Clean("/"+rest)), nil
		}
	}
	return "", errors.New("no cgroup v2 entry in /proc/self/cgroup")
}

// delegate moves this process into own/agentbox-host and enables the
// controllers in own, whose other children are then the sandboxes. It
// undoes the move when the controllers cannot be enabled (other processes
// share the cgroup).
func delegate(own string) error {
	if enable(own) == nil {
		return nil // already a parent with the controllers on
	}
	leaf := filepath.Join(own, "agentbox-host")
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	self := []byte(strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), self, 0); err != nil {
		return fmt.Errorf("move agentbox into %s: %w", leaf, err)
	}
	if err := enable(own); err != nil {
		_ = os.WriteFile(filepath.Join(own, "cgroup.procs"), self, 0)
		_ = os.Remove(leaf)
		if errors.Is(err, unix.EBUSY) {
			return errors.New("other processes share it (run agentbox in a scope of its own)")
		}
		return err
	}
	return nil
}

// cgroup is one sandbox's cgroup v2.
type cgroup struct {
	dir string
	fd  *os.File // the directory, for CLONE_INTO_CGROUP
}

// newCgroup makes a sandbox cgroup under the parent and writes its limits.
func newCgroup(parentDir string, res environment.Resources) (*cgroup, error) {
	name := fmt.Sprintf("sandbox-%d-%d-%d", os.Getpid(), processStart(os.Getpid()), cgroupSeq.Add(1))
	dir := filepath.Join(parentDir, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	cg := &cgroup{dir: dir}
	write := func(file, val string) error {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(val), 0); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		return nil
	}
	period := 100000
	errs := []error{
		write("memory.max", strconv.FormatInt(int64(res.MemoryMB)<<20, 10)),
		write("pids.max", strconv.Itoa(res.PIDs)),
		write("cpu.max", fmt.Sprintf("%d %d", max(1000, int(res.CPUs*float64(period))), period)),
	}
	if _, err := os.Stat(filepath.Join(dir, "memory.swap.max")); err == nil {
		errs = append(errs, write("memory.swap.max", "0"))
	}
	if err := errors.Join(errs...); err != nil {
		_ = os.Remove(dir)
		return nil, err
	}
	fd, err := os.Open(dir)
	if err != nil {
		_ = os.Remove(dir)
		return nil, err
	}
	cg.fd = fd
	return cg, nil
}

// describe says what bounds the sandbox, for Info.Extra.
func (cg *cgroup) describe(res environment.Resources) string {
	return fmt.Sprintf("%s %s: memory.max %d MiB (swap 0), pids.max %d, cpu.max %g CPUs", LimitsCgroup2, cg.dir, res.MemoryMB, res.PIDs, res.CPUs)
}

// freeze freezes (or thaws) every process of the cgroup and waits until the
// kernel reports it done.
func (cg *cgroup) freeze(ctx context.Context, on bool) error {
	val, want := "0", "frozen 0"
	if on {
		val, want = "1", "frozen 1"
	}
	if err := os.WriteFile(filepath.Join(cg.dir, "cgroup.freeze"), []byte(val), 0); err != nil {
		return err
	}
	return cg.waitEvent(ctx, want)
}

// waitEvent polls cgroup.events until it has the line want.
func (cg *cgroup) waitEvent(ctx context.Context, want string) error {
	for {
		data, err := os.ReadFile(filepath.Join(cg.dir, "cgroup.events"))
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(data), "\n") {
			if l == want {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cgroup %s: waiting for %q: %w", cg.dir, want, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// remove kills whatever is left in the cgroup and removes it.
func (cg *cgroup) remove(ctx context.Context) error {
	if cg.fd != nil {
		cg.fd.Close()
		cg.fd = nil
	}
	// cgroup.kill (Linux 5.14) kills every process at once; older kernels
	// rely on the PID namespace having gone with bubblewrap.
	_ = os.WriteFile(filepath.Join(cg.dir, "cgroup.kill"), []byte("1"), 0)
	for {
		err := os.Remove(cg.dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("remove cgroup %s: %w", cg.dir, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// rlimits are the fallback limits, set on the guest before it starts
// anything; its children inherit them.
//
// RLIMIT_NPROC is checked against the processes of the caller's user in
// the caller's user namespace, and every sandbox has a user namespace of
// its own: it bounds the sandbox's processes (and threads) without
// touching the host's or other sandboxes'. The kernel exempts real root
// from it, which is one reason a root agentbox runs sandboxes as an
// unprivileged host user. RLIMIT_DATA bounds each process's data memory,
// not the sandbox's sum; RLIMIT_FSIZE the largest file; no core dumps.
func rlimits(res environment.Resources) []rlimit {
	return []rlimit{
		{"RLIMIT_NPROC", "Max processes ", unix.RLIMIT_NPROC, uint64(res.PIDs)},
		{"RLIMIT_DATA", "Max data size ", unix.RLIMIT_DATA, uint64(res.MemoryMB) << 20},
		{"RLIMIT_FSIZE", "Max file size ", unix.RLIMIT_FSIZE, uint64(res.TmpfsMB) << 20},
		{"RLIMIT_CORE", "Max core file size ", unix.RLIMIT_CORE, 0},
	}
}

type rlimit struct {
	name     string
	label    string // its row in /proc/PID/limits
	resource int
	value    uint64
}

// rlimitSpec encodes limits for the guest's environment: "7=256,2=…".
func rlimitSpec(list []rlimit) string {
	parts := make([]string, len(list))
	for i, l := range list {
		parts[i] = strconv.Itoa(l.resource) + "=" + strconv.FormatUint(l.value, 10)
	}
	return strings.Join(parts, ",")
}

// setOwnRlimits applies a spec to this process (soft and hard).
func setOwnRlimits(spec string) error {
	for _, kv := range strings.Split(spec, ",") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		res, err1 := strconv.Atoi(k)
		val, err2 := strconv.ParseUint(v, 10, 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("bad limit %q", kv)
		}
		if err := unix.Setrlimit(res, &unix.Rlimit{Cur: val, Max: val}); err != nil {
			return fmt.Errorf("setrlimit %d=%d: %w", res, val, err)
		}
	}
	return nil
}

// checkRlimits verifies that pid runs with the limits, from
// /proc/PID/limits (readable without the privilege prlimit(2) needs for
// another user's process).
func checkRlimits(pid int, list []rlimit) error {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/limits")
	if err != nil {
		return err
	}
	for _, l := range list {
		soft, hard, ok := procLimit(string(data), l.label)
		if !ok {
			return fmt.Errorf("no %q in /proc/%d/limits", l.label, pid)
		}
		if soft > l.value || hard > l.value {
			return fmt.Errorf("%s of pid %d is %d/%d, want %d", l.name, pid, soft, hard, l.value)
		}
	}
	return nil
}

// procLimit reads one row of /proc/PID/limits ("unlimited" is MaxUint64).
func procLimit(table, label string) (soft, hard uint64, ok bool) {
	for _, line := range strings.Split(table, "\n") {
		rest, found := strings.CutPrefix(line, label)
		if !found {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			return 0, 0, false
		}
		parse := func(s string) uint64 {
			if s == "unlimited" {
				return ^uint64(0)
			}
			v, _ := strconv.ParseUint(s, 10, 64)
			return v
		}
		return parse(f[0]), parse(f[1]), true
	}
	return 0, 0, false
}

func describeRlimits(res environment.Resources, why string) string {
	return fmt.Sprintf("%s: RLIMIT_NPROC %d per sandbox, RLIMIT_DATA %d MiB per process, RLIMIT_FSIZE %d MiB; CPU and the sandbox's total memory not bounded (%s)",
		LimitsRlimit, res.PIDs, res.MemoryMB, res.TmpfsMB, why)
}
