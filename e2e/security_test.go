package e2e

// The red-team suite (SECURITY.md): every promise agentbox makes about a
// hostile app is tried from inside a real container, and every negative
// probe has a positive control proving the probe itself works — the same
// operation succeeding where it should (on loopback, on the tmpfs, on the
// host, on the app's own child).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
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

type probeResult struct {
	Probe string `json:"probe"`
	OK    bool   `json:"ok"`
	Err   string `json:"err"`
	Errno string `json:"errno"`
	Info  string `json:"info"`
}

// hostileApp stages the hostile probe with a mode.
func hostileApp(t *testing.T, args ...string) string {
	t.Helper()
	bin := testenv.Build(t, "./e2e/testdata/hostile")
	dir := t.TempDir()
	data, _ := os.ReadFile(bin)
	os.WriteFile(filepath.Join(dir, "hostile"), data, 0o755)
	a, _ := json.Marshal(args)
	os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command":"hostile","wait_for_window":false,"args":`+string(a)+`}`), 0o644)
	return dir
}

// probeScript waits for the probe to finish.
const probeScript = "steps:\n  - {wait_for: log, contains: PROBES DONE, timeout_ms: 60000}\n"

// runProbe runs a mode in a sandbox and returns its results by probe name.
func runProbe(t *testing.T, extra []string, args ...string) (map[string]probeResult, result) {
	t.Helper()
	argv := append([]string{"run", hostileApp(t, args...), "--image", testenv.TestImage, "--script", writeScript(t, probeScript)}, extra...)
	r := agentbox(t, argv...)
	if r.code != 0 {
		t.Fatalf("the probe run failed:\n%s", r)
	}
	out, _ := os.ReadFile(filepath.Join(r.dir, trace.StdoutFile))
	res := parseResults(t, string(out))
	assertNoContainers(t, openTrace(t, r.dir).Run.ID)
	return res, r
}

func parseResults(t *testing.T, out string) map[string]probeResult {
	res := map[string]probeResult{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		_, js, ok := strings.Cut(sc.Text(), "RESULT ")
		if !ok {
			continue
		}
		var p probeResult
		if err := json.Unmarshal([]byte(js), &p); err != nil {
			t.Fatalf("bad result line %q: %v", sc.Text(), err)
		}
		if _, dup := res[p.Probe]; dup {
			p.Probe += " " + strconv.Itoa(len(res))
		}
		res[p.Probe] = p
	}
	return res
}

// expect checks that probes failed (or succeeded) as promised.
func expect(t *testing.T, res map[string]probeResult, ok bool, errnos string, probes ...string) {
	t.Helper()
	for _, name := range probes {
		p, found := res[name]
		switch {
		case !found:
			t.Errorf("probe %q did not report", name)
		case p.OK != ok:
			t.Errorf("probe %q: ok=%v, want %v (%s %s)", name, p.OK, ok, p.Err, p.Info)
		case !ok && errnos != "" && !strings.Contains(errnos, p.Errno+",") && p.Errno != "":
			t.Errorf("probe %q failed with %s (%s), want one of %s", name, p.Errno, p.Err, errnos)
		}
	}
}

// runOnHost runs the probe directly on the host, as the positive control
// for probes whose in-sandbox control cannot succeed (raw sockets, unshare
// need privileges the sandbox never has). Only modes that leave the host as
// it was may run here.
func runOnHost(t *testing.T, args ...string) map[string]probeResult {
	t.Helper()
	bin := testenv.Build(t, "./e2e/testdata/hostile")
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var b strings.Builder
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if sc.Text() == "PROBES DONE" {
			break
		}
		b.WriteString(sc.Text() + "\n")
	}
	return parseResults(t, b.String())
}

// bridgeGateway is the host's address on Docker's default bridge (docker0):
// what a container with networking would reach the host at.
func bridgeGateway(t *testing.T) string {
	ifc, err := net.InterfaceByName("docker0")
	if err != nil {
		t.Fatalf("docker0: %v", err)
	}
	addrs, _ := ifc.Addrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	t.Fatal("docker0 has no IPv4 address")
	return ""
}

// 1. Egress: TCP, UDP/DNS, ICMP, IPv6, the bridge gateway and the cloud
// metadata address all fail; only lo exists. Controls: loopback inside the
// sandbox works, and from the host the same probe reaches the listeners.
func TestSecurityEgress(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.TestImage))
	gw := bridgeGateway(t)
	tl, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ul, err := net.ListenPacket("udp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	tp := strconv.Itoa(tl.Addr().(*net.TCPAddr).Port)
	up := strconv.Itoa(ul.LocalAddr().(*net.UDPAddr).Port)
	res, _ := runProbe(t, nil, "egress", tp, up, gw)
	expect(t, res, true, "", "tcp loopback (control)", "udp loopback (control)")
	expect(t, res, false, "ENETUNREACH,EHOSTUNREACH,EADDRNOTAVAIL,", "tcp 1.1.1.1:53", "tcp 8.8.8.8:443", "tcp "+net.JoinHostPort(gw, tp),
		"tcp 169.254.169.254:80", "tcp [2001:4860:4860::8888]:53", "udp 8.8.8.8:53", "udp "+net.JoinHostPort(gw, up), "udp [2001:4860:4860::8888]:53")
	expect(t, res, false, "", "dns example.com")
	expect(t, res, false, "EPERM,EACCES,", "icmp raw socket")
	// Docker allows unprivileged ping sockets (ping_group_range); with no
	// route the ping still goes nowhere.
	expect(t, res, false, "EPERM,EACCES,ENETUNREACH,", "icmp ping 8.8.8.8")
	if i := res["interfaces"].Info; i != "lo" {
		t.Errorf("interfaces inside the sandbox: %q, want only lo", i)
	}
	// Positive control: from the host the probe reaches the gateway
	// listeners and may open a raw ICMP socket (root).
	host := runOnHost(t, "egress", tp, up, gw)
	expect(t, host, true, "", "tcp "+net.JoinHostPort(gw, tp), "udp "+net.JoinHostPort(gw, up), "icmp raw socket")
}

// 2. Writes outside the tmpfs fail; tmpfs writes succeed; the image is
// unchanged.
func TestSecurityWrites(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.TestImage))
	before := imageID(t, testenv.TestImage)
	res, _ := runProbe(t, nil, "writes")
	expect(t, res, true, "", "write /tmp (control)", "write $HOME (tmpfs, control)")
	expect(t, res, false, "EROFS,EACCES,", "write /probe", "write /usr/probe", "write /etc/probe", "write /home/agentbox/probe",
		"write /opt/agentbox/probe", "write /opt/agentbox/agentbox", "write /etc/hosts", "write /proc/sys/kernel/hostname", "write /sys/kernel/profiling")
	if after := imageID(t, testenv.TestImage); after != before {
		t.Errorf("the image changed: %s → %s", before, after)
	}
}

func imageID(t *testing.T, ref string) string {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	img, err := cli.ImageInspect(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return img.ID
}

// 3. No host files or secrets: no Docker socket, no bind mount but the
// read-only guest binary (and Docker's own read-only hosts files), no host
// environment variables.
func TestSecuritySecrets(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.TestImage))
	t.Setenv("OPENAI_API_KEY", "sk-test-must-not-leak")
	t.Setenv("AGENTBOX_TEST_SECRET", "must-not-leak")
	res, r := runProbe(t, nil, "secrets")
	expect(t, res, true, "", "read mountinfo (control)")
	expect(t, res, false, "ENOENT,", "stat /var/run/docker.sock", "stat /run/docker.sock", "stat /run/containerd/containerd.sock")
	for name, p := range res {
		if !strings.HasPrefix(name, "mount") {
			continue
		}
		f := strings.Fields(p.Info) // mount point, options, source root
		if len(f) < 3 {
			continue
		}
		src, point, opts := f[2], f[0], f[1]
		hostPath := strings.HasPrefix(src, "/tmp/") || strings.HasPrefix(src, "/home") || strings.HasPrefix(src, "/root") || strings.HasPrefix(src, "/work")
		switch {
		case point == "/tmp" && !strings.Contains(opts, "nosuid"):
			t.Errorf("the tmpfs is mounted without nosuid: %s", opts)
		case point == "/opt/agentbox/agentbox":
			if !strings.HasPrefix(opts, "ro") {
				t.Errorf("the guest binary is mounted %s", opts)
			}
		case hostPath:
			t.Errorf("a host path is mounted into the sandbox: %s at %s", src, point)
		case strings.HasPrefix(src, "/var/lib/docker/containers/") && !strings.HasPrefix(opts, "ro"):
			t.Errorf("%s is mounted writable", point)
		}
	}
	env := res["env"].Info
	for _, k := range []string{"OPENAI_API_KEY", "AGENTBOX_TEST_SECRET", "DOCKER_HOST"} {
		if strings.Contains(","+env+",", ","+k+",") {
			t.Errorf("host variable %s is visible inside: %s", k, env)
		}
	}
	// The key is nowhere in the trace either.
	filepath.Walk(r.dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), "sk-test-must-not-leak") {
				t.Errorf("the key leaked into %s", p)
			}
		}
		return nil
	})
}

// 4. Privilege escalation fails; posture is NoNewPrivs 1, Seccomp 2,
// CapEff 0, non-root (see also TestPosture). Controls: the app can ptrace
// its own child; as root on the host, mount and unshare work.
func TestSecurityPrivilegeEscalation(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.TestImage))
	res, _ := runProbe(t, nil, "privesc")
	if u := res["uid"].Info; u != "1000/1000" {
		t.Errorf("uid/euid = %s", u)
	}
	expect(t, res, true, "", "ptrace own child (control)")
	expect(t, res, false, "EPERM,", "mount tmpfs", "unshare user namespace", "unshare mount namespace", "ptrace the guest", "keyctl", "add_key")
	expect(t, res, false, "", "run su root -c id -u", "run chage -l root", "run mount -t tmpfs none /tmp")
	// The control on the host runs only operations that leave the host as
	// it was (no mounts: they can propagate back into the host's namespace).
	host := runOnHost(t, "privesc-control")
	expect(t, host, true, "", "unshare mount namespace", "unshare nothing (control)", "keyctl")
}

// 5. A fork bomb stops at the PID limit, and a second run started in
// parallel completes normally.
func TestSecurityForkBomb(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.TestImage))
	other := make(chan result, 1)
	go func() { other <- agentbox(t, "run", moverApp(t, ""), "--agent", "demo") }()
	res, _ := runProbe(t, []string{"--pids", "128"}, "forkbomb")
	p := res["fork until refused"]
	n, _ := strconv.Atoi(p.Info)
	t.Logf("fork bomb: %d forks, then %s", n, p.Errno)
	if p.OK || p.Errno != "EAGAIN" || n >= 128 || n < 50 {
		t.Errorf("fork bomb: %d forks, then %s (%s); want EAGAIN below the 128 limit", n, p.Errno, p.Err)
	}
	if r := <-other; r.code != 0 {
		t.Errorf("the parallel run did not complete normally:\n%s", r)
	}
}

// 6. A memory bomb is OOM-killed inside the container; the trace says so.
func TestSecurityMemoryBomb(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.TestImage))
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command":"python3","args":["-c","x=[]\nwhile True: x.append(bytearray(32<<20))"],"wait_for_window":false}`), 0o644)
	r := agentbox(t, "run", dir, "--image", testenv.TestImage, "--memory", "384m", "--tmpfs", "64m", "--agent", "idle", "--agent-opt", "ms=20000")
	tr := openTrace(t, r.dir)
	if r.code != 1 || tr.Run.Reason != trace.ReasonAppExited || tr.Run.AppExit == nil || !tr.Run.AppExit.OOM {
		t.Fatalf("want failure/app_exited with oom_killed:\n%s\napp_exit %+v", r, tr.Run.AppExit)
	}
	if !strings.Contains(tr.Run.Message, "OOM") {
		t.Errorf("message %q does not say OOM", tr.Run.Message)
	}
	assertNoContainers(t, tr.Run.ID)
}

// 7. Filling the tmpfs and /dev/shm ends in ENOSPC, not an OOM of the
// sandbox: the app and the desktop live on.
func TestSecurityFill(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.TestImage))
	res, r := runProbe(t, []string{"--tmpfs", "96m", "--memory", "512m"}, "fill")
	expect(t, res, false, "ENOSPC,", "fill /tmp", "fill /dev/shm")
	expect(t, res, true, "", "write after fill (control)")
	tr := openTrace(t, r.dir)
	if tr.Run.AppExit != nil && tr.Run.AppExit.OOM {
		t.Errorf("filling the tmpfs OOM-killed the app")
	}
}

// 8. A 1 GiB stdout flood: agentbox's memory stays flat, stdout.log is
// capped with a truncation marker, the run ends normally.
func TestSecurityFlood(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.TestImage))
	bin := testenv.Build(t, "./cmd/agentbox")
	dir := filepath.Join(t.TempDir(), "trace")
	script := writeScript(t, "steps:\n  - {wait_for: log, stream: stderr, contains: flood done, timeout_ms: 120000}\n")
	cmd := exec.Command(bin, "run", hostileApp(t, "flood", strconv.Itoa(1<<30)), "--image", testenv.TestImage, "--script", script, "--out", dir, "--log-cap", "4m")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	peak := sampleMemory(cmd.Process.Pid)
	err := cmd.Wait()
	mem := peak()
	if err != nil {
		t.Fatalf("flood run: %v\n%s", err, out.String())
	}
	// What the flood could grow is agentbox's own memory: its anonymous
	// pages. Its peak RSS also counts the pages of its 100+ MiB binary
	// that the kernel mapped in, which depends on the kernel (fault-around,
	// huge pages for text), not on agentbox: logged, not judged.
	t.Logf("agentbox during a 1 GiB flood: peak anonymous memory %d MiB (sampled every 5 ms), peak RSS %d MiB, file-backed %d MiB",
		mem.anon>>10, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss>>10, mem.file>>10)
	if mem.samples == 0 {
		t.Fatalf("no memory sample of agentbox was taken")
	}
	if mem.anon > 100<<10 {
		t.Errorf("agentbox's anonymous memory peaked at %d MiB during the flood", mem.anon>>10)
	}
	tr := openTrace(t, dir)
	st, _ := os.Stat(filepath.Join(dir, trace.StdoutFile))
	tail, _ := os.ReadFile(filepath.Join(dir, trace.StdoutFile))
	if st.Size() > 4<<20+200 || !strings.Contains(string(tail[max(0, len(tail)-200):]), "[agentbox: stdout truncated at 4194304 bytes;") {
		t.Errorf("stdout.log is %d bytes, ends %q", st.Size(), tail[max(0, len(tail)-200):])
	}
	if tr.Run.Logs.StdoutDropped < 1<<30-4<<20-1<<20 {
		t.Errorf("dropped %d bytes; expected about 1 GiB", tr.Run.Logs.StdoutDropped)
	}
	if tr.Run.Outcome != trace.Success {
		t.Errorf("outcome %s", tr.Run.Outcome)
	}
	assertNoContainers(t, tr.Run.ID)
}

// memPeak is the most memory a process was seen using, in KiB.
type memPeak struct {
	anon, file int64 // RssAnon, RssFile of /proc/PID/status
	samples    int
}

// sampleMemory samples pid's /proc/PID/status every 5 ms until the
// returned function is called (after the process was waited for), which
// returns the peaks.
func sampleMemory(pid int) func() memPeak {
	stop, done := make(chan struct{}), make(chan memPeak)
	go func() {
		var p memPeak
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
				p.samples++
				for line := range strings.Lines(string(data)) {
					k, v, _ := strings.Cut(line, ":")
					n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
					switch k {
					case "RssAnon":
						p.anon = max(p.anon, n)
					case "RssFile":
						p.file = max(p.file, n)
					}
				}
			}
			select {
			case <-stop:
				done <- p
				return
			case <-tick.C:
			}
		}
	}()
	return func() memPeak { close(stop); return <-done }
}

// 9. Detached daemons that ignore SIGTERM (setsid, double fork) are gone
// when the run ends.
func TestSecurityDaemons(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.TestImage))
	mark := fmt.Sprintf("agentbox-daemon-%d", time.Now().UnixNano())
	res, _ := runProbe(t, nil, "daemons", mark)
	expect(t, res, true, "", "setsid daemon", "double-fork daemon")
	// The sandbox's processes are the host's processes: none may remain.
	out, _ := exec.Command("pgrep", "-f", mark).Output()
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("daemons survived the run: pids %s", s)
	}
}

// 10. An app that grabs the X server cannot hang the run: every X call
// has a deadline, and the run ends cleanly.
func TestSecurityGrabServer(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.TestImage))
	script := writeScript(t, "steps:\n  - {wait_for: log, contains: GRABBED, timeout_ms: 20000}\n  - {action: wait, ms: 100}\n  - {action: key, keys: a}\n")
	start := time.Now()
	r := agentbox(t, "run", hostileApp(t, "grab"), "--image", testenv.TestImage, "--script", script, "--timeout", "60s")
	took := time.Since(start)
	tr := openTrace(t, r.dir)
	if tr.Incomplete || r.code == 0 || took > 45*time.Second {
		t.Errorf("run with a grabbed X server: exit %d after %v, outcome %s (%s)", r.code, took, tr.Run.Outcome, tr.Run.Message)
	}
	t.Logf("grabbed server: %s/%s after %v: %s", tr.Run.Outcome, tr.Run.Reason, took.Round(time.Millisecond), tr.Run.Message)
	assertNoContainers(t, tr.Run.ID)
}

// 16. Runs in parallel paint distinct colours; no screenshot of one ever
// shows another's.
func TestSecurityConcurrentRunsStayApart(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	colours := []string{"#00ff00", "#ff0000", "#0000ff", "#ffff00"}
	dir := t.TempDir()
	mover, _ := os.ReadFile(testenv.Build(t, "./examples/mover"))
	var suite strings.Builder
	suite.WriteString("tasks:\n")
	for i, c := range colours {
		app := filepath.Join(dir, fmt.Sprintf("app%d", i))
		os.MkdirAll(app, 0o755)
		os.WriteFile(filepath.Join(app, "mover"), mover, 0o755)
		os.WriteFile(filepath.Join(app, "agentbox.json"), []byte(`{"command":"mover","window_title":"mover","ready_output":"mover: ready","args":["-color","`+c+`"]}`), 0o644)
		fmt.Fprintf(&suite, "  - {name: c%d, target: app%d, script: play.yaml}\n", i, i)
	}
	os.WriteFile(filepath.Join(dir, "play.yaml"), []byte("steps:\n  - {action: key_down, key: Right}\n  - {action: wait, ms: 150}\n  - {action: wait, ms: 150}\n  - {action: wait, ms: 150}\n  - {action: key_up, key: Right}\n  - {action: wait, ms: 150}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "suite.yaml"), []byte(suite.String()), 0o644)
	out := filepath.Join(t.TempDir(), "out")
	r := agentbox(t, "eval", filepath.Join(dir, "suite.yaml"), "--parallel", "4", "--out", out)
	if r.code != 0 {
		t.Fatalf("eval:\n%s", r)
	}
	var sum struct {
		RunID string `json:"run_id"`
	}
	data, _ := os.ReadFile(filepath.Join(out, "summary.json"))
	json.Unmarshal(data, &sum)
	for i, c := range colours {
		shots, _ := filepath.Glob(filepath.Join(out, fmt.Sprintf("c%d", i), "001", "screenshots", "*.png"))
		if len(shots) < 3 {
			t.Fatalf("run %d has %d screenshots", i, len(shots))
		}
		own := 0 // the control: the run's own colour is seen
		for _, p := range shots {
			counts := colourCounts(t, p, colours)
			own += counts[c]
			for j, other := range colours {
				if j != i && counts[other] > 0 {
					t.Errorf("run %d (%s): %s shows %d pixels of %s, another run's colour", i, c, filepath.Base(p), counts[other], other)
				}
			}
		}
		if own == 0 {
			t.Errorf("run %d (%s): no screenshot shows its own square", i, c)
		}
	}
	assertNoContainers(t, sum.RunID+"*")
}

func colourCounts(t *testing.T, path string, colours []string) map[string]int {
	img := readPNG(t, path)
	counts := map[string]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			c := fmt.Sprintf("#%02x%02x%02x", r>>8, g>>8, bl>>8)
			for _, want := range colours {
				if c == want {
					counts[c]++
				}
			}
		}
	}
	return counts
}

// 12. A hostile decision-maker: garbage, unknown actions, huge coordinates
// and a megabyte of text are told back and recorded; a burst of actions as
// fast as it can is rate-limited; agentbox never crashes.
func TestSecurityHostileAgent(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	script := filepath.Join(testenv.RepoRoot(), "e2e", "testdata", "hostile_agent.py")
	start := time.Now()
	r := agentbox(t, "run", moverApp(t, ""), "--max-rate", "100", "--max-steps", "3000",
		"--agent", "exec", "--agent-opt", "max_malformed=5", "--", "python3", script, "500")
	took := time.Since(start)
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	tr := openTrace(t, r.dir)
	first := tr.Steps[0]
	rejected, _ := first.Decision.Meta["rejected"].([]any)
	if len(rejected) != 4 {
		t.Errorf("step 1 should record the 4 rejected answers, got %d: %v", len(rejected), first.Decision.Meta)
	}
	var throttled float64
	for _, s := range tr.Steps {
		if s.Result != nil {
			throttled += s.Result.ThrottledMS
		}
	}
	// 500 actions at 100/s with a one-second burst take at least 4 s, and
	// no second holds more than the burst and a second's rate. How much
	// the limiter had to throttle depends on how fast the machine ran the
	// actions by itself: a loaded one (load 39: a 22.6 s loop) may run
	// them slower than the rate and need none, so the bound is asserted,
	// not the throttling (session's TestRateLimiter holds the limiter
	// itself).
	if tr.Run.Timings["loop"] < 4000 {
		t.Errorf("throttled %.0f ms in a %.0f ms loop; 500 actions at --max-rate 100 take at least 4 s: the rate limit did not hold", throttled, tr.Run.Timings["loop"])
	}
	var at []float64
	for _, s := range tr.Steps {
		if s.Result != nil {
			at = append(at, s.TMS)
		}
	}
	for i, j := 0, 0; i < len(at); i++ {
		for at[i]-at[j] >= 1000 {
			j++
		}
		if n := i - j + 1; n > 200 {
			t.Errorf("%d actions within one second ending at %.0f ms; --max-rate 100 allows at most 200 (burst and rate)", n, at[i])
			break
		}
	}
	t.Logf("500 actions at --max-rate 100: loop %.1f s, throttled %.1f s, whole run %v", tr.Run.Timings["loop"]/1000, throttled/1000, took.Round(time.Millisecond))
	assertNoContainers(t, tr.Run.ID)
}
