package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/codegirl-games/agentbox/environment/envtest/probeout"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// The sandbox's network (issue 18) attacked from inside. Each test runs
// the real binary with the conformance suite's probe as the app, on both
// backends, and reads what the probe saw (stdout.log) and what agentbox
// recorded (network.jsonl, run.json). Each attack has a positive control
// in the same run: the probe reaches what the policy allows.

// webServer serves / (a short page) and /big (size bytes) on the host's
// loopback and counts requests.
type webServer struct {
	port string
	hits atomic.Int64
}

func newWebServer(t *testing.T, big int) *webServer {
	t.Helper()
	w := &webServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.hits.Add(1)
		if r.URL.Path == "/big" {
			io.CopyN(rw, zeros{}, int64(big))
			return
		}
		io.WriteString(rw, "host page")
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	w.port = u.Port()
	return w
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// netRun runs the probe with ops (and "stay") under a script that waits
// for its report and then checks what it is given; it returns the probe's
// report, the recorded connections and run.json.
func netRun(t *testing.T, backend string, flags []string, checks string, ops ...string) (result, probeout.Net, []observe.NetEvent, trace.Run) {
	t.Helper()
	probe := testenv.Build(t, "./environment/envtest/probe")
	dir := t.TempDir()
	data, _ := os.ReadFile(probe)
	os.WriteFile(filepath.Join(dir, "probe"), data, 0o755)
	args, _ := json.Marshal(append(append([]string{"net"}, ops...), "stay"))
	os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command":"probe","wait_for_window":false,"args":`+string(args)+`}`), 0o644)
	script := writeScript(t, "steps:\n  - {wait_for: log, contains: \"NET \", timeout_ms: 120000}\n"+checks)
	cmd := append([]string{"run", dir, "--script", script, "--backend", backend}, flags...)
	if backend == "docker" || backend == "kubernetes" {
		cmd = append(cmd, "--image", testenv.TestImage)
	}
	r := agentbox(t, cmd...)
	out, _ := os.ReadFile(filepath.Join(r.dir, trace.StdoutFile))
	var n probeout.Net
	if found, err := probeout.Find(string(out), probeout.KindNet, &n); !found || err != nil {
		t.Fatalf("no NET report (%v):\n%s\nstdout.log: %s", err, r, out)
	}
	for _, op := range ops {
		t.Logf("  %s → %.160s", op, n.Results[op])
	}
	var evs []observe.NetEvent
	if f, err := os.Open(filepath.Join(r.dir, trace.NetworkFile)); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var ev observe.NetEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				evs = append(evs, ev)
			}
		}
		f.Close()
	}
	return r, n, evs, openTrace(t, r.dir).Run
}

// netBackends are the backends the network's tests run on: kubernetes
// where a cluster's environment is set (scripts/k8s-cluster.sh env), its
// connections carried over the Pod's attach stream.
var netBackends = []string{"local", "docker", "kubernetes"}

func requireBackend(t *testing.T, backend string) {
	t.Helper()
	switch backend {
	case "local":
		requireLocal(t)
	case "kubernetes":
		requireCluster(t)
	default:
		testenv.Require(t, testenv.Image(testenv.TestImage))
	}
}

// requireCluster skips without a cluster's environment (eval "$(scripts/
// k8s-cluster.sh env)"), and otherwise loads the guest image of the
// test's agentbox on the test image into the cluster, once.
func requireCluster(t *testing.T) {
	t.Helper()
	imp := os.Getenv("AGENTBOX_K8S_IMPORT")
	if imp == "" {
		t.Skip("kubernetes: no cluster (scripts/k8s-cluster.sh up, then eval \"$(scripts/k8s-cluster.sh env)\")")
	}
	testenv.Require(t, testenv.Image(testenv.TestImage))
	clusterOnce.Do(func() {
		bin := testenv.Build(t, "./cmd/agentbox")
		dir, err := os.MkdirTemp("", "abx-e2e-guest-")
		if err != nil {
			clusterErr = err
			return
		}
		defer os.RemoveAll(dir)
		archive := filepath.Join(dir, "guest.tar")
		if out, err := exec.Command(bin, "image", "build", "--guest", "--from", testenv.TestImage, "--save", archive).CombinedOutput(); err != nil {
			clusterErr = fmt.Errorf("agentbox image build --guest: %v\n%s", err, out)
			return
		}
		if out, err := exec.Command("sh", "-c", imp+` "$1"`, "import", archive).CombinedOutput(); err != nil {
			clusterErr = fmt.Errorf("%s: %v\n%s", imp, err, out)
		}
	})
	if clusterErr != nil {
		t.Fatal(clusterErr)
	}
}

var (
	clusterOnce sync.Once
	clusterErr  error
)

// N1–N3. Names that lead into the host's networks (DNS rebinding), the
// same address in other spellings, and the proxy's socket used directly.
// A rule for a host name never reaches a loopback address; a mapped IPv6
// form, 0.0.0.0 or a bare number do not either, nor a tunnel to them;
// talking to the mounted socket instead of the relay meets the same
// policy; the socket directory is read-only. Control: a rule that names
// the address reaches the same server, through the relay and the socket.
func TestSecurityNetRebinding(t *testing.T) {
	for _, backend := range netBackends {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend)
			web := newWebServer(t, 0)  // what the attacks aim at
			ctrl := newWebServer(t, 0) // what the rule naming its address reaches
			p, q := web.port, ctrl.port
			attacks := []string{
				"pget=http://localhost:" + p + "/",
				"pget=https://localhost:" + p + "/",
				"pget=http://[::ffff:127.0.0.1]:" + p + "/",
				"pget=http://0.0.0.0:" + p + "/",
				"pget=http://2130706433:" + p + "/",
				"pget=http://169.254.169.254/latest/meta-data/",
				"sockget=http://localhost:" + p + "/",
				"write=/run/agentbox/net/planted",
			}
			controls := []string{"pget=http://127.0.0.1:" + q + "/control", "sockget=http://127.0.0.1:" + q + "/control-socket"}
			if backend == "kubernetes" {
				// No socket is mounted into a Pod (the guest carries the
				// connections over its stream): using it directly and
				// writing beside it find nothing there.
				controls = controls[:1]
			}
			r, n, evs, run := netRun(t, backend,
				[]string{"--allow-net", "localhost:" + p, "--allow-net", "*:" + p, "--allow-net", "*:80", "--allow-net", "127.0.0.1:" + q},
				"  - {expect: network, denied: localhost}\n  - {expect: network, allowed: \"127.0.0.1:*\"}\n",
				append(attacks, controls...)...)
			if r.code != 0 {
				t.Fatalf("the script failed:\n%s", r)
			}
			for _, op := range attacks {
				got := n.Results[op]
				if strings.HasPrefix(got, "200 ") || got == "written" {
					t.Errorf("%s got through: %q", op, got)
				}
			}
			if backend == "kubernetes" {
				if got := n.Results["write=/run/agentbox/net/planted"]; got == "written" || got == "" {
					t.Errorf("writing where the socket directory would be: %q", got)
				}
			} else if !strings.Contains(n.Results["write=/run/agentbox/net/planted"], "read-only file system") {
				t.Errorf("writing into the socket directory: %q", n.Results["write=/run/agentbox/net/planted"])
			}
			for _, op := range controls {
				if n.Results[op] != "200 host page" {
					t.Errorf("control %s: %q", op, n.Results[op])
				}
			}
			if web.hits.Load() != 0 || ctrl.hits.Load() != int64(len(controls)) {
				t.Errorf("the attacked server saw %d requests, the control server %d (want 0 and %d)", web.hits.Load(), ctrl.hits.Load(), len(controls))
			}
			denied := 0
			for _, ev := range evs {
				if !ev.Allowed {
					denied++
				}
				if ev.Allowed && !strings.HasPrefix(ev.Dest, "127.0.0.1:") {
					t.Errorf("allowed: %v", ev)
				}
			}
			if denied < 6 || run.Network == nil || run.Network.Allowed != len(controls) || run.Network.Denied != denied {
				t.Errorf("recorded %d denied; run.json network %+v", denied, run.Network)
			}
		})
	}
}

// N4–N5. A flood through an allowed host: the run's bytes stop at
// --net-max-bytes (connections cut, new ones refused, the limit in
// run.json), and connections beyond --net-max-rate are refused (the limit
// recorded). Control: a request under the caps, before, goes through
// whole.
func TestSecurityNetFlood(t *testing.T) {
	for _, backend := range netBackends {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend)
			web := newWebServer(t, 8<<20)
			base := "http://127.0.0.1:" + web.port
			_, n, evs, run := netRun(t, backend,
				[]string{"--allow-net", "127.0.0.1:" + web.port, "--net-max-bytes", "256k"}, "",
				"pget="+base+"/first", "pget="+base+"/big", "pget="+base+"/after")
			if n.Results["pget="+base+"/first"] != "200 host page" {
				t.Errorf("control: %q", n.Results["pget="+base+"/first"])
			}
			if !strings.HasPrefix(n.Results["pget="+base+"/after"], "403 ") || !strings.Contains(n.Results["pget="+base+"/after"], "used up") {
				t.Errorf("after the cap: %q", n.Results["pget="+base+"/after"])
			}
			var total int64
			for _, ev := range evs {
				total += ev.BytesUp + ev.BytesDown
			}
			if total > 256<<10 || run.Network == nil || len(run.Network.Limits) == 0 || !strings.Contains(run.Network.Limits[0], "byte limit (262144 bytes") {
				t.Errorf("%d bytes went through a 256 KiB cap; run.json network %+v", total, run.Network)
			}

			_, n, _, run = netRun(t, backend,
				[]string{"--allow-net", "127.0.0.1:" + web.port, "--net-max-rate", "2"}, "",
				"pget="+base+"/first", "pgetn=40,"+base+"/")
			if n.Results["pget="+base+"/first"] != "200 host page" {
				t.Errorf("control: %q", n.Results["pget="+base+"/first"])
			}
			got := n.Results["pgetn=40,"+base+"/"]
			if !strings.Contains(got, "429:") {
				t.Errorf("40 requests at 2 per second: %q, none refused", got)
			}
			rateBit := false
			if run.Network != nil {
				for _, l := range run.Network.Limits {
					rateBit = rateBit || strings.Contains(l, "connection rate limit (2 per second")
				}
			}
			if !rateBit {
				t.Errorf("the rate limit is not in run.json: %+v", run.Network)
			}
			t.Logf("40 requests: %s; the server saw %s", got, strconv.FormatInt(web.hits.Load(), 10))
		})
	}
}

// TestNetUsageErrors: bad rules, forwards, names and limits in flags,
// manifests and suites are usage errors naming what is wrong, before
// anything starts.
func TestNetUsageErrors(t *testing.T) {
	badManifest := stubApp(t, `{"command": "mover", "allow_net": ["https://example.com/"]}`)
	suiteDir := t.TempDir()
	suite := filepath.Join(suiteDir, "suite.yaml")
	os.WriteFile(suite, []byte("tasks:\n  - name: a\n    target: "+stubApp(t, "")+"\n    agent: idle\n    forward: [\"localhost:80\"]\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", stubApp(t, ""), "--agent", "idle", "--allow-net", "*.com"}, `rule "*.com"`},
		{[]string{"run", stubApp(t, ""), "--agent", "idle", "--allow-net", "example.com:0"}, "want 1 to 65535"},
		{[]string{"run", stubApp(t, ""), "--agent", "idle", "--forward", "localhost:8080:80"}, "below 1024"},
		{[]string{"run", stubApp(t, ""), "--agent", "idle", "--forward", "8080"}, "HOST:PORT"},
		{[]string{"run", stubApp(t, ""), "--agent", "idle", "--allow-net", "x.test", "--forward", "localhost:3128"}, "taken by the proxy"},
		{[]string{"run", stubApp(t, ""), "--agent", "idle", "--net-resolve", "x.test"}, "NAME=ADDRESS"},
		{[]string{"run", stubApp(t, ""), "--agent", "idle", "--forward", "localhost:8080", "--net-max-bytes", "lots"}, "--net-max-bytes"},
		{[]string{"run", stubApp(t, ""), "--agent", "idle", "--forward", "localhost:8080", "--net-max-rate", "-1"}, "--net-max-rate"},
		{[]string{"run", badManifest, "--agent", "idle"}, `"allow_net"[0]`},
		{[]string{"eval", suite}, "below 1024"},
	} {
		r := cliMain(t, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: want exit 2 naming %q:\n%s", c.args[2:], c.want, r)
		}
		if _, err := os.Stat(r.dir); err == nil {
			t.Errorf("%v: a trace was made", c.args[2:])
		}
	}
}

// TestSecurityNetHostAddress (issue 22, finding 3): a wildcard rule for a
// port does not reach a service the host runs on 0.0.0.0 through the
// host's own interface address, by a plain request or a CONNECT tunnel;
// the service accepts no connection. Control: a rule naming that
// address reaches a second such service.
func TestSecurityNetHostAddress(t *testing.T) {
	addr := hostInterfaceAddr(t)
	for _, backend := range netBackends {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend)
			web := newAnyAddrServer(t)  // what the attacks aim at
			ctrl := newAnyAddrServer(t) // what the rule naming the address reaches
			attacks := []string{
				"pget=http://" + addr + ":" + web.port + "/",
				"pget=https://" + addr + ":" + web.port + "/",
			}
			control := "pget=http://" + addr + ":" + ctrl.port + "/control"
			r, n, evs, _ := netRun(t, backend,
				[]string{"--allow-net", "*:" + web.port, "--allow-net", addr + ":" + ctrl.port}, "",
				append(attacks, control)...)
			if r.code != 0 {
				t.Fatalf("the run failed:\n%s", r)
			}
			for _, op := range attacks {
				if got := n.Results[op]; strings.HasPrefix(got, "200 ") {
					t.Errorf("%s got through: %q", op, got)
				}
			}
			if got := n.Results[control]; got != "200 host page" {
				t.Errorf("control %s: %q", control, got)
			}
			if web.accepted.Load() != 0 || ctrl.accepted.Load() != 1 {
				t.Errorf("the attacked service accepted %d connections, the control %d (want 0 and 1)", web.accepted.Load(), ctrl.accepted.Load())
			}
			denied := 0
			for _, ev := range evs {
				if !ev.Allowed && ev.Dest == addr+":"+web.port && strings.Contains(ev.Reason, "only a rule naming the address may reach") {
					denied++
				}
			}
			if denied != 2 {
				t.Errorf("recorded %d refusals of %s:%s (want the request and the tunnel): %+v", denied, addr, web.port, evs)
			}
		})
	}
}

// hostInterfaceAddr is an IPv4 address of one of this host's interfaces
// other than loopback, preferring one outside the private ranges (this
// test machine's own is in TEST-NET-1, 192.0.2.0/24).
func hostInterfaceAddr(t *testing.T) string {
	t.Helper()
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var private string
	for _, ia := range ifaddrs {
		ipn, ok := ia.(*net.IPNet)
		if !ok {
			continue
		}
		ip := ipn.IP.To4()
		if ip == nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
			continue
		}
		if !ip.IsPrivate() {
			return ip.String()
		}
		if private == "" {
			private = ip.String()
		}
	}
	if private == "" {
		t.Skipf("this host has no IPv4 address but loopback: %v", ifaddrs)
	}
	return private
}

// anyAddrServer serves "host page" on 0.0.0.0 (every address of the
// host) and counts the connections it accepts.
type anyAddrServer struct {
	port     string
	accepted atomic.Int64
}

func newAnyAddrServer(t *testing.T) *anyAddrServer {
	t.Helper()
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &anyAddrServer{port: strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { io.WriteString(rw, "host page") }),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				w.accepted.Add(1)
			}
		},
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return w
}
