package netproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/netpolicy"
	"github.com/codegirl-games/agentbox/observe"
)

// events collects what a Server records.
type events struct {
	mu  sync.Mutex
	evs []observe.NetEvent
}

func (e *events) add(ev observe.NetEvent) {
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	e.mu.Unlock()
}

func (e *events) all() []observe.NetEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]observe.NetEvent(nil), e.evs...)
}

// waitFor waits (generously) until an event satisfying f is recorded.
func (e *events) waitFor(t *testing.T, what string, f func(observe.NetEvent) bool) observe.NetEvent {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, ev := range e.all() {
			if f(ev) {
				return ev
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no event %s; recorded: %+v", what, e.all())
	return observe.NetEvent{}
}

// fakeResolver answers from a map, as DNS would.
type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

func rules(t *testing.T, texts ...string) []netpolicy.Rule {
	t.Helper()
	var out []netpolicy.Rule
	for _, s := range texts {
		r, err := netpolicy.ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func start(t *testing.T, p netpolicy.Policy, res Resolver) (*Server, *events) {
	t.Helper()
	evs := &events{}
	dir, err := tempSocketDir(t)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Start(dir, Options{Policy: p, Record: evs.add, Resolver: res})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, evs
}

// tempSocketDir is a short directory: a unix socket's path is at most 107
// bytes, and t.TempDir's can be longer.
func tempSocketDir(t *testing.T) (string, error) {
	dir, err := osMkdirTemp()
	if err != nil {
		return "", err
	}
	t.Cleanup(func() { osRemoveAll(dir) })
	return dir, nil
}

// client speaks to the proxy through its socket, as the guest's relay
// would carry an app's connection.
func client(s *Server) *http.Client {
	sock := filepath.Join(s.Dir(), ProxySocket)
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "127.0.0.1:3128"}),
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", sock)
			},
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
			DisableKeepAlives: true,
		},
	}
}

func serve(t *testing.T, body string) (*httptest.Server, string) {
	t.Helper()
	return serveB(t, body)
}

func serveB(t testing.TB, body string) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Host-Seen", r.Host)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return srv, u.Port()
}

func get(t *testing.T, c *http.Client, u string) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return 0, err.Error(), nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// TestPlainHTTP: exactly the host and port a rule names is reachable, a
// second server is refused, and both are recorded with their bytes.
func TestPlainHTTP(t *testing.T) {
	_, portA := serve(t, "hello from A")
	_, portB := serve(t, "hello from B")
	s, evs := start(t, netpolicy.Policy{Allow: rules(t, "127.0.0.1:"+portA)}, nil)
	c := client(s)

	code, body, _ := get(t, c, "http://127.0.0.1:"+portA+"/x")
	if code != 200 || body != "hello from A" {
		t.Fatalf("allowed server: %d %q", code, body)
	}
	ev := evs.waitFor(t, "allowed GET A", func(e observe.NetEvent) bool { return e.Allowed && e.Dest == "127.0.0.1:"+portA })
	if ev.Kind != "http" || ev.Method != "GET" || ev.Rule != "127.0.0.1:"+portA || ev.Status != 200 || ev.BytesUp == 0 || ev.BytesDown < int64(len("hello from A")) || ev.Addr != "127.0.0.1:"+portA {
		t.Errorf("allowed event: %+v", ev)
	}

	code, body, h := get(t, c, "http://127.0.0.1:"+portB+"/x")
	if code != http.StatusForbidden || strings.Contains(body, "hello from B") || !strings.Contains(h.Get("X-Agentbox-Denied"), "no --allow-net rule") {
		t.Fatalf("second server: %d %q %v", code, body, h)
	}
	ev = evs.waitFor(t, "denied GET B", func(e observe.NetEvent) bool { return !e.Allowed && e.Dest == "127.0.0.1:"+portB })
	if ev.Rule != "" || ev.BytesUp != 0 || ev.BytesDown != 0 || ev.Status != 403 {
		t.Errorf("denied event: %+v", ev)
	}
}

// TestNamesLeadingToSpecialAddresses: a host name rule does not reach an
// address on the host's networks (DNS rebinding), an address rule or a
// pinned name does (positive controls).
func TestNamesLeadingToSpecialAddresses(t *testing.T) {
	_, port := serve(t, "inside")
	res := fakeResolver{
		"rebind.test": {netip.MustParseAddr("127.0.0.1")},
		"meta.test":   {netip.MustParseAddr("169.254.169.254")},
		"mixed.test":  {netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("::1")},
	}
	s, evs := start(t, netpolicy.Policy{
		Allow: rules(t, "rebind.test", "meta.test", "mixed.test", "pinned.test", "*:"+port),
		Hosts: map[string]netip.Addr{"pinned.test": netip.MustParseAddr("127.0.0.1")},
	}, res)
	c := client(s)
	for _, host := range []string{"rebind.test", "meta.test", "mixed.test", "127.0.0.1"} {
		code, body, h := get(t, c, "http://"+host+":"+port+"/")
		if code != http.StatusForbidden || body == "inside" {
			t.Errorf("%s: %d %q", host, code, body)
		}
		if !strings.Contains(h.Get("X-Agentbox-Denied"), "only a rule naming the address may reach") {
			t.Errorf("%s: reason %q", host, h.Get("X-Agentbox-Denied"))
		}
	}
	if code, body, _ := get(t, c, "http://pinned.test:"+port+"/"); code != 200 || body != "inside" {
		t.Errorf("pinned name: %d %q", code, body)
	}
	ev := evs.waitFor(t, "pinned allowed", func(e observe.NetEvent) bool { return e.Allowed })
	if ev.Rule != "pinned.test" || ev.Addr != "127.0.0.1:"+port {
		t.Errorf("pinned event: %+v", ev)
	}
}

// TestConnectAndSNI: a tunnel to an allowed host carries TLS; one whose
// ClientHello names another server is cut before a byte reaches the
// destination; a tunnel to a host no rule names is refused.
func TestConnectAndSNI(t *testing.T) {
	var hits sync.Map
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Store(r.TLS.ServerName, true)
		io.WriteString(w, "secret page")
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	srv.StartTLS()
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	s, evs := start(t, netpolicy.Policy{
		Allow: rules(t, "secure.test:"+port),
		Hosts: map[string]netip.Addr{"secure.test": netip.MustParseAddr("127.0.0.1"), "other.test": netip.MustParseAddr("127.0.0.1")},
	}, nil)
	c := client(s)
	code, body, _ := get(t, c, "https://secure.test:"+port+"/")
	if code != 200 || body != "secret page" {
		t.Fatalf("allowed tunnel: %d %q", code, body)
	}
	ev := evs.waitFor(t, "allowed tunnel", func(e observe.NetEvent) bool { return e.Kind == "connect" && e.Allowed })
	if ev.SNI != "secure.test" || ev.BytesUp == 0 || ev.BytesDown == 0 || ev.Dest != "secure.test:"+port {
		t.Errorf("tunnel event: %+v", ev)
	}

	// Domain fronting: CONNECT names the allowed host, TLS another.
	conn, err := net.Dial("unix", filepath.Join(s.Dir(), ProxySocket))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT secure.test:%s HTTP/1.1\r\nHost: secure.test:%s\r\n\r\n", port, port)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tc := tls.Client(&bufConn{Conn: conn, r: br}, &tls.Config{ServerName: "evil.test", InsecureSkipVerify: true})
	tc.SetDeadline(time.Now().Add(20 * time.Second))
	if err := tc.Handshake(); err == nil {
		t.Fatal("a TLS handshake naming evil.test went through a tunnel to secure.test")
	}
	ev = evs.waitFor(t, "fronting refused", func(e observe.NetEvent) bool { return e.Kind == "connect" && !e.Allowed && e.SNI == "evil.test" })
	if !strings.Contains(ev.Reason, `"evil.test" is not the tunnel's host secure.test`) || ev.BytesUp != 0 {
		t.Errorf("fronting event: %+v", ev)
	}
	if _, ok := hits.Load("evil.test"); ok {
		t.Error("the destination served evil.test")
	}

	code, _, _ = get(t, c, "https://other.test:"+port+"/")
	if code == 200 {
		t.Fatal("a tunnel to other.test went through")
	}
	evs.waitFor(t, "other refused", func(e observe.NetEvent) bool {
		return e.Kind == "connect" && !e.Allowed && e.Dest == "other.test:"+port && strings.Contains(e.Reason, "no --allow-net rule")
	})
}

type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// TestNotProxyRequests: requests that name no destination are refused.
func TestNotProxyRequests(t *testing.T) {
	_, port := serve(t, "x")
	s, evs := start(t, netpolicy.Policy{Allow: rules(t, "127.0.0.1:"+port)}, nil)
	conn, err := net.Dial("unix", filepath.Join(s.Dir(), ProxySocket))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\n", port)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("origin-form request: %v %v", resp, err)
	}
	evs.waitFor(t, "refused", func(e observe.NetEvent) bool { return !e.Allowed && strings.Contains(e.Reason, "not a proxy request") })
}

// TestByteLimit: the run's bytes stop at the cap, the limit is recorded,
// and later connections are refused.
func TestByteLimit(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	_, port := serve(t, big)
	const limit = 64 << 10
	s, evs := start(t, netpolicy.Policy{Allow: rules(t, "127.0.0.1:"+port), MaxBytes: limit}, nil)
	c := client(s)
	_, body, _ := get(t, c, "http://127.0.0.1:"+port+"/")
	if len(body) >= len(big) {
		t.Fatalf("got the whole %d bytes past a %d byte limit", len(body), limit)
	}
	lim := evs.waitFor(t, "the byte limit", func(e observe.NetEvent) bool { return e.Kind == "limit" && strings.Contains(e.Reason, "byte limit") })
	t.Logf("limit: %s", lim.Reason)
	ev := evs.waitFor(t, "the cut request", func(e observe.NetEvent) bool { return e.Kind == "http" && e.Allowed })
	if ev.BytesUp+ev.BytesDown > limit {
		t.Errorf("counted %d bytes past the %d limit: %+v", ev.BytesUp+ev.BytesDown, limit, ev)
	}
	code, _, h := get(t, c, "http://127.0.0.1:"+port+"/")
	if code == 200 || !strings.Contains(h.Get("X-Agentbox-Denied"), "used up") {
		t.Errorf("after the limit: %d %v", code, h)
	}
}

// TestRateLimit: connections beyond the rate are refused, and the limit
// is recorded with a count.
func TestRateLimit(t *testing.T) {
	_, port := serve(t, "x")
	s, evs := start(t, netpolicy.Policy{Allow: rules(t, "127.0.0.1:"+port), MaxConnRate: 2}, nil)
	c := client(s)
	refused := 0
	for i := 0; i < 10; i++ {
		if code, _, _ := get(t, c, "http://127.0.0.1:"+port+"/"); code == http.StatusTooManyRequests {
			refused++
		}
	}
	// Ten requests take far less than the four seconds the rate would
	// allow them in; however slow the machine, most are refused.
	if refused == 0 {
		t.Fatal("no request was refused at 2 per second")
	}
	evs.waitFor(t, "the rate limit", func(e observe.NetEvent) bool {
		return e.Kind == "limit" && strings.Contains(e.Reason, "connection rate limit (2 per second")
	})
}

// TestForward: a host service appears through its socket; its bytes are
// recorded; a forward whose service is down is recorded as such.
func TestForward(t *testing.T) {
	port := testenv.Echo(t).Port
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadPort := dead.Addr().(*net.TCPAddr).Port
	dead.Close()
	fw := func(s string) netpolicy.Forward {
		f, err := netpolicy.ParseForward(s)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	s, evs := start(t, netpolicy.Policy{Forward: []netpolicy.Forward{
		fw("127.0.0.1:" + strconv.Itoa(port) + ":9000"), fw("127.0.0.1:" + strconv.Itoa(deadPort) + ":9001"),
	}}, nil)
	if len(s.Sockets()) != 2 || s.Sockets()[0].SandboxPort != 9000 {
		t.Fatalf("sockets: %+v", s.Sockets())
	}
	c, err := net.Dial("unix", filepath.Join(s.Dir(), ForwardSocket(9000)))
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "ping")
	c.(*net.UnixConn).CloseWrite()
	got, _ := io.ReadAll(c)
	c.Close()
	if string(got) != "ping" {
		t.Fatalf("echo through the forward: %q", got)
	}
	ev := evs.waitFor(t, "the forward", func(e observe.NetEvent) bool { return e.Kind == "forward" && e.Allowed })
	if ev.BytesUp != 4 || ev.BytesDown != 4 || ev.Dest != "127.0.0.1:"+strconv.Itoa(port) {
		t.Errorf("forward event: %+v", ev)
	}
	c, err = net.Dial("unix", filepath.Join(s.Dir(), ForwardSocket(9001)))
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(c)
	c.Close()
	evs.waitFor(t, "the dead forward", func(e observe.NetEvent) bool {
		return e.Kind == "forward" && !e.Allowed && strings.Contains(e.Reason, "does not answer")
	})
}

// TestCloseCutsTunnels: Close ends an open tunnel and records it.
func TestCloseCutsTunnels(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan int, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		buf := make([]byte, 64) // reads, never answers
		n, _ := io.ReadAtLeast(c, buf, len("plain bytes, no TLS"))
		got <- n
		io.Copy(io.Discard, c)
		c.Close()
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	s, evs := start(t, netpolicy.Policy{Allow: rules(t, "127.0.0.1:"+port)}, nil)
	conn, err := net.Dial("unix", filepath.Join(s.Dir(), ProxySocket))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT 127.0.0.1:%s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\n", port, port)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	io.WriteString(conn, "plain bytes, no TLS")
	select {
	case <-got: // through the tunnel; now cut it
	case <-time.After(20 * time.Second):
		t.Fatal("the bytes did not reach the destination")
	}
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return with a tunnel open")
	}
	ev := evs.waitFor(t, "the cut tunnel", func(e observe.NetEvent) bool { return e.Kind == "connect" })
	if !ev.Allowed || ev.BytesUp != int64(len("plain bytes, no TLS")) {
		t.Errorf("tunnel event: %+v", ev)
	}
}
