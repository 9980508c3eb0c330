package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/guestlimits"
)

// How a sandbox's resources are bounded.
const (
	// LimitsCgroup2: a cgroup v2 of its own (memory.max, memory.swap.max,
	// pids.max, cpu.max) for the whole sandbox.
	LimitsCgroup2 = "cgroup2"
	// LimitsCgroup1: cgroups v1 of its own, one in each of the memory
	// (memory.limit_in_bytes, memory.memsw.limit_in_bytes), cpu
	// (cpu.cfs_quota_us), pids (pids.max) and, where mounted, freezer
	// hierarchies, for the whole sandbox.
	LimitsCgroup1 = "cgroup1"
	// LimitsRlimit: resource limits on the guest, inherited by everything it
	// starts: processes per sandbox (RLIMIT_NPROC counts per user namespace),
	// data memory per process, file size. CPU is not bounded.
	LimitsRlimit = "rlimit"
)

// cgroupRoot is where the cgroup hierarchies are mounted: the cgroup v2
// hierarchy, or a cgroup v1 host's directory of hierarchies
// (<root>/memory, <root>/cpu, …). Tests point it elsewhere.
var cgroupRoot = "/sys/fs/cgroup"

// controllers are the cgroup controllers a sandbox's limits need.
var controllers = []string{"cpu", "memory", "pids"}

// v1Freezer is the cgroup v1 controller that freezes; optional.
const v1Freezer = "freezer"

// v1Files are files only a cgroup v1 hierarchy of that controller has at
// its root, by which it is told from a plain directory.
var v1Files = map[string]string{"cpu": "cpu.cfs_quota_us", "memory": "memory.limit_in_bytes", "pids": "cgroup.procs", v1Freezer: "cgroup.procs"}

// cgroupParent is where sandboxes get their own cgroups, or why there is
// nowhere.
type cgroupParent struct {
	version int               // 2, 1, or 0 when no cgroup can be used
	dir     string            // cgroup v2: the parent
	v1      map[string]string // cgroup v1: controller -> <root>/<controller>/agentbox
	reason  string            // why none, for doctor, HostLimits and Info.Extra
}

// usable reports whether sandboxes get cgroups of their own here.
func (p cgroupParent) usable() bool { return p.version != 0 }

// freezes reports whether those cgroups can be frozen.
func (p cgroupParent) freezes() bool { return p.version == 2 || p.v1[v1Freezer] != "" }

// where says where sandbox cgroups go, for doctor.
func (p cgroupParent) where() string {
	if p.version == 2 {
		return "cgroup v2 under " + p.dir
	}
	var dirs []string
	for _, c := range append(slices.Clone(controllers), v1Freezer) {
		if d := p.v1[c]; d != "" {
			dirs = append(dirs, d)
		}
	}
	return "cgroup v1 under " + strings.Join(dirs, ", ")
}

var (
	parentMu    sync.Mutex
	parent      cgroupParent
	parentFound bool
	cgroupSeq   atomic.Int64
)

// cgroups finds (once) where this process may create sandbox cgroups,
// with whichever cgroup version the host has:
//
//   - cgroup v2, as root: <root>/agentbox, made next to systemd's slices
//     (as Docker's cgroupfs driver does);
//   - cgroup v2, otherwise, in a delegated cgroup (systemd-run --user
//     --scope -p Delegate=yes agentbox …): agentbox moves itself into a leaf
//     child ("agentbox-host") so the controllers can be enabled for its
//     siblings, the sandboxes;
//   - cgroup v1, as root: <root>/<controller>/agentbox in each of the
//     memory, cpu and pids hierarchies, and the freezer's where it is
//     mounted.
func cgroups() cgroupParent {
	parentMu.Lock()
	defer parentMu.Unlock()
	if !parentFound {
		parent, parentFound = findCgroupParent(), true
	}
	return parent
}

// UseCgroupRoot makes the backend look for cgroups under dir instead of
// /sys/fs/cgroup, from its next sandbox on, until restore: a test's way to
// be a host where no cgroup can be used (an empty directory). Not for use
// while sandboxes are being made.
func UseCgroupRoot(dir string) (restore func()) {
	parentMu.Lock()
	defer parentMu.Unlock()
	old := cgroupRoot
	cgroupRoot, parentFound = dir, false
	return func() {
		parentMu.Lock()
		defer parentMu.Unlock()
		cgroupRoot, parentFound = old, false
	}
}

func findCgroupParent() cgroupParent {
	avail, err := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.controllers"))
	if err == nil {
		return findCgroup2Parent(string(avail))
	}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "memory", v1Files["memory"])); err == nil {
		return findCgroup1Parent()
	}
	return cgroupParent{reason: "no cgroup hierarchy at " + cgroupRoot + " (neither cgroup v2's cgroup.controllers nor cgroup v1's memory controller)"}
}

// findCgroup1Parent makes <root>/<controller>/agentbox in the memory, cpu,
// pids and (if mounted) freezer hierarchies of a cgroup v1 host.
func findCgroup1Parent() cgroupParent {
	p := cgroupParent{version: 1, v1: map[string]string{}}
	var missing, reasons []string
	for _, c := range append(slices.Clone(controllers), v1Freezer) {
		root := filepath.Join(cgroupRoot, c)
		if _, err := os.Stat(filepath.Join(root, v1Files[c])); err != nil {
			if c != v1Freezer {
				missing = append(missing, c)
			}
			continue
		}
		dir := filepath.Join(root, "agentbox")
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			if c != v1Freezer {
				reasons = append(reasons, fmt.Sprintf("cannot make %s: %v", dir, err))
			}
			continue
		}
		if unix.Access(filepath.Join(dir, "cgroup.procs"), unix.W_OK) != nil {
			if c != v1Freezer {
				reasons = append(reasons, dir+" is not writable by this process")
			}
			continue
		}
		p.v1[c] = dir
	}
	switch {
	case len(missing) > 0:
		noun := " controller is"
		if len(missing) > 1 {
			noun = " controllers are"
		}
		return cgroupParent{reason: "cgroup v1 host whose " + strings.Join(missing, ", ") + noun + " not mounted under " + cgroupRoot}
	case len(reasons) > 0:
		why := "cgroup v1 host: " + strings.Join(reasons, "; ")
		if os.Geteuid() != 0 {
			why += " (on cgroup v1 only root may make cgroups: run agentbox as root)"
		}
		return cgroupParent{reason: why}
	}
	return p
}

func findCgroup2Parent(avail string) cgroupParent {
	if missing := missingControllers(avail); len(missing) > 0 {
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
			return cgroupParent{version: 2, dir: dir}
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
			return cgroupParent{version: 2, dir: own}
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

// cgroup is one sandbox's cgroup v2, or its cgroups v1.
type cgroup struct {
	dir string   // v2: the cgroup; v1: the memory controller's
	fd  *os.File // v2: the directory, for CLONE_INTO_CGROUP

	v1 map[string]string // v1: controller -> the sandbox's cgroup in its hierarchy
}

// v1Order is the order v1 cgroups are removed in: the memory one last,
// whose absence then means the others are gone (Gone).
var v1Order = []string{v1Freezer, "cpu", "pids", "memory"}

// cpuPeriod is the CFS period of a sandbox's CPU bound, in µs.
const cpuPeriod = 100000

// cpuQuota is res.CPUs in µs per cpuPeriod (at least 1 ms).
func cpuQuota(res environment.Resources) int {
	return max(1000, int(res.CPUs*float64(cpuPeriod)))
}

// sandboxCgroupName names a new sandbox cgroup after this process (which
// the reaper checks) and a sequence number.
func sandboxCgroupName() string {
	return fmt.Sprintf("sandbox-%d-%d-%d", os.Getpid(), processStart(os.Getpid()), cgroupSeq.Add(1))
}

// newSandboxCgroup makes a sandbox's cgroup(s) under p and writes its
// limits.
func newSandboxCgroup(p cgroupParent, res environment.Resources) (*cgroup, error) {
	if p.version == 1 {
		return newCgroup1(p.v1, res)
	}
	return newCgroup(p.dir, res)
}

// newCgroup makes a sandbox cgroup v2 under the parent and writes its limits.
func newCgroup(parentDir string, res environment.Resources) (*cgroup, error) {
	dir := filepath.Join(parentDir, sandboxCgroupName())
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
	errs := []error{
		write("memory.max", strconv.FormatInt(int64(res.MemoryMB)<<20, 10)),
		write("pids.max", strconv.Itoa(res.PIDs)),
		write("cpu.max", fmt.Sprintf("%d %d", cpuQuota(res), cpuPeriod)),
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

// newCgroup1 makes a sandbox's cgroups v1, one under each parent
// (controller -> directory), and writes its limits. Memory and swap are
// bounded together (memory.memsw.limit_in_bytes, where the kernel accounts
// swap) so the sandbox cannot swap past --memory.
func newCgroup1(parents map[string]string, res environment.Resources) (_ *cgroup, retErr error) {
	name := sandboxCgroupName()
	cg := &cgroup{v1: map[string]string{}}
	defer func() {
		if retErr != nil {
			cg.rmdirs()
		}
	}()
	for _, c := range v1Order {
		if parents[c] == "" {
			continue
		}
		d := filepath.Join(parents[c], name)
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
		cg.v1[c] = d
	}
	cg.dir = cg.v1["memory"]
	write := func(c, file, val string) error {
		if err := os.WriteFile(filepath.Join(cg.v1[c], file), []byte(val), 0); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(cg.v1[c], file), err)
		}
		return nil
	}
	mem := strconv.FormatInt(int64(res.MemoryMB)<<20, 10)
	// The memory limit first: memory+swap may never be below it.
	if err := write("memory", "memory.limit_in_bytes", mem); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(cg.v1["memory"], "memory.memsw.limit_in_bytes")); err == nil {
		if err := write("memory", "memory.memsw.limit_in_bytes", mem); err != nil {
			return nil, err
		}
	} else {
		// No swap accounting: keep the sandbox's pages out of swap as far
		// as the kernel lets it.
		_ = write("memory", "memory.swappiness", "0")
	}
	if err := errors.Join(
		write("pids", "pids.max", strconv.Itoa(res.PIDs)),
		write("cpu", "cpu.cfs_period_us", strconv.Itoa(cpuPeriod)),
		write("cpu", "cpu.cfs_quota_us", strconv.Itoa(cpuQuota(res))),
	); err != nil {
		return nil, err
	}
	return cg, nil
}

// describe says what bounds the sandbox, for Info.Extra.
func (cg *cgroup) describe(res environment.Resources) string {
	if cg.v1 != nil {
		s := fmt.Sprintf("%s %s: memory.limit_in_bytes %d MiB", LimitsCgroup1, cg.dir, res.MemoryMB)
		if _, err := os.Stat(filepath.Join(cg.dir, "memory.memsw.limit_in_bytes")); err == nil {
			s += " (memsw the same: no swap)"
		}
		s += fmt.Sprintf(", pids.max %d, cpu.cfs_quota_us %d per %d (%g CPUs)", res.PIDs, cpuQuota(res), cpuPeriod, res.CPUs)
		if cg.v1[v1Freezer] != "" {
			s += ", freezer"
		}
		return s
	}
	return fmt.Sprintf("%s %s: memory.max %d MiB (swap 0), pids.max %d, cpu.max %g CPUs", LimitsCgroup2, cg.dir, res.MemoryMB, res.PIDs, res.CPUs)
}

// binds are bubblewrap's arguments that show the sandbox its cgroup,
// read-only, where the guest reads its OOM-kill counter: a cgroup v2 as
// /sys/fs/cgroup (memory.events), a cgroup v1's memory controller as
// /sys/fs/cgroup/memory (memory.oom_control), as in a Docker container.
func (cg *cgroup) binds() []string {
	if cg == nil {
		return nil
	}
	if cg.v1 != nil {
		return []string{"--ro-bind", cg.v1["memory"], "/sys/fs/cgroup/memory"}
	}
	return []string{"--ro-bind", cg.dir, "/sys/fs/cgroup"}
}

// canFreeze reports whether the cgroup can be frozen.
func (cg *cgroup) canFreeze() bool { return cg.v1 == nil || cg.v1[v1Freezer] != "" }

// startIn starts cmd inside the sandbox's cgroups v1. A cgroup v1 takes
// single threads (tasks): the thread that forks joins the sandbox's
// cgroup in each hierarchy, forks (the child inherits them from it, before
// it runs anything), and returns to its own. It runs on a thread of its
// own, locked, so no other goroutine runs there meanwhile; should the way
// back fail, that thread ends with its goroutine (and with it the child:
// its parent-death signal) rather than stay in the sandbox's cgroups.
func (cg *cgroup) startIn(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		tid := strconv.Itoa(unix.Gettid())
		own, err := threadCgroups(tid)
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		var moved []string
		back := func() error {
			var errs []error
			for _, c := range moved {
				if err := os.WriteFile(filepath.Join(own[c], "tasks"), []byte(tid), 0); err != nil {
					errs = append(errs, fmt.Errorf("return to %s: %w", own[c], err))
				}
			}
			return errors.Join(errs...)
		}
		for _, c := range v1Order {
			d := cg.v1[c]
			if d == "" {
				continue
			}
			if own[c] == "" {
				err = fmt.Errorf("this thread has no %s cgroup in /proc/self/task/%s/cgroup", c, tid)
				break
			}
			if err = os.WriteFile(filepath.Join(d, "tasks"), []byte(tid), 0); err != nil {
				err = fmt.Errorf("join %s: %w", d, err)
				break
			}
			moved = append(moved, c)
		}
		if err == nil {
			err = cmd.Start()
		}
		if berr := back(); berr != nil {
			if cmd.Process != nil {
				_ = cmd.Process.Kill()
			}
			done <- errors.Join(err, berr)
			return // locked: the thread ends here
		}
		runtime.UnlockOSThread()
		done <- err
	}()
	return <-done
}

// threadCgroups reads a thread's cgroup v1 directories, by controller
// (/proc/self/task/TID/cgroup: "4:memory:/process_api/…",
// "1:cpu,cpuacct:/").
func threadCgroups(tid string) (map[string]string, error) {
	data, err := os.ReadFile("/proc/self/task/" + tid + "/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			out[c] = filepath.Join(cgroupRoot, c, filepath.Clean("/"+f[2]))
		}
	}
	return out, nil
}

// freeze freezes (or thaws) every process of the cgroup and waits until the
// kernel reports it done.
func (cg *cgroup) freeze(ctx context.Context, on bool) error {
	if cg.v1 != nil {
		return cg.freeze1(ctx, on)
	}
	val, want := "0", "frozen 0"
	if on {
		val, want = "1", "frozen 1"
	}
	if err := os.WriteFile(filepath.Join(cg.dir, "cgroup.freeze"), []byte(val), 0); err != nil {
		return err
	}
	return cg.waitEvent(ctx, want)
}

// freeze1 is freeze with the cgroup v1 freezer (freezer.state: FROZEN
// once every task is, FREEZING until then).
func (cg *cgroup) freeze1(ctx context.Context, on bool) error {
	d := cg.v1[v1Freezer]
	if d == "" {
		return errors.New("no cgroup v1 freezer")
	}
	want := "THAWED"
	if on {
		want = "FROZEN"
	}
	state := filepath.Join(d, "freezer.state")
	for {
		// Written again while FREEZING: a task forked meanwhile is frozen
		// by the next write.
		if err := os.WriteFile(state, []byte(want), 0); err != nil {
			return err
		}
		got, err := os.ReadFile(state)
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(got)) == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cgroup %s: waiting for %s: %w", d, want, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
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
	if cg.v1 != nil {
		return cg.remove1(ctx)
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

// remove1 is remove for cgroups v1, which have no cgroup.kill: what is
// left is frozen (where the freezer is), killed process by process, thawed
// so the kills take effect, and the directories removed once empty.
func (cg *cgroup) remove1(ctx context.Context) error {
	for {
		if procs := cg.procs(); len(procs) > 0 {
			fctx, cancel := context.WithTimeout(ctx, time.Second)
			frozen := cg.v1[v1Freezer] != "" && cg.freeze1(fctx, true) == nil
			cancel()
			for _, pid := range cg.procs() {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
			if frozen {
				_ = cg.freeze1(context.WithoutCancel(ctx), false)
			}
		}
		err := cg.rmdirs()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("remove cgroup: %w", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// procs lists the processes in any of the cgroups v1.
func (cg *cgroup) procs() []int {
	seen := map[int]bool{}
	var out []int
	for _, c := range v1Order {
		data, err := os.ReadFile(filepath.Join(cg.v1[c], "cgroup.procs"))
		if cg.v1[c] == "" || err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
				seen[pid] = true
				out = append(out, pid)
			}
		}
	}
	return out
}

// rmdirs removes the cgroups v1 that are still there, the memory one last.
func (cg *cgroup) rmdirs() error {
	var errs []error
	for _, c := range v1Order {
		d := cg.v1[c]
		if d == "" {
			continue
		}
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
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

// rlimitSpec encodes limits for the guest's environment (rlimitEnv),
// which the guest applies to itself (internal/guestlimits).
func rlimitSpec(list []rlimit) string {
	ls := make([]guestlimits.Limit, len(list))
	for i, l := range list {
		ls[i] = guestlimits.Limit{Resource: l.resource, Value: l.value}
	}
	return guestlimits.Spec(ls)
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
