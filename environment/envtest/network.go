package envtest

import (
	"context"
	"errors"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/envtest/probeout"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/netpolicy"
	"github.com/codegirl-games/agentbox/observe"
)

// Network records the sandbox's connections (environment.NetRecorder).
func (s *sink) Network(ev observe.NetEvent) {
	s.mu.Lock()
	s.net = append(s.net, ev)
	s.mu.Unlock()
	s.poke()
}

func (s *sink) netEvents() []observe.NetEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]observe.NetEvent(nil), s.net...)
}

// netEvent waits for a recorded connection that f accepts.
func (b *box) netEvent(what string, f func(observe.NetEvent) bool) observe.NetEvent {
	b.t.Helper()
	var got observe.NetEvent
	ok := b.sink.waitFor(30*time.Second, func() bool {
		for _, ev := range b.sink.netEvents() {
			if f(ev) {
				got = ev
				return true
			}
		}
		return false
	})
	if !ok {
		b.t.Fatalf("no connection recorded: %s; recorded: %v", what, b.sink.netEvents())
	}
	return got
}

// testServer is an HTTP server on the host's loopback that counts its
// requests: the sandbox must reach it only as the policy says.
type testServer struct {
	port string
	hits atomic.Int64
	srv  *httptest.Server
}

func newTestServer(t *testing.T, body string, tls bool) *testServer {
	t.Helper()
	ts := &testServer{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.hits.Add(1)
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, body)
	}))
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	ts.port, ts.srv = u.Port(), srv
	return ts
}

func mustForward(t *testing.T, s string) netpolicy.Forward {
	t.Helper()
	f, err := netpolicy.ParseForward(s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func mustRule(t *testing.T, s string) netpolicy.Rule {
	t.Helper()
	r, err := netpolicy.ParseRule(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// netProbe runs the probe's network operations in a sandbox with policy p.
func (s *suite) netProbe(t *testing.T, p *netpolicy.Policy, ops ...string) (*box, probeout.Net) {
	t.Helper()
	b := s.newBox(t, func(c *environment.Config) { c.Network = p })
	if _, err := b.staged(s.probeApp(t, append([]string{"net"}, ops...)...), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var n probeout.Net
	b.line(probeout.KindNet, 2*time.Minute, &n)
	t.Logf("proxy %q; results:", n.Proxy)
	for _, op := range ops {
		t.Logf("  %s → %.200s", op, n.Results[op])
	}
	return b, n
}

func (s *suite) testNetwork(t *testing.T) {
	if !environment.CapabilitiesOf(s.o.Backend).Network {
		t.Run("Refused", s.testNetworkRefused)
		return
	}
	t.Run("NoRule", s.testNetworkNoRule)
	t.Run("Allowlist", s.testNetworkAllowlist)
	t.Run("Browser", s.testNetworkBrowser)
}

// testNetworkRefused: a backend that declares no network refuses one.
func (s *suite) testNetworkRefused(t *testing.T) {
	cfg := s.config(t)
	cfg.Network = &netpolicy.Policy{Forward: []netpolicy.Forward{mustForward(t, "127.0.0.1:8080")}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, err := s.o.Backend.Create(ctx, cfg)
	if err == nil {
		env.Close(ctx)
		t.Fatal("a backend without Capabilities.Network created a sandbox with a network")
	}
	if !errors.Is(err, environment.ErrUnavailable) {
		t.Errorf("want ErrUnavailable, got %v", err)
	}
}

// testNetworkNoRule: with a forward and no rule, the forwarded port works
// (the positive control) and nothing else gets out: no proxy, no names,
// no host service the forward does not name.
func (s *suite) testNetworkNoRule(t *testing.T) {
	echo := testenv.Echo(t).Port
	web := newTestServer(t, "must not be reached", false)
	p := &netpolicy.Policy{Forward: []netpolicy.Forward{mustForward(t, "127.0.0.1:"+strconv.Itoa(echo)+":9000")}}
	webURL := "http://web.test:" + web.port + "/"
	b, n := s.netProbe(t, p,
		"echo=127.0.0.1:9000",
		"get="+webURL,
		"rawget=http://127.0.0.1:"+web.port+"/",
		"dial=127.0.0.1:"+strconv.Itoa(netpolicy.ProxyPort),
		"lookup=web.test",
	)
	r := n.Results
	report(t, []check{
		{"the forwarded port answers inside (positive control)", r["echo=127.0.0.1:9000"] == "ping", r["echo=127.0.0.1:9000"]},
		{"no proxy variable without a rule", n.Proxy == "", n.Proxy},
		{"a request by name fails", strings.HasPrefix(r["get="+webURL], "error:"), r["get="+webURL]},
		{"the host's loopback is not the sandbox's", strings.HasPrefix(r["rawget=http://127.0.0.1:"+web.port+"/"], "error:"), r["rawget=http://127.0.0.1:"+web.port+"/"]},
		{"nothing listens at the proxy's port", strings.HasPrefix(r["dial=127.0.0.1:3128"], "error:"), r["dial=127.0.0.1:3128"]},
		{"names do not resolve", strings.HasPrefix(r["lookup=web.test"], "error:"), r["lookup=web.test"]},
		{"the host's web server saw nothing", web.hits.Load() == 0, web.hits.Load()},
	})
	ev := b.netEvent("the forwarded connection", func(e observe.NetEvent) bool { return e.Kind == "forward" })
	if !ev.Allowed || ev.BytesUp != 4 || ev.BytesDown != 4 || ev.Rule != "--forward 127.0.0.1:"+strconv.Itoa(echo)+":9000" {
		t.Errorf("forward event: %+v", ev)
	}
}

// testNetworkAllowlist: with a rule, exactly the allowed host and port are
// reachable through the proxy (HTTP and HTTPS), a second host and another
// port are refused and recorded, and an app that ignores the proxy
// variables gets nothing.
func (s *suite) testNetworkAllowlist(t *testing.T) {
	a := newTestServer(t, "page A", false)
	other := newTestServer(t, "page B", false)
	secure := newTestServer(t, "secure page", true)
	loop := netip.MustParseAddr("127.0.0.1")
	p := &netpolicy.Policy{
		Allow: []netpolicy.Rule{mustRule(t, "allowed.test:"+a.port), mustRule(t, "secure.test:"+secure.port)},
		// The names lead to the test servers on the host's loopback: a
		// pinned name counts as naming the address.
		Hosts: map[string]netip.Addr{"allowed.test": loop, "other.test": loop, "secure.test": loop},
	}
	okURL := "http://allowed.test:" + a.port + "/"
	otherURL := "http://other.test:" + other.port + "/"
	portURL := "http://allowed.test:" + other.port + "/"
	tlsURL := "https://secure.test:" + secure.port + "/"
	rawURL := "http://allowed.test:" + a.port + "/raw"
	b, n := s.netProbe(t, p,
		"get="+okURL, "get="+otherURL, "get="+portURL, "getk="+tlsURL,
		"rawget="+rawURL, "dial=allowed.test:"+a.port, "dial=127.0.0.1:"+a.port,
	)
	r := n.Results
	report(t, []check{
		{"the proxy variable names the sandbox's 127.0.0.1:3128", n.Proxy == "http://127.0.0.1:3128", n.Proxy},
		{"the allowed host answers", r["get="+okURL] == "200 page A", r["get="+okURL]},
		{"HTTPS to an allowed host goes through a tunnel", r["getk="+tlsURL] == "200 secure page", r["getk="+tlsURL]},
		{"a second host is refused", strings.HasPrefix(r["get="+otherURL], "403 ") && strings.Contains(r["get="+otherURL], "no --allow-net rule"), r["get="+otherURL]},
		{"another port of the allowed host is refused", strings.HasPrefix(r["get="+portURL], "403 "), r["get="+portURL]},
		{"ignoring the proxy variables gets nothing", strings.HasPrefix(r["rawget="+rawURL], "error:"), r["rawget="+rawURL]},
		{"dialing the allowed host directly fails", strings.HasPrefix(r["dial=allowed.test:"+a.port], "error:"), r["dial=allowed.test:"+a.port]},
		{"dialing its address directly fails", strings.HasPrefix(r["dial=127.0.0.1:"+a.port], "error:"), r["dial=127.0.0.1:"+a.port]},
		{"the allowed server saw exactly the one request", a.hits.Load() == 1, a.hits.Load()},
		{"the second server saw nothing", other.hits.Load() == 0, other.hits.Load()},
	})
	ev := b.netEvent("the allowed request", func(e observe.NetEvent) bool { return e.Allowed && e.Dest == "allowed.test:"+a.port })
	if ev.Rule != "allowed.test:"+a.port || ev.Status != 200 || ev.BytesDown == 0 {
		t.Errorf("allowed event: %+v", ev)
	}
	b.netEvent("the second host refused", func(e observe.NetEvent) bool { return !e.Allowed && e.Dest == "other.test:"+other.port })
	b.netEvent("the other port refused", func(e observe.NetEvent) bool { return !e.Allowed && e.Dest == "allowed.test:"+other.port })
	b.netEvent("the tunnel", func(e observe.NetEvent) bool {
		return e.Allowed && e.Kind == "connect" && e.SNI == "secure.test" && e.BytesUp > 0 && e.BytesDown > 0
	})
}

// pageColor is the forwarded page's background.
var pageColor = [3]uint8{0x10, 0xc0, 0x60}

// testNetworkBrowser: Chromium in the sandbox opens a page served on the
// host through --forward, and the screenshot shows it.
func (s *suite) testNetworkBrowser(t *testing.T) {
	page := newTestServer(t, `<!doctype html><html><head><title>agentbox forward page</title></head>`+
		`<body style="margin:0;background:#10c060;height:100vh"><h1 style="font:48px sans-serif">forwarded</h1></body></html>`, false)
	p := &netpolicy.Policy{Forward: []netpolicy.Forward{mustForward(t, "127.0.0.1:"+page.port+":8765")}}
	b := s.newBox(t, func(c *environment.Config) {
		c.Network = p
		c.Resources.PIDs = 2048     // Chromium's processes and threads
		c.Resources.MemoryMB = 2048 // and its memory
	})
	m := app.Manifest{Command: "chromium", Args: []string{
		"--no-sandbox", // its own sandbox needs user namespaces, which the sandbox refuses
		"--no-first-run", "--no-default-browser-check", "--disable-gpu", "--disable-dev-shm-usage",
		"--password-store=basic", "--user-data-dir=/tmp/chromium", "--window-position=0,0", "--window-size=640,480",
		"--disable-features=Translate,MediaRouter", "--disable-background-networking", "--disable-component-update",
		"http://127.0.0.1:8765/",
	}, WindowTitle: "agentbox forward page*"}
	_, err := b.env.Launch(b.ctx, environment.LaunchSpec{App: &app.Bundle{Target: "chromium", InImage: true, Manifest: m}, ReadyTimeout: 2 * time.Minute, LogCap: 1 << 20})
	if err != nil && (strings.Contains(err.Error(), "not a program of the image") || strings.Contains(err.Error(), "not in the app directory")) {
		testenv.Require(t, testenv.Condition("Chromium in the sandbox (the test image has it: agentbox image build --test; the local backend: apt-get install chromium)", err))
	}
	if err != nil {
		t.Fatalf("chromium: %v\nstderr: %.3000s", err, b.sink.stderr())
	}
	var f *observe.Frame
	share := 0.0
	ok := b.sink.waitFor(2*time.Minute, func() bool {
		f, _ = b.observe()
		_, _, n := f.Centroid(func(r, g, bl uint8) bool {
			return near(r, pageColor[0]) && near(g, pageColor[1]) && near(bl, pageColor[2])
		})
		share = float64(n) / float64(f.Width*f.Height)
		return share > 0.3
	})
	if dir := os.Getenv("AGENTBOX_TEST_SHOTS"); dir != "" && f != nil {
		if out, err := os.Create(filepath.Join(dir, "browser-"+strings.ReplaceAll(t.Name(), "/", "-")+".png")); err == nil {
			png.Encode(out, f.Image())
			out.Close()
		}
	}
	if !ok {
		t.Fatalf("the page's colour covers %.0f%% of the screen, want most of it\nstderr: %.3000s", 100*share, b.sink.stderr())
	}
	if page.hits.Load() == 0 {
		t.Error("the host's page server saw no request")
	}
	// A forwarded connection is recorded when it ends (with its bytes each
	// way), and Chromium keeps its connection to the page open: the host's
	// server closes it.
	page.srv.CloseClientConnections()
	ev := b.netEvent("the browser's forwarded connection", func(e observe.NetEvent) bool { return e.Kind == "forward" && e.Allowed })
	t.Logf("the page covers %.0f%% of the screen; %s", 100*share, fmt.Sprint(ev))
}

func near(a, b uint8) bool {
	d := int(a) - int(b)
	return d >= -12 && d <= 12
}
