// Package local is the local backend: the guest (`agentbox guest`) runs on
// this machine inside bubblewrap, with its own user, mount, PID, IPC, UTS,
// cgroup and network namespaces (only lo), a read-only view of the host's
// system directories, a size-capped private tmpfs for /tmp (the app and
// $HOME) and /dev/shm, no host X socket, no D-Bus and no host environment.
// Xvfb and Openbox come from the host. Limits are a cgroup v2 of the
// sandbox's own where the host allows it (cgroups v1 of its own on a
// cgroup v1 host, as root), resource limits otherwise. Only
// this package may name bubblewrap.
//
// No daemon and no image: a sandbox starts in milliseconds, which is what
// many short episodes want, on machines (CI runners, laptops) that have no
// Docker.
package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv"
	"github.com/codegirl-games/agentbox/environment/named"
	"github.com/codegirl-games/agentbox/internal/faketime"
	"github.com/codegirl-games/agentbox/internal/fds"
	"github.com/codegirl-games/agentbox/internal/guestlimits"
	"github.com/codegirl-games/agentbox/internal/pipes"
)

// Name is the backend's registered name.
const Name = "local"

func init() {
	environment.Register(Name, func(environment.Options) (environment.Backend, error) { return &Backend{}, nil })
	// Inside a sandbox, the guest sets its own limits (rlimitEnv) before
	// main: internal/guestlimits' init, linked into every guest binary.
}

// Backend creates local (bubblewrap) environments.
type Backend struct{}

var (
	_ environment.Backend = (*Backend)(nil)
	_ environment.Prober  = (*Backend)(nil)
)

// Name implements environment.Backend.
func (*Backend) Name() string { return Name }

var _ environment.Capable = (*Backend)(nil)

// Capabilities implements environment.Capable. The sandbox runs the host's
// own system with bubblewrap: no images, no OCI runtime, no seed-style
// step. Where this process may make cgroups per sandbox (as Create will:
// a cgroup v2, or cgroups v1 as root), they bound CPU, memory and
// processes, and freeze (cgroup v2, or the v1 freezer where it is
// mounted); elsewhere resource limits bound processes per sandbox (and
// memory per process only, which is not a sandbox's limit).
func (*Backend) Capabilities() environment.Capabilities {
	c := environment.Capabilities{Reap: true, Limits: environment.Limits{PIDs: true}, Network: true, Relaunch: true, Named: true}
	// The sandbox runs the host's programs: a virtual clock needs the
	// host's libfaketime (scripts/deps.sh test installs it).
	c.VirtualClock = faketime.Lib() != ""
	if p := cgroups(); p.usable() {
		c.Freeze = p.freezes()
		c.Limits = environment.Limits{CPU: true, Memory: true, PIDs: true}
	}
	return c
}

var _ environment.HostLimiter = (*Backend)(nil)

// rlimitMinMemoryMB is the smallest memory limit a sandbox bounded by
// rlimits starts with: RLIMIT_DATA bounds each process's data memory, and
// the Go runtime of the guest and of the app's launcher maps more than
// that at its start below about 80 MiB (measured with xterm and --tmpfs
// 1m: at 78 MiB 3 of 3 starts failed, at 80 1 of 3, from 82 none).
const rlimitMinMemoryMB = 96

// HostLimits implements environment.HostLimiter: as many CPUs as this
// host has (a cgroup's CPU bound beyond them bounds nothing); and without
// cgroups, the memory each process needs to start under rlimits, and that
// neither the sandbox's total memory nor its CPU is bounded.
func (*Backend) HostLimits(context.Context) (environment.HostLimits, error) {
	l := environment.HostLimits{CPUs: float64(runtime.NumCPU())}
	if p := cgroups(); !p.usable() {
		l.MinMemoryMB = rlimitMinMemoryMB
		l.MemoryWhy = "without cgroups of its own here the local backend bounds each process's data memory (RLIMIT_DATA), and the guest's Go runtime needs about 80 MiB of it to start"
		l.Unbounded = Unbounded
		l.UnboundedWhy = "it can make no cgroup here (" + p.reason + "), so it bounds processes (RLIMIT_NPROC) and each process's data memory (RLIMIT_DATA), not the sandbox's total memory or its CPU"
		l.UnboundedFix = UnboundedFix
	}
	return l, nil
}

// Unbounded are the limits the local backend cannot give without cgroups.
var Unbounded = environment.Limits{CPU: true, Memory: true}

// UnboundedFix says how to get the limits the local backend cannot give
// without cgroups.
const UnboundedFix = "run agentbox as root (cgroup v1 or v2), or on cgroup v2 in a delegated scope (systemd-run --user --scope -p Delegate=yes agentbox …), or use --backend docker"

// Inside the sandbox.
const (
	guestPath = "/run/agentbox/agentbox"
	sandboxID = 1000 // uid and gid inside, as in the Docker sandbox
	hostname  = "agentbox"
	runIDEnv  = "AGENTBOX_RUN_ID"
	rlimitEnv = guestlimits.Env
	infoFD    = 3
	// sandboxPath is PATH inside the sandbox.
	sandboxPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// RootHostUID is the host uid (and gid) sandboxes run as when agentbox runs
// as root: mapping the sandbox to host root would let an escape be root,
// and the kernel exempts root from RLIMIT_NPROC.
const RootHostUID = 65534

// hostIdentity is the host uid/gid the sandbox's processes have.
func hostIdentity() (uid, gid int, dropped bool) {
	if os.Geteuid() == 0 {
		return RootHostUID, RootHostUID, true
	}
	return os.Getuid(), os.Getgid(), false
}

// bwrapInfo describes the installed bubblewrap.
type bwrapInfo struct {
	path                string
	version             string // "0.8.0"
	size, disableUserns bool   // --size (0.5), --disable-userns (0.8)
	err                 error
}

var (
	bwrapMu    sync.Mutex
	bwrapCache *bwrapInfo
)

// findBwrap locates bubblewrap and reads its version (once per process).
func findBwrap() *bwrapInfo {
	bwrapMu.Lock()
	defer bwrapMu.Unlock()
	if bwrapCache != nil {
		return bwrapCache
	}
	b := &bwrapInfo{}
	bwrapCache = b
	b.path, b.err = exec.LookPath("bwrap")
	if b.err != nil {
		b.err = fmt.Errorf("%w: bubblewrap (bwrap) is not installed: apt-get install bubblewrap", environment.ErrUnavailable)
		return b
	}
	out, err := exec.Command(b.path, "--version").Output()
	if err != nil {
		b.err = fmt.Errorf("%w: %s --version: %w", environment.ErrUnavailable, b.path, err)
		return b
	}
	b.version = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "bubblewrap"))
	var major, minor int
	fmt.Sscanf(b.version, "%d.%d", &major, &minor)
	b.size = major > 0 || minor >= 5
	b.disableUserns = major > 0 || minor >= 8
	if !b.size {
		b.err = fmt.Errorf("%w: bubblewrap %s cannot cap the size of a tmpfs (--size needs 0.5 or newer): install a newer bubblewrap", environment.ErrUnavailable, b.version)
	}
	return b
}

// Probe implements environment.Prober: bubblewrap is installed and can
// create a sandbox here, and Xvfb is installed.
func (*Backend) Probe(ctx context.Context) error {
	b := findBwrap()
	if b.err != nil {
		return b.err
	}
	if _, err := hostProgram("Xvfb"); err != nil {
		return err
	}
	return smokeTest(ctx, b)
}

// hostProgram finds a program the guest will need, in the sandbox's PATH
// on the host.
func hostProgram(name string) (string, error) {
	for _, dir := range filepath.SplitList(sandboxPath) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	pkg := map[string]string{"Xvfb": "xvfb", "openbox": "openbox"}[name]
	return "", fmt.Errorf("%w: %s is not installed on this host (the local backend uses the host's): apt-get install %s", environment.ErrUnavailable, name, pkg)
}

// smokeTest runs `true` in a minimal sandbox with the same namespaces: it
// fails where unprivileged user namespaces are off.
func smokeTest(ctx context.Context, b *bwrapInfo) error {
	truePath := "/usr/bin/true"
	if _, err := os.Stat(truePath); err != nil {
		return nil // nothing to run; Create will tell
	}
	args := []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts",
		"--ro-bind", "/usr", "/usr"}
	args = append(args, systemLinks()...)
	args = append(args, "--proc", "/proc", "--dev", "/dev", "--die-with-parent", truePath)
	cmd := exec.CommandContext(ctx, b.path, args...)
	cmd.Env = []string{}
	cmd.SysProcAttr = sysProcAttr()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: bubblewrap cannot create a sandbox here: %s%s", environment.ErrUnavailable,
			strings.TrimSpace(string(out)), usernsHint(string(out)))
	}
	return nil
}

// usernsHint says how to allow user namespaces when bubblewrap's message
// is about them.
func usernsHint(msg string) string {
	if !strings.Contains(msg, "namespace") && !strings.Contains(msg, "Operation not permitted") {
		return ""
	}
	return " (unprivileged user namespaces are off: sysctl -w user.max_user_namespaces=15000; on Debian ≤ 10 also kernel.unprivileged_userns_clone=1; on Ubuntu ≥ 23.10 kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap)"
}

// sysProcAttr is how bubblewrap is started: its own process group, killed
// when agentbox dies, as an unprivileged host user when agentbox is root.
// (The parent-death signal follows the thread that started bubblewrap; Go
// ends a thread only when a goroutine exits locked to it, which agentbox's
// host side never does. --die-with-parent then takes the sandbox along.)
func sysProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if uid, gid, dropped := hostIdentity(); dropped {
		a.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	}
	return a
}

// systemLinks reproduces the host's top-level /bin, /sbin and /lib*
// (symlinks into /usr on merged-/usr systems, directories elsewhere).
func systemLinks() []string {
	var out []string
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				out = append(out, "--symlink", target, d)
			}
		case fi.IsDir():
			out = append(out, "--ro-bind", d, d)
		}
	}
	return out
}

// sandboxArgs is bubblewrap's command line for one sandbox (see the README's
// "local backend" for each choice).
//
// caches (xstart.args) bind the host's start-up caches, read-only.
// cgroupBinds (cgroup.binds) show the sandbox its cgroup, read-only, where
// the guest reads its OOM-kill counter.
func sandboxArgs(b *bwrapInfo, cfg environment.Config, res environment.Resources, guest string, limits []rlimit, caches, cgroupBinds []string) []string {
	a := []string{
		// Namespaces: a user namespace with one uid, no further user
		// namespaces inside, and everything else private.
		"--unshare-user", "--uid", strconv.Itoa(sandboxID), "--gid", strconv.Itoa(sandboxID),
	}
	if b.disableUserns {
		a = append(a, "--disable-userns")
	}
	a = append(a,
		"--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
		"--hostname", hostname,
		// The guest is the PID namespace's init, not a child of
		// bubblewrap's: that init would hold the guest's stdio (the
		// protocol channel) as the sandbox's user, dumpable, where the app
		// could open /proc/1/fd/1. The guest reaps orphans itself and, as
		// the init, cannot be signalled from inside (guest/init.go).
		"--as-pid-1",
		"--die-with-parent", "--new-session",
		// The host's system, read-only.
		"--ro-bind", "/usr", "/usr",
	)
	a = append(a, systemLinks()...)
	a = append(a,
		"--ro-bind", "/etc", "/etc",
		"--ro-bind-try", "/var/cache/fontconfig", "/var/cache/fontconfig",
		"--symlink", "../tmp", "/var/tmp",
		// Fresh kernel and device views, size-capped writable tmpfs.
		"--proc", "/proc",
		"--dev", "/dev",
		"--size", strconv.FormatInt(int64(res.ShmMB)<<20, 10), "--tmpfs", "/dev/shm",
		"--size", strconv.FormatInt(int64(res.TmpfsMB)<<20, 10), "--tmpfs", "/tmp",
		// The guest, read-only.
		"--ro-bind", guest, guestPath,
	)
	a = append(a, caches...)
	a = append(a, cgroupBinds...)
	a = append(a,
		// Then the root itself becomes read-only.
		"--remount-ro", "/",
		// No host environment.
		"--clearenv",
		"--setenv", "HOME", guestenv.Home,
		"--setenv", "LANG", "C.UTF-8",
		"--setenv", "PATH", sandboxPath,
		"--setenv", runIDEnv, cfg.RunID,
		"--setenv", rlimitEnv, rlimitSpec(limits),
		"--chdir", "/tmp",
		"--info-fd", strconv.Itoa(infoFD),
		guestPath, "guest", "--sandboxed",
	)
	return append(a, guestenv.DisplayArgs(cfg)...)
}

// withNetDir binds the network's socket directory (guestenv.Network) into
// the sandbox at guestenv.NetDir, read-only like the rest of the root;
// nothing when dir is "".
func withNetDir(args []string, dir string) []string {
	if dir == "" {
		return args
	}
	i := slices.Index(args, "--remount-ro")
	return slices.Insert(args, i, "--ro-bind", dir, guestenv.NetDir)
}

// withHome binds a named sandbox's home (a directory of this host) over
// the home in the sandbox's tmpfs, read-write; bubblewrap binds it nosuid
// and nodev. Nothing when dir is "".
func withHome(args []string, dir string) []string {
	if dir == "" {
		return args
	}
	i := slices.Index(args, "--remount-ro")
	return slices.Insert(args, i, "--bind", dir, guestenv.Home)
}

// namedHome takes a named sandbox's lock and makes its home, owned by
// the sandbox's host identity, refusing one over the tmpfs's size (the
// bound the home has in an unnamed sandbox).
func namedHome(cfg environment.Config, res environment.Resources, uid, gid int) (*named.Lock, string, error) {
	root, err := named.Root()
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", environment.ErrUnavailable, err)
	}
	lock, err := named.Acquire(root, cfg.Name, Name, cfg.RunID)
	if err != nil {
		return nil, "", err
	}
	home, err := lock.HostHome(uid, gid)
	if err == nil && !reachable(filepath.Join(home, "."), uid, gid) {
		err = fmt.Errorf("%w: sandbox %s's home %s must be reachable by uid %d, which sandboxes run as: every directory above it searchable (set $%s to another directory)", environment.ErrUnavailable, cfg.Name, home, uid, named.EnvRoot)
	}
	if err == nil {
		err = lock.CheckSize(named.DirSize(home), int64(res.TmpfsMB)<<20)
	}
	if err != nil {
		lock.Abandon()
		return nil, "", err
	}
	return lock, home, nil
}

// Create implements environment.Backend: it starts the guest inside
// bubblewrap, performs the handshake and brings up the display. On error
// everything it started is gone.
func (b *Backend) Create(ctx context.Context, cfg environment.Config) (_ environment.Environment, retErr error) {
	t0 := time.Now()
	if cfg.Image != "" {
		return nil, fmt.Errorf("%w: the local backend runs the host's own system and has no images; --image %s needs --backend docker", environment.ErrImage, cfg.Image)
	}
	if cfg.Runtime != "" {
		return nil, fmt.Errorf("%w: --runtime %s is Docker's; the local backend always uses bubblewrap", environment.ErrUnavailable, cfg.Runtime)
	}
	res := cfg.Resources.WithDefaults()
	if err := res.Validate(); err != nil {
		return nil, err
	}
	bw := findBwrap()
	if bw.err != nil {
		return nil, bw.err
	}
	if _, err := hostProgram("Xvfb"); err != nil {
		return nil, err
	}
	noOpenbox := ""
	if _, err := hostProgram("openbox"); err != nil && !cfg.NoWM {
		noOpenbox = "openbox is not installed on this host: apt-get install openbox (running without a window manager)"
		if cfg.GuestLog != nil {
			cfg.GuestLog("agentbox: " + noOpenbox)
		}
	}
	guestBin, err := GuestBinary(cfg.GuestBinary)
	if err != nil {
		return nil, err
	}
	// Mounted from a neutral copy: the sandbox's mount table shows the
	// source of every bind mount (guestenv.Staged).
	if guestBin, err = guestenv.Staged(guestBin); err != nil {
		return nil, fmt.Errorf("%w: stage the guest binary: %w", environment.ErrGuest, err)
	}
	uid, gid, dropped := hostIdentity()
	if dropped && !reachable(guestBin, uid, gid) {
		return nil, fmt.Errorf("%w: the guest binary %s must be readable by uid %d, which sandboxes run as", environment.ErrGuest, guestBin, uid)
	}

	e := &sandbox{exited: make(chan struct{}), extra: map[string]string{
		"sandbox":  "bubblewrap " + bw.version,
		"host_uid": strconv.Itoa(uid),
		"guest":    guestBin,
	}}
	if noOpenbox != "" {
		e.extra["wm"] = noOpenbox
	}
	// A named sandbox: its lock (held until the sandbox is gone) and its
	// home, a directory of this host's bound over the tmpfs's.
	var home string
	opts := guestenv.Options{Backend: Name, Config: cfg, Began: t0, Said: "it said", Hint: usernsHint, Preset: preset}
	if cfg.Name != "" {
		lock, h, err := namedHome(cfg, res, uid, gid)
		if err != nil {
			return nil, err
		}
		home = h
		e.extra["home"] = home
		opts.AfterTeardown = func(context.Context) error { return lock.Release(named.DirSize(home)) }
	}
	g := guestenv.New(e, opts)
	defer func() {
		if retErr != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			g.Close(cctx)
			cancel()
		}
	}()

	// bubblewrap passes on every descriptor it inherits, and so would the
	// guest to Xvfb, Openbox and the app: whatever this process inherited
	// beyond stdio (a shell's 9</root/secret) must not be inheritable. This
	// is process-wide and idempotent; agentbox's main does it first thing.
	if err := fds.CloseOnExec(3); err != nil {
		return nil, fmt.Errorf("%w: cannot keep this process's inherited descriptors out of the sandbox: %w", environment.ErrUnavailable, err)
	}
	attr := sysProcAttr()
	cgp := cgroups()
	if cgp.usable() {
		// Callers were told this host bounds the sandbox (Capabilities,
		// HostLimits): a cgroup that cannot be made is an error, never a
		// quiet fall back to rlimits.
		cg, err := newSandboxCgroup(cgp, res)
		if err != nil {
			return nil, fmt.Errorf("%w: the sandbox's cgroup (%s): %w", environment.ErrUnavailable, cgp.where(), err)
		}
		e.cg = cg
		if cg.fd != nil {
			attr.UseCgroupFD, attr.CgroupFD = true, int(cg.fd.Fd())
		}
	}

	// The sandbox's network, if it has one: the proxy's and the forwards'
	// sockets, bound into the sandbox, reached by its user alone.
	netDir, err := g.Network(uid)
	if err != nil {
		return nil, err
	}

	// The start-up caches, built once per host (xstart.go).
	caches := startupCaches(ctx, bw).args(home != "")
	limits := rlimits(res)
	if e.cg != nil {
		limits = limits[2:] // the cgroup bounds processes and memory
	}
	args := withHome(withNetDir(sandboxArgs(bw, cfg, res, guestBin, limits, caches, e.cg.binds()), netDir), home)
	t := time.Now()
	if err := e.start(ctx, g, bw.path, args, attr); err != nil {
		if e.cg == nil || e.cg.fd == nil || e.cmd != nil || ctx.Err() != nil {
			return nil, err
		}
		// CLONE_INTO_CGROUP refused (kernel < 5.7, …): rlimits instead.
		cgp.reason = fmt.Sprintf("cannot start into cgroup %s: %v", e.cg.dir, err)
		e.cg.remove(ctx)
		e.cg = nil
		attr.UseCgroupFD, attr.CgroupFD = false, 0
		limits = rlimits(res)
		args = withHome(withNetDir(sandboxArgs(bw, cfg, res, guestBin, limits, caches, nil), netDir), home)
		if err := e.start(ctx, g, bw.path, args, attr); err != nil {
			return nil, err
		}
	}
	g.Timing("bwrap", time.Since(t))

	// The guest sets its limits before saying hello; make sure it did (a
	// guest binary without this package would not). It is the sandbox's
	// init (--as-pid-1).
	return g.Start(ctx, e.stdout, e.stdin, func(context.Context) error {
		if err := checkRlimits(e.nsInit, limits); err != nil {
			return fmt.Errorf("%w: the guest's limits: %w (is %s this agentbox?)", environment.ErrGuest, err, guestBin)
		}
		if e.cg != nil {
			e.extra["limits"] = e.cg.describe(res)
		} else {
			e.extra["limits"] = describeRlimits(res, cgp.reason)
		}
		return nil
	})
}

// start runs bubblewrap with pipes for the guest's stdio and reads its
// info (the PID of the sandbox's init).
func (e *sandbox) start(ctx context.Context, g *guestenv.Env, bwrap string, args []string, attr *syscall.SysProcAttr) (retErr error) {
	r, w, err := pipes.Open(4)
	if err != nil {
		return err
	}
	inR, outR, errR, infoR := r[0], r[1], r[2], r[3]
	inW, outW, errW, infoW := w[0], w[1], w[2], w[3]
	cmd := exec.Command(bwrap, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.ExtraFiles = []*os.File{infoW} // fd 3
	cmd.Env = []string{}
	cmd.SysProcAttr = attr
	if e.cg != nil && e.cg.v1 != nil {
		err = e.cg.startIn(cmd)
	} else {
		err = cmd.Start()
	}
	pipes.Close(inR, outW, errW, infoW) // the child has its copies
	if err != nil {
		pipes.Close(inW, outR, errR, infoR)
		return fmt.Errorf("%w: start bubblewrap: %w", environment.ErrUnavailable, err)
	}
	e.cmd, e.stdin, e.stdout = cmd, inW, outR
	e.pid = cmd.Process.Pid
	e.pidStart = processStart(e.pid)
	e.extra["pid"] = strconv.Itoa(e.pid)
	e.extra["pid_start"] = strconv.FormatUint(e.pidStart, 10)
	go func() {
		e.waitErr = cmd.Wait()
		close(e.exited)
	}()
	g.KeepStderr(errR)

	type info struct {
		ChildPID int `json:"child-pid"`
	}
	got := make(chan error, 1)
	var inf info
	go func() {
		defer infoR.Close()
		got <- json.NewDecoder(infoR).Decode(&inf)
	}()
	select {
	case err = <-got:
	case <-ctx.Done():
		return fmt.Errorf("waiting for bubblewrap to set up the sandbox: %w", ctx.Err())
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			return g.Explain(ctx, fmt.Errorf("%w: bubblewrap exited before the sandbox was up", environment.ErrUnavailable))
		}
		return g.Explain(ctx, fmt.Errorf("%w: reading bubblewrap's info: %w", environment.ErrUnavailable, err))
	}
	e.nsInit = inf.ChildPID
	e.nsInitStart = processStart(inf.ChildPID)
	e.pidNS = pidNS(inf.ChildPID)
	e.extra["ns_init_pid"] = strconv.Itoa(inf.ChildPID)
	e.extra["ns_init_start"] = strconv.FormatUint(e.nsInitStart, 10)
	e.extra["pidns"] = e.pidNS
	return nil
}

var _ environment.NamedHomes = (*Backend)(nil)

// HomeSize implements environment.NamedHomes: the home is a directory
// below the name's (named.Root).
func (*Backend) HomeSize(_ context.Context, name string) (int64, error) {
	root, err := named.Root()
	if err != nil {
		return -1, err
	}
	return named.DirSize(filepath.Join(root, name, "home")), nil
}

// RemoveHome implements environment.NamedHomes: nothing beyond the
// name's directory, which named.Remove removes.
func (*Backend) RemoveHome(context.Context, string) error { return nil }
