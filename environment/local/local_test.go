package local

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

func TestSandboxArgs(t *testing.T) {
	b := &bwrapInfo{path: "/usr/bin/bwrap", version: "0.8.0", size: true, disableUserns: true}
	res := environment.Resources{TmpfsMB: 128, ShmMB: 32}.WithDefaults()
	args := sandboxArgs(b, environment.Config{RunID: "run-1"}, res, "/srv/ab/agentbox", rlimits(res), nil, nil)
	line := strings.Join(args, " ")
	for _, want := range []string{
		"--unshare-user --uid 1000 --gid 1000 --disable-userns",
		"--unshare-pid --unshare-ipc --unshare-net --unshare-uts --unshare-cgroup-try",
		"--as-pid-1 --die-with-parent --new-session",
		"--ro-bind /usr /usr",
		"--ro-bind /etc /etc",
		"--proc /proc --dev /dev",
		"--size 33554432 --tmpfs /dev/shm",
		"--size 134217728 --tmpfs /tmp",
		"--ro-bind /srv/ab/agentbox " + guestPath,
		"--clearenv",
		"--setenv HOME /tmp/home",
		"--setenv " + runIDEnv + " run-1",
		"--info-fd 3",
		guestPath + " guest --sandboxed",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("argv lacks %q:\n%s", want, line)
		}
	}
	// The root becomes read-only after every mount; nothing of the host's
	// session is bound.
	ro := slices.Index(args, "--remount-ro")
	for i, a := range args {
		if (a == "--ro-bind" || a == "--tmpfs" || a == "--bind" || a == "--dev" || a == "--proc") && i > ro {
			t.Errorf("%s %s comes after --remount-ro /", a, args[i+1])
		}
	}
	for _, a := range args {
		for _, bad := range []string{"/tmp/.X11-unix", "/run/user", "/run/dbus", "/home", "/root", "/var/run", "/sys", "/opt", "--share-net", "--bind", "--dev-bind"} {
			if a == bad || strings.HasPrefix(a, bad+"/") {
				t.Errorf("argv has %q:\n%s", a, line)
			}
		}
	}
	// The command is last: the guest, then the display it brings up
	// early (guestenv.DisplayArgs).
	tail := append([]string{guestPath, "guest", "--sandboxed"}, guestenv.DisplayArgs(environment.Config{})...)
	if !slices.Equal(args[len(args)-len(tail):], tail) {
		t.Errorf("the command is not last: %q, want %q", args[len(args)-len(tail):], tail)
	}
	// bubblewrap before 0.8 cannot disable nested user namespaces.
	b.disableUserns = false
	if slices.Contains(sandboxArgs(b, environment.Config{}, res, "/g", nil, nil, nil), "--disable-userns") {
		t.Error("--disable-userns passed to an old bubblewrap")
	}
	// A cgroup v2 sandbox sees its own cgroup, read-only, before the root
	// turns read-only.
	args = sandboxArgs(b, environment.Config{}, res, "/g", nil, nil, (&cgroup{dir: "/sys/fs/cgroup/agentbox/sandbox-1"}).binds())
	line = strings.Join(args, " ")
	if !strings.Contains(line, "--ro-bind /sys/fs/cgroup/agentbox/sandbox-1 /sys/fs/cgroup --remount-ro /") {
		t.Errorf("cgroup not bound: %s", line)
	}
}

func TestSystemLinks(t *testing.T) {
	out := strings.Join(systemLinks(), " ")
	for _, d := range []string{"/bin", "/lib"} {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(d)
			if !strings.Contains(out, "--symlink "+target+" "+d) {
				t.Errorf("%s → %s not reproduced: %s", d, target, out)
			}
		} else if !strings.Contains(out, "--ro-bind "+d+" "+d) {
			t.Errorf("%s not bound: %s", d, out)
		}
	}
}

func TestProcLimit(t *testing.T) {
	table := `Limit                     Soft Limit           Hard Limit           Units
Max file size             268435456            268435456            bytes
Max processes             256                  256                  processes
Max core file size        0                    unlimited            bytes
`
	for _, c := range []struct {
		label      string
		soft, hard uint64
	}{
		{"Max processes ", 256, 256},
		{"Max file size ", 256 << 20, 256 << 20},
		{"Max core file size ", 0, ^uint64(0)},
	} {
		soft, hard, ok := procLimit(table, c.label)
		if !ok || soft != c.soft || hard != c.hard {
			t.Errorf("%q: %d %d %v", c.label, soft, hard, ok)
		}
	}
	if _, _, ok := procLimit(table, "Max data size "); ok {
		t.Error("found a missing row")
	}
}

// TestRlimitsInGuest starts this test binary as the guest would be
// started, with AGENTBOX_RLIMITS in its environment: the package's init
// applies them before main, and the host-side check agrees.
func TestRlimitsInGuest(t *testing.T) {
	if os.Getenv("AGENTBOX_RLIMITS_HELPER") != "" {
		return
	}
	res := environment.Resources{PIDs: 999, MemoryMB: 3000, TmpfsMB: 77}.WithDefaults()
	limits := rlimits(res)
	cmd := exec.Command(os.Args[0], "-test.run=^TestRlimitsHelper$")
	cmd.Env = append(os.Environ(), rlimitEnv+"="+rlimitSpec(limits), "AGENTBOX_RLIMITS_HELPER=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"Max processes 999 999", "Max data size 3145728000 3145728000", "Max file size 80740352 80740352", "Max core file size 0 0", "env: "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the helper's limits lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), rlimitEnv+"=") {
		t.Errorf("%s is still in the guest's environment:\n%s", rlimitEnv, out)
	}
}

func TestRlimitsHelper(t *testing.T) {
	if os.Getenv("AGENTBOX_RLIMITS_HELPER") == "" {
		t.Skip("runs only as TestRlimitsInGuest's child")
	}
	data, _ := os.ReadFile("/proc/self/limits")
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) >= 4 {
			t.Log(strings.Join(f[:len(f)-3], " "), f[len(f)-3], f[len(f)-2])
		}
	}
	for _, lim := range []string{"Max processes ", "Max data size ", "Max file size ", "Max core file size "} {
		soft, hard, _ := procLimit(string(data), lim)
		os.Stdout.WriteString(strings.TrimSpace(lim) + " " + strconv.FormatUint(soft, 10) + " " + strconv.FormatUint(hard, 10) + "\n")
	}
	os.Stdout.WriteString("env: " + strings.Join(os.Environ(), " ") + "\n")
	tasks, _ := os.ReadDir("/proc/self/task")
	os.Stdout.WriteString("threads " + strconv.Itoa(len(tasks)) + "\n")
}

func TestCheckRlimits(t *testing.T) {
	var cur unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &cur); err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	if err := checkRlimits(self, []rlimit{{"RLIMIT_NPROC", "Max processes ", unix.RLIMIT_NPROC, cur.Max}}); err != nil {
		t.Errorf("own limit: %v", err)
	}
	if cur.Max > 1 {
		if err := checkRlimits(self, []rlimit{{"RLIMIT_NPROC", "Max processes ", unix.RLIMIT_NPROC, 1}}); err == nil {
			t.Error("a higher limit passed the check")
		}
	}
}

func TestReachable(t *testing.T) {
	testenv.Require(t, testenv.Root("to judge another uid's access to root's files"))
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	priv := filepath.Join(dir, "private")
	pub := filepath.Join(dir, "public")
	os.Mkdir(priv, 0o700)
	os.Mkdir(pub, 0o755)
	for _, d := range []string{priv, pub} {
		os.WriteFile(filepath.Join(d, "bin"), []byte("x"), 0o755)
	}
	os.Chmod(dir, 0o755)
	if reachable(filepath.Join(priv, "bin"), RootHostUID, RootHostUID) {
		t.Error("a file in a 0700 directory of root's is reachable by nobody")
	}
	if !reachable(filepath.Join(pub, "bin"), RootHostUID, RootHostUID) {
		t.Error("a 0755 file in 0755 directories is not reachable")
	}

}

// TestCgroupParent walks the cgroup v2 choice on a fake hierarchy (cgroup
// v1's: TestCgroup1Parent).
func TestCgroupParent(t *testing.T) {
	old := cgroupRoot
	t.Cleanup(func() { cgroupRoot = old })

	cgroupRoot = t.TempDir()
	if p := findCgroupParent(); p.usable() || !strings.Contains(p.reason, "no cgroup hierarchy") {
		t.Errorf("no hierarchy: %+v", p)
	}
	os.Mkdir(filepath.Join(cgroupRoot, "memory"), 0o755)
	os.WriteFile(filepath.Join(cgroupRoot, "memory", "memory.limit_in_bytes"), nil, 0o644)
	if p := findCgroupParent(); p.usable() || !strings.Contains(p.reason, "cgroup v1") {
		t.Errorf("a v1 host without cpu and pids: %+v", p)
	}
	os.WriteFile(filepath.Join(cgroupRoot, "cgroup.controllers"), []byte("cpu io pids\n"), 0o644)
	if p := findCgroupParent(); !strings.Contains(p.reason, "memory") {
		t.Errorf("no memory controller: %+v", p)
	}
	if os.Geteuid() != 0 {
		return
	}
	// A writable root: sandboxes go under <root>/agentbox.
	os.WriteFile(filepath.Join(cgroupRoot, "cgroup.controllers"), []byte("cpuset cpu io memory pids\n"), 0o644)
	os.WriteFile(filepath.Join(cgroupRoot, "cgroup.subtree_control"), nil, 0o644)
	os.Mkdir(filepath.Join(cgroupRoot, "agentbox"), 0o755)
	os.WriteFile(filepath.Join(cgroupRoot, "agentbox", "cgroup.subtree_control"), []byte("cpu memory pids\n"), 0o644)
	p := findCgroupParent()
	if p.dir != filepath.Join(cgroupRoot, "agentbox") {
		t.Fatalf("writable root: %+v", p)
	}
	if got, _ := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.subtree_control")); string(got) != "+cpu +memory +pids" {
		t.Errorf("root subtree_control = %q", got)
	}
	res := environment.Resources{CPUs: 1.5, MemoryMB: 512, PIDs: 64}.WithDefaults()
	cg, err := newCgroup(p.dir, res)
	if err != nil {
		t.Fatal(err)
	}
	defer cg.fd.Close()
	for file, want := range map[string]string{"memory.max": "536870912", "pids.max": "64", "cpu.max": "150000 100000"} {
		if got, _ := os.ReadFile(filepath.Join(cg.dir, file)); string(got) != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	if d := cg.describe(res); !strings.HasPrefix(d, LimitsCgroup2+" "+cg.dir+":") {
		t.Errorf("describe = %q", d)
	}
}

// cgroup2Mount finds a writable cgroup v2 mount (the unified hierarchy, or
// the hybrid one's), "" if none.
func cgroup2Mount() string {
	data, _ := os.ReadFile("/proc/self/mounts")
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) > 2 && f[2] == "cgroup2" && unix.Access(f[1], unix.W_OK) == nil {
			return f[1]
		}
	}
	return ""
}

// TestCgroupMechanics runs a process in a sandbox cgroup the way Create
// does (CLONE_INTO_CGROUP), freezes and thaws it, and removes the cgroup
// with the process still in it. It needs a writable cgroup v2 mount (as
// root, also the hybrid /sys/fs/cgroup/unified of a cgroup v1 host, which
// has no controllers: the limits themselves are TestCgroupParent's).
func TestCgroupMechanics(t *testing.T) {
	mnt := cgroup2Mount()
	var noMount error
	if mnt == "" {
		noMount = errors.New("none in /proc/self/mounts")
	}
	testenv.Require(t, testenv.Condition("a writable cgroup v2 mount", noMount))
	cg := &cgroup{dir: filepath.Join(mnt, "agentbox-test-"+strconv.Itoa(os.Getpid()))}
	testenv.Require(t, testenv.Condition("a cgroup of our own under "+mnt, os.Mkdir(cg.dir, 0o755)))
	t.Cleanup(func() { os.Remove(cg.dir) })
	fd, err := os.Open(cg.dir)
	if err != nil {
		t.Fatal(err)
	}
	cg.fd = fd
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = sysProcAttr()
	cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(fd.Fd())
	if err := cmd.Start(); err != nil {
		t.Fatalf("start into %s: %v", cg.dir, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	procs, _ := os.ReadFile(filepath.Join(cg.dir, "cgroup.procs"))
	if strings.TrimSpace(string(procs)) != strconv.Itoa(cmd.Process.Pid) {
		t.Errorf("cgroup.procs = %q, want %d", procs, cmd.Process.Pid)
	}
	ctx := t.Context()
	if err := cg.freeze(ctx, true); err != nil {
		t.Fatal(err)
	}
	if err := cg.freeze(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := cg.remove(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		t.Fatal("cgroup.kill did not end the process")
	}
	if _, err := os.Stat(cg.dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists: %v", cg.dir, err)
	}
}

// TestFloorArgs: the cold-start floor runs bubblewrap with Create's
// arguments but for the command (true) and the info descriptor.
func TestFloorArgs(t *testing.T) {
	b := &bwrapInfo{path: "/usr/bin/bwrap", version: "0.8.0", size: true, disableUserns: true}
	res := environment.Resources{}.WithDefaults()
	args := sandboxArgs(b, environment.Config{RunID: "r"}, res, "/opt/guest", rlimits(res), nil, nil)
	got := floorArgs(args)
	if got[len(got)-1] != "/usr/bin/true" || slices.Contains(got, "--info-fd") || slices.Contains(got, "--sandboxed") {
		t.Fatalf("floor args end %q, contain --info-fd %v", got[len(got)-3:], slices.Contains(got, "--info-fd"))
	}
	cmd := len(args) - 3 - len(guestenv.DisplayArgs(environment.Config{}))
	if args[cmd] != guestPath {
		t.Fatalf("the guest's command line is not at the end of %q", args)
	}
	if len(got) != cmd-1 || !slices.Equal(got[:len(got)-1], slices.Delete(slices.Clone(args[:cmd]), slices.Index(args, "--info-fd"), slices.Index(args, "--info-fd")+2)) {
		t.Errorf("floor args differ from Create's beyond the command and --info-fd:\n%q\n%q", got, args)
	}
}
