package envtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/envtest/probeout"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/observe"
)

// probe is the path of the built isolation probe.
func (s *suite) probe(t *testing.T) string {
	t.Helper()
	if s.o.Probe != "" {
		return s.o.Probe
	}
	return testenv.Build(t, "./environment/envtest/probe")
}

// probeApp is an app directory that runs the probe with args.
func (s *suite) probeApp(t *testing.T, args ...string) string {
	t.Helper()
	data, err := os.ReadFile(s.probe(t))
	if err != nil {
		t.Fatal(err)
	}
	quoted, _ := json.Marshal(args)
	return writeApp(t, `{"command":"probe","wait_for_window":false,"args":`+string(quoted)+`}`, map[string]string{"probe": string(data)})
}

// line waits for a stdout line "KIND {json}" and decodes it into v.
func (b *box) line(kind string, d time.Duration, v any) {
	b.t.Helper()
	var err error
	ok := b.sink.waitFor(d, func() bool {
		var found bool
		found, err = probeout.Find(b.sink.stdout(), kind, v)
		return found
	})
	if !ok {
		b.t.Fatalf("the probe printed no %s line in %v\nstdout: %.2000s\nstderr: %.2000s", kind, d, b.sink.stdout(), b.sink.stderr())
	}
	if err != nil {
		b.t.Fatalf("%s line: %v\nstdout: %.2000s", kind, err, b.sink.stdout())
	}
}

// exit waits for the app's exit.
func (b *box) exit(d time.Duration) {
	b.t.Helper()
	if !b.sink.waitFor(d, func() bool { return b.sink.exited() != nil }) {
		b.t.Fatalf("the app did not exit within %v\nstderr: %.2000s", d, b.sink.stderr())
	}
}

// check is one expectation of the isolation tests.
type check struct {
	what string
	ok   bool
	got  any
}

func report(t *testing.T, checks []check) {
	t.Helper()
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: got %v", c.what, c.got)
		}
	}
}

func (s *suite) testIsolation(t *testing.T) {
	t.Run("Posture", s.testPosture)
	t.Run("Egress", s.testEgress)
	t.Run("ForkBomb", s.testForkBomb)
	t.Run("Daemons", s.testDaemons)
	t.Run("Flood", s.testFlood)
}

// testPosture checks from inside what every sandbox must be, and what the
// backend promises beyond that (Options.Posture).
func (s *suite) testPosture(t *testing.T) {
	const secret = "AGENTBOX_ENVTEST_SECRET"
	t.Setenv(secret, "do-not-leak")
	marker := filepath.Join(t.TempDir(), "host-only")
	if err := os.WriteFile(marker, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := s.newBox(t, func(c *environment.Config) { c.Resources.TmpfsMB = 128 })
	if _, err := b.staged(s.probeApp(t, "posture", marker), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var p probeout.Posture
	b.line(probeout.KindPosture, 20*time.Second, &p)
	b.exit(10 * time.Second)
	t.Logf("posture: %+v", p)

	host := map[string]string{}
	for ns := range p.Namespaces {
		host[ns], _ = os.Readlink("/proc/self/ns/" + ns)
	}
	hostname, _ := os.Hostname()
	res := b.cfg.Resources.WithDefaults()
	rofs := syscall.EROFS.Error()
	checks := []check{
		{"uid is not 0, or a user namespace of its own", p.UID != 0 || p.UserNS, fmt.Sprintf("uid %d, user namespace %v", p.UID, p.UserNS)},
		{"no effective capabilities", p.CapEff == "0000000000000000", p.CapEff},
		{"no new privileges", p.NoNewPrivs == "1", p.NoNewPrivs},
		onlyLo(p.Interfaces, s.o.Posture.PodInterface),
		{"hostname is the sandbox's", p.Hostname != "" && p.Hostname != hostname, p.Hostname},
		{"the root is read-only", p.Writes["/"] == rofs, p.Writes["/"]},
		{"/usr is read-only", p.Writes["/usr"] == rofs, p.Writes["/usr"]},
		{"/etc is read-only", p.Writes["/etc"] == rofs, p.Writes["/etc"]},
		{"/var is read-only", p.Writes["/var"] == rofs, p.Writes["/var"]},
		// Positive controls: the same write works where it should.
		{"/tmp is writable", p.Writes["/tmp"] == "", p.Writes["/tmp"]},
		{"/dev/shm is writable", p.Writes["/dev/shm"] == "", p.Writes["/dev/shm"]},
		{"$HOME is writable", len(p.Writes) == 7 && p.Writes[p.Home] == "", p.Writes},
		{"/tmp is capped at --tmpfs (128 MiB)", p.TmpBytes == 128<<20, p.TmpBytes},
		{"/dev/shm is capped", p.ShmBytes > 0 && p.ShmBytes <= uint64(res.ShmMB)<<20, p.ShmBytes},
		{"the app runs from the tmpfs", p.ExeOnTmp, p.ExeOnTmp},
		{"host environment not visible", !slices.Contains(p.EnvKeys, secret) && !slices.Contains(p.EnvKeys, "DBUS_SESSION_BUS_ADDRESS") && !slices.Contains(p.EnvKeys, "SSH_AUTH_SOCK"), p.EnvKeys},
		{"host files not visible (" + marker + ")", p.HostPath == "", p.HostPath},
		{"no D-Bus system bus", p.DBus != "", p.DBus},
		{"only the sandbox's processes are visible", p.Processes > 0 && p.Processes <= 30, p.ProcessComm},
	}
	for _, ns := range []string{"pid", "net", "ipc", "uts", "mnt"} {
		checks = append(checks, check{"a " + ns + " namespace of its own", p.Namespaces[ns] != "" && p.Namespaces[ns] != host[ns], p.Namespaces[ns] + " (host " + host[ns] + ")"})
	}
	if s.o.Posture.UserNamespace {
		checks = append(checks, check{"a user namespace of its own", p.UserNS && p.Namespaces["user"] != host["user"], p.Namespaces["user"]})
	}
	if s.o.Posture.Seccomp {
		checks = append(checks, check{"a seccomp filter", p.Seccomp == "2", p.Seccomp})
	}
	report(t, checks)
}

// onlyLo: the sandbox's interfaces are lo alone, or lo and the one a
// Kubernetes Pod always has.
func onlyLo(ifs []string, pod bool) check {
	if pod {
		return check{"only lo and the Pod's interface", len(ifs) == 2 && slices.Contains(ifs, "lo"), ifs}
	}
	return check{"only lo", len(ifs) == 1 && ifs[0] == "lo", ifs}
}

// hostIPv4 is a non-loopback IPv4 address of this host, "" if none.
func hostIPv4() string {
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
				return n.IP.String()
			}
		}
	}
	return ""
}

// counter counts connections or datagrams a host listener received.
type counter struct{ n atomic.Int64 }

func listenTCP(t *testing.T, addr string) (*net.TCPListener, *counter) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	c := &counter{}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.n.Add(1)
			conn.Close()
		}
	}()
	return l.(*net.TCPListener), c
}

func port(a net.Addr) string {
	_, p, _ := net.SplitHostPort(a.String())
	return p
}

// testEgress: the sandbox reaches neither a host address (TCP, UDP) nor a
// port on the host's loopback, while the same calls to itself work.
func (s *suite) testEgress(t *testing.T) {
	ip := hostIPv4()
	var tcpPort, udpPort string
	var tcpCount, udpCount *counter
	if ip == "" {
		t.Log("this host has no non-loopback IPv4 address: only the loopback is probed")
	} else {
		var l *net.TCPListener
		l, tcpCount = listenTCP(t, net.JoinHostPort(ip, "0"))
		tcpPort = port(l.Addr())
		pc, err := net.ListenPacket("udp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pc.Close() })
		udpPort = port(pc.LocalAddr())
		udpCount = &counter{}
		go func() {
			buf := make([]byte, 64)
			for {
				if _, _, err := pc.ReadFrom(buf); err != nil {
					return
				}
				udpCount.n.Add(1)
			}
		}()
		// Positive control on the host: the listeners answer there.
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, tcpPort), 2*time.Second)
		if err != nil {
			t.Fatalf("host-side control: %v", err)
		}
		c.Close()
		u, _ := net.Dial("udp", net.JoinHostPort(ip, udpPort))
		u.Write([]byte("control"))
		u.Close()
		deadline := time.Now().Add(2 * time.Second)
		for (tcpCount.n.Load() < 1 || udpCount.n.Load() < 1) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if tcpCount.n.Load() != 1 || udpCount.n.Load() != 1 {
			t.Fatalf("host-side control: the listeners saw %d TCP, %d UDP", tcpCount.n.Load(), udpCount.n.Load())
		}
	}
	loop, loopCount := listenTCP(t, "127.0.0.1:0")

	b := s.newBox(t)
	if _, err := b.staged(s.probeApp(t, "egress", ip, tcpPort, udpPort, port(loop.Addr())), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var e probeout.Egress
	b.line(probeout.KindEgress, 30*time.Second, &e)
	t.Logf("egress: %+v", e)
	time.Sleep(200 * time.Millisecond) // a datagram that got out would be here by now
	checks := []check{
		{"TCP to the host's loopback fails", e.TCPLoop != "", e.TCPLoop},
		{"the host's loopback listener saw nothing", loopCount.n.Load() == 0, loopCount.n.Load()},
		// Positive controls: the probe's own calls work inside.
		{"TCP to itself on 127.0.0.1 works", e.TCPSelf == "" && e.SelfEcho == "pong", e.TCPSelf + " " + e.SelfEcho},
		{"UDP to itself on 127.0.0.1 works", e.UDPSelf == "", e.UDPSelf},
		{"localhost is a loopback name", e.Localhost == "", e.Localhost},
	}
	if ip != "" {
		checks = append(checks,
			check{"TCP to " + ip + " fails", e.TCPHost != "", e.TCPHost},
			check{"UDP to " + ip + " fails", e.UDPHost != "", e.UDPHost},
			check{"the host's TCP listener saw nothing", tcpCount.n.Load() == 1, tcpCount.n.Load() - 1},
			check{"the host's UDP listener saw nothing", udpCount.n.Load() == 1, udpCount.n.Load() - 1},
		)
	}
	report(t, checks)
}

// testForkBomb: processes stop at Resources.PIDs, the bombed sandbox still
// answers, and another sandbox started meanwhile works.
func (s *suite) testForkBomb(t *testing.T) {
	limit := 128
	if !environment.CapabilitiesOf(s.o.Backend).Limits.PIDs && s.o.PIDs > 0 {
		limit = s.o.PIDs // the backend's own limit holds instead
		t.Logf("the backend holds no sandbox to Resources.PIDs: its own limit of %d processes is checked", limit)
	}
	a := s.newBox(t, func(c *environment.Config) { c.Resources.PIDs = limit })
	if _, err := a.staged(s.probeApp(t, "forkbomb"), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var fb struct {
		Started int
		Err     string
	}
	threadFail := func() bool {
		e := a.sink.stderr()
		return strings.Contains(e, "failed to create new OS thread") || strings.Contains(e, "resource temporarily unavailable")
	}
	a.sink.waitFor(60*time.Second, func() bool { return strings.Contains(a.sink.stdout(), "FORKBOMB {") || threadFail() })
	if strings.Contains(a.sink.stdout(), "FORKBOMB {") {
		a.line("FORKBOMB", time.Second, &fb)
	} else {
		// The Go runtime of the probe died at the limit itself: count its
		// progress.
		for _, l := range strings.Split(a.sink.stdout(), "\n") {
			if n, err := strconv.Atoi(strings.TrimPrefix(l, "FORKBOMB-PROGRESS ")); err == nil {
				fb.Started = n
			}
		}
		fb.Err = "runtime: " + strings.SplitN(a.sink.stderr(), "\n", 2)[0]
	}
	t.Logf("fork bomb: %d processes started, then %q", fb.Started, fb.Err)
	report(t, []check{
		{"the probe could start processes (control)", fb.Started >= 20, fb.Started},
		{fmt.Sprintf("it stopped below the limit of %d", limit), fb.Started > 0 && fb.Started < limit, fb.Started},
		{"fork failed for lack of processes (EAGAIN)", strings.Contains(fb.Err, "resource temporarily unavailable") || strings.Contains(fb.Err, "failed to create new OS thread"), fb.Err},
	})
	// The bombed sandbox's guest still answers, if the backend promises it.
	if _, _, err := a.env.Observe(a.ctx); err != nil {
		if s.o.Posture.GuestSurvivesForkBomb {
			t.Errorf("the bombed sandbox's guest: %v", err)
		} else {
			t.Logf("the bombed sandbox's guest did not survive (not promised by this backend): %v", err)
		}
	}

	// A sandbox started during the bomb runs normally.
	b := s.newBox(t)
	script := "#!/bin/sh\ni=0\nwhile [ $i -lt 20 ]; do sleep 0.05 & i=$((i+1)); done\nwait\necho parallel-ok\n"
	if _, err := b.staged(writeApp(t, `{"command":"run.sh","wait_for_window":false}`, map[string]string{"run.sh": script}), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	b.exit(20 * time.Second)
	if e := b.sink.exited(); e.Code != 0 || !strings.Contains(b.sink.stdout(), "parallel-ok") {
		t.Errorf("the parallel sandbox: exit %+v, stdout %q, stderr %q", e, b.sink.stdout(), b.sink.stderr())
	}
	b.observe()
	if err := exec.Command("true").Run(); err != nil {
		t.Errorf("the host cannot start a process: %v", err)
	}
}

// hostProcs lists host processes whose command line contains token.
func hostProcs(token string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(data), token) {
			continue
		}
		st, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if i := strings.LastIndexByte(string(st), ')'); i > 0 && len(st) > i+2 && st[i+2] == 'Z' {
			continue
		}
		out = append(out, e.Name()+":"+strings.ReplaceAll(strings.TrimRight(string(data), "\x00"), "\x00", " "))
	}
	sort.Strings(out)
	return out
}

// testDaemons: processes an app detaches (setsid, double fork, its own
// group) and that ignore SIGTERM are gone after Close.
func (s *suite) testDaemons(t *testing.T) {
	token := fmt.Sprintf("agentbox-daemon-%d", time.Now().UnixNano())
	b := s.newBox(t)
	if _, err := b.staged(s.probeApp(t, "daemons", token), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	b.exit(20 * time.Second)
	if !strings.Contains(b.sink.stdout(), "DAEMONS started") {
		t.Fatalf("the probe did not start its daemons: %q %q", b.sink.stdout(), b.sink.stderr())
	}
	// Positive control: the host sees the three daemons.
	var procs []string
	deadline := time.Now().Add(5 * time.Second)
	for {
		procs = hostProcs(token)
		kinds := map[string]bool{}
		for _, p := range procs {
			for _, k := range []string{"-setsid", "-orphan", "-group"} {
				if strings.Contains(p, token+k) {
					kinds[k] = true
				}
			}
		}
		if len(kinds) == 3 || time.Now().After(deadline) {
			if len(kinds) != 3 {
				t.Fatalf("control: the host sees %d of the 3 daemons: %q", len(kinds), procs)
			}
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("before Close: %q", procs)
	if err := b.env.Close(b.ctx); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for len(hostProcs(token)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := hostProcs(token); len(left) > 0 {
		t.Errorf("daemons left after Close: %q", left)
	}
}

// testFlood: 1 GiB on stdout leaves the host's memory flat, the log capped
// at LogCap, and the app unblocked (it finishes).
func (s *suite) testFlood(t *testing.T) {
	const total = 1 << 30
	const logCap = 1 << 20 // box.staged's LogCap
	b := s.newBox(t)
	runtime.GC()
	heap0, avail0 := heapInUse(), memAvailable()
	if _, err := b.staged(s.probeApp(t, "flood", strconv.Itoa(total)), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	b.exit(2 * time.Minute)
	time.Sleep(100 * time.Millisecond) // the last dropped-bytes report
	runtime.GC()
	heap1, avail1 := heapInUse(), memAvailable()
	b.sink.mu.Lock()
	got, dropped := int64(b.sink.out[observe.Stdout].Len()), b.sink.dropped[observe.Stdout]
	b.sink.mu.Unlock()
	t.Logf("flood: %d bytes delivered, %d dropped; test heap %+d MiB, host MemAvailable %+d MiB", got, dropped, (heap1-heap0)>>20, (avail1-avail0)>>20)
	report(t, []check{
		{"the app finished its flood (never blocked)", b.sink.exited().Code == 0 && strings.Contains(b.sink.stderr(), fmt.Sprintf("FLOOD done %d", total)), b.sink.stderr()},
		{"the log is capped at LogCap", got == logCap, got},
		// Positive control: the rest was produced and counted as dropped.
		{"the rest was counted as dropped", got+dropped == total, got + dropped},
		{"the test process's heap stayed flat (< 64 MiB more)", heap1-heap0 < 64<<20, (heap1 - heap0) >> 20},
		{"the host's available memory stayed flat (< 512 MiB less)", avail0 < 0 || avail0-avail1 < 512<<20, (avail0 - avail1) >> 20},
	})
}

func heapInUse() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// memAvailable is the host's MemAvailable in bytes, -1 if unknown.
func memAvailable() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return -1
}
