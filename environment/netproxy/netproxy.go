// Package netproxy is the host side of a sandbox's network: the recording
// proxy that is the sandbox's only way out, and the host services it
// forwards in. It runs in agentbox's process, outside the sandbox, and
// listens on unix sockets in one directory that the backend mounts into
// the sandbox; inside, the guest relays 127.0.0.1:PORT to those sockets
// (guest/net.go), so the app sees an ordinary HTTP proxy and ordinary
// local ports.
//
// The proxy is the standard library's: net/http parses every request,
// CONNECT tunnels are hijacked connections, and plain HTTP goes through
// httputil.ReverseProxy with a transport that dials only the address the
// policy approved. Every request, tunnel and forwarded connection is
// checked against the policy (netpolicy), counted against the run's byte
// budget and connection rate, and recorded with its bytes each way.
//
// What the sandbox can make agentbox hold is bounded, since agentbox's
// memory is outside the sandbox's limit: connections open at once
// (Options.MaxOpen), new connections per second (the policy's rate,
// applied as each is accepted, before a byte is read), a request's
// headers (MaxHeaderBytes, within HeaderTimeout), and the bytes held, over
// every connection, that are not yet a request or a response — headers
// being read from the sandbox or from a destination, a tunnel's
// ClientHello being inspected (Options.MaxBuffered). A forward buffers
// nothing beyond its copy buffers (32 KiB each way).
package netproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/codegirl-games/agentbox/internal/plural"
	"github.com/codegirl-games/agentbox/netpolicy"
	"github.com/codegirl-games/agentbox/observe"
)

// Resolver looks names up (net.DefaultResolver in production).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configure a Server.
type Options struct {
	Policy netpolicy.Policy
	// Record receives every connection when it ends (or is refused), and
	// every limit when it first bites; it is called from many goroutines.
	// nil discards.
	Record func(observe.NetEvent)
	// Resolver resolves host names; nil is the system's.
	Resolver Resolver
	// DialTimeout bounds connecting to a destination (default 10s);
	// ResolveTimeout a lookup (default 10s).
	DialTimeout, ResolveTimeout time.Duration
	// MaxOpen bounds the connections open at once from the sandbox
	// (default 256); more are closed as they arrive, recorded as a limit.
	MaxOpen int
	// MaxBuffered bounds the bytes held, over all the sandbox's
	// connections, that are not yet a request or a response: headers
	// being read (from the sandbox, or from a destination) and a tunnel's
	// ClientHello being inspected (default DefaultMaxBuffered). A
	// connection whose bytes would pass it is cut (recorded as a limit).
	MaxBuffered int64
	// HostAddrs lists this host's own addresses, which only a rule naming
	// the address reaches; it is called for each decision, since they
	// change (nil: netpolicy.HostAddrs).
	HostAddrs func() ([]netip.Addr, error)
}

// Bounds on what a sandbox can make the proxy hold.
const (
	// MaxHeaderBytes bounds a request's headers from the sandbox (net/http
	// allows 4 KiB more for the request line) and a response's from a
	// destination.
	MaxHeaderBytes = 32 << 10
	// HeaderTimeout bounds the time a request's headers may take to
	// arrive, from the connection's first byte.
	HeaderTimeout = 10 * time.Second
	// DefaultMaxBuffered is Options.MaxBuffered's default.
	DefaultMaxBuffered = 4 << 20
	// refuseTimeout bounds reading the request of a connection refused at
	// accept (to answer it 429) and writing the answer.
	refuseTimeout = 5 * time.Second
)

// Socket is one listening socket of a Server.
type Socket struct {
	Name string // file name in the directory
	// SandboxPort is where the guest offers it inside the sandbox.
	SandboxPort int
	// Proxy: this is the HTTP proxy (else a --forward).
	Proxy   bool
	Forward netpolicy.Forward
}

// Names of the sockets in a Server's directory.
const (
	ProxySocket = "proxy.sock"
)

// ForwardSocket names the socket of the forward to sandbox port p.
func ForwardSocket(p int) string { return "forward-" + strconv.Itoa(p) + ".sock" }

// Server is one sandbox's proxy and forwards.
type Server struct {
	o       Options
	pol     netpolicy.Policy
	dir     string
	socks   []Socket
	lns     []net.Listener
	httpSrv *http.Server
	rp      *httputil.ReverseProxy
	limiter *rate.Limiter
	left    atomic.Int64 // bytes left in the run's budget
	open    atomic.Int64 // connections open from the sandbox
	// buffered is the bytes held that are not yet a request or a
	// response (Options.MaxBuffered).
	buffered atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // every upstream and hijacked connection, cut on Close or at the byte limit
	closed bool
	wg     sync.WaitGroup // connections being served

	// Refusals by a limit, recorded at most once a second with a count.
	rateLog, openLog, bufLog limitLog
	bytesOnce                sync.Once
}

// limitLog counts the refusals by one limit since it was last recorded.
type limitLog struct {
	hits atomic.Int64
	mu   sync.Mutex
	last time.Time
}

// Start listens in dir (which must exist) on one socket per forward and,
// when the policy has rules, the proxy's socket; sockets are made
// connectable by any user (the directory guards them: make it reachable
// by the sandbox's user only).
func Start(dir string, o Options) (_ *Server, retErr error) {
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	if o.ResolveTimeout <= 0 {
		o.ResolveTimeout = 10 * time.Second
	}
	if o.MaxOpen <= 0 {
		o.MaxOpen = 256
	}
	if o.MaxBuffered <= 0 {
		o.MaxBuffered = DefaultMaxBuffered
	}
	if o.HostAddrs == nil {
		o.HostAddrs = netpolicy.HostAddrs
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.Record == nil {
		o.Record = func(observe.NetEvent) {}
	}
	pol := o.Policy.WithDefaults()
	if err := pol.Validate(); err != nil {
		return nil, err
	}
	s := &Server{o: o, pol: pol, dir: dir, conns: map[net.Conn]struct{}{},
		limiter: rate.NewLimiter(rate.Limit(pol.MaxConnRate), max(1, int(pol.MaxConnRate)))}
	s.left.Store(pol.MaxBytes)
	defer func() {
		if retErr != nil {
			s.Close()
		}
	}()
	listen := func(name string, refuse func(*srvConn)) (net.Listener, error) {
		p := filepath.Join(dir, name)
		ln, err := net.Listen("unix", p)
		if err != nil {
			return nil, fmt.Errorf("netproxy: listen on %s: %w", p, err)
		}
		s.lns = append(s.lns, ln)
		if err := os.Chmod(p, 0o666); err != nil {
			return nil, fmt.Errorf("netproxy: %w", err)
		}
		return &limitListener{Listener: ln, s: s, refuse: refuse, headers: refuse != nil && name == ProxySocket}, nil
	}
	if len(pol.Allow) > 0 {
		ln, err := listen(ProxySocket, s.refuseRequest)
		if err != nil {
			return nil, err
		}
		s.socks = append(s.socks, Socket{Name: ProxySocket, SandboxPort: netpolicy.ProxyPort, Proxy: true})
		s.rp = &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {}, // the absolute URL and Host as asked; no X-Forwarded-*
			Transport: releasing{&http.Transport{
				Proxy:                  nil, // never the host's proxy settings
				DialContext:            s.dialApproved,
				DisableKeepAlives:      true, // one upstream connection per request, counted and recorded alone
				ResponseHeaderTimeout:  2 * time.Minute,
				MaxResponseHeaderBytes: MaxHeaderBytes,
			}},
			ErrorLog:     log.New(io.Discard, "", 0),
			ErrorHandler: s.upstreamError,
		}
		s.httpSrv = &http.Server{
			Handler:           s,
			ReadHeaderTimeout: HeaderTimeout,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    MaxHeaderBytes,
			ErrorLog:          log.New(io.Discard, "", 0),
			ConnContext: func(ctx context.Context, c net.Conn) context.Context {
				return context.WithValue(ctx, connKey{}, c)
			},
			// A connection's bytes count against MaxBuffered while it
			// waits for a request's headers: from accept, and again when
			// it is idle between requests; ServeHTTP stops the count.
			ConnState: func(c net.Conn, st http.ConnState) {
				if sc, ok := c.(*srvConn); ok {
					switch st {
					case http.StateIdle:
						sc.hold.arm()
					case http.StateHijacked, http.StateClosed:
						sc.hold.release()
					}
				}
			},
		}
		go s.httpSrv.Serve(ln)
	}
	for _, f := range pol.Forward {
		ln, err := listen(ForwardSocket(f.SandboxPort), s.refuseForward(f))
		if err != nil {
			return nil, err
		}
		s.socks = append(s.socks, Socket{Name: ForwardSocket(f.SandboxPort), SandboxPort: f.SandboxPort, Forward: f})
		go s.serveForward(ln, f)
	}
	return s, nil
}

// Dir is the directory of the sockets.
func (s *Server) Dir() string { return s.dir }

// Sockets lists the listening sockets.
func (s *Server) Sockets() []Socket { return s.socks }

// Close stops listening, cuts every connection and returns once each has
// been recorded.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	for _, ln := range s.lns {
		ln.Close()
	}
	if s.httpSrv != nil {
		s.httpSrv.Close()
	}
	s.wg.Wait()
	return nil
}

// track adds a connection to those cut on Close; false when closed.
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// begin is the start of one connection's service; false when closed.
func (s *Server) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// limitListener applies, as each connection arrives and before a byte of
// it is read, the cap on connections open at once (beyond it a
// connection is closed) and the connection rate (beyond it a connection
// is handed to refuse, which answers it).
type limitListener struct {
	net.Listener
	s      *Server
	refuse func(*srvConn)
	// headers: the connection's first bytes are a request's headers,
	// counted against MaxBuffered until parsed.
	headers bool
}

func (l *limitListener) Accept() (net.Conn, error) {
	s := l.s
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if s.open.Add(1) > int64(s.o.MaxOpen) {
			s.open.Add(-1)
			c.Close()
			s.limitHit(&s.openLog, func(n int) string {
				return fmt.Sprintf("more than %d connections open at once: %s refused", s.o.MaxOpen, plural.S(n, "connection"))
			})
			continue
		}
		sc := &srvConn{Conn: c, s: s}
		sc.hold.s = s
		if !s.limiter.Allow() {
			s.rateRefused()
			if !s.begin() {
				sc.Close()
				continue
			}
			go func() {
				defer s.wg.Done()
				defer sc.Close()
				if !s.track(sc) {
					return
				}
				defer s.untrack(sc)
				l.refuse(sc)
			}()
			continue
		}
		sc.paid.Store(true)
		if l.headers {
			sc.hold.arm()
		}
		return sc, nil
	}
}

// srvConn is a connection from the sandbox: it counts itself out of the
// open connections once closed, and its bytes against MaxBuffered while
// they are headers not yet parsed.
type srvConn struct {
	net.Conn
	s    *Server
	once sync.Once
	// paid: the rate was applied to it at accept, which covers its first
	// request; later requests on it are counted as they come.
	paid atomic.Bool
	hold hold
}

func (c *srvConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		if herr := c.hold.charge(n); herr != nil {
			return 0, herr
		}
	}
	return n, err
}

func (c *srvConn) Close() error {
	c.once.Do(func() {
		c.hold.release()
		c.s.open.Add(-1)
	})
	return c.Conn.Close()
}

type connKey struct{}

// errBuffered ends a connection whose bytes would pass MaxBuffered.
var errBuffered = errors.New("the sandbox's network holds too many unparsed bytes (headers being read)")

// hold counts one connection's bytes against the Server's MaxBuffered
// while armed; release gives them back.
type hold struct {
	s  *Server
	mu sync.Mutex
	on bool
	n  int64
}

func (h *hold) arm() {
	h.mu.Lock()
	h.on = true
	h.mu.Unlock()
}

// charge counts k more bytes, or refuses them (errBuffered, recorded)
// when they would pass the budget.
func (h *hold) charge(k int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.on || h.s == nil {
		return nil
	}
	if h.s.buffered.Add(int64(k)) > h.s.o.MaxBuffered {
		h.s.buffered.Add(-int64(k))
		h.s.limitHit(&h.s.bufLog, func(n int) string {
			return fmt.Sprintf("more than %d bytes held unparsed (headers being read) over the sandbox's connections: %s cut", h.s.o.MaxBuffered, plural.S(n, "connection"))
		})
		return errBuffered
	}
	h.n += int64(k)
	return nil
}

func (h *hold) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.on = false
	if h.s != nil {
		h.s.buffered.Add(-h.n)
	}
	h.n = 0
}

func (s *Server) record(ev observe.NetEvent) { s.o.Record(ev) }

// admit applies the byte budget and, unless paid (the connection's rate
// was applied at accept), the connection rate: it returns why a request
// is refused and the HTTP status that says so, or "".
func (s *Server) admit(paid bool) (string, int) {
	if s.left.Load() <= 0 {
		return fmt.Sprintf("the run's byte limit (%d bytes, --net-max-bytes) is used up", s.pol.MaxBytes), http.StatusForbidden
	}
	if paid || s.limiter.Allow() {
		return "", 0
	}
	return s.rateRefused(), http.StatusTooManyRequests
}

// rateRefused counts one refusal by the rate (recorded, at most once a
// second, as a limit event with the count) and says why.
func (s *Server) rateRefused() string {
	r := strconv.FormatFloat(s.pol.MaxConnRate, 'f', -1, 64)
	s.limitHit(&s.rateLog, func(n int) string {
		return fmt.Sprintf("connection rate limit (%s per second, --net-max-rate) refused %s", r, plural.S(n, "connection"))
	})
	return fmt.Sprintf("over the connection rate limit (%s per second)", r)
}

// limitHit counts one refusal by a limit and records the count as a limit
// event, at most once a second per limit.
func (s *Server) limitHit(l *limitLog, reason func(n int) string) {
	n := l.hits.Add(1)
	l.mu.Lock()
	if time.Since(l.last) < time.Second {
		l.mu.Unlock()
		return
	}
	l.last = time.Now()
	l.hits.Add(-n)
	l.mu.Unlock()
	s.record(observe.NetEvent{Time: time.Now(), Kind: "limit", Reason: reason(int(n))})
}

// refuseRequest answers a proxy connection that came over the rate: it
// reads the request's headers (bounded like any), answers 429 and closes;
// the refusal is recorded with the destination asked for.
func (s *Server) refuseRequest(c *srvConn) {
	why := fmt.Sprintf("over the connection rate limit (%s per second)", strconv.FormatFloat(s.pol.MaxConnRate, 'f', -1, 64))
	_ = c.SetReadDeadline(time.Now().Add(refuseTimeout))
	c.hold.arm()
	req, err := http.ReadRequest(bufio.NewReader(io.LimitReader(c, MaxHeaderBytes+4096)))
	c.hold.release()
	_ = c.SetDeadline(time.Now().Add(refuseTimeout))
	body := "agentbox: network access denied: " + why + "\n"
	fmt.Fprintf(c, "HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain; charset=utf-8\r\nX-Agentbox-Denied: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", why, len(body), body)
	closeWrite(c.Conn)
	if err != nil {
		return // not a request: nothing to record (the limit is)
	}
	ev := observe.NetEvent{Time: time.Now(), Kind: "http", Method: req.Method, Dest: req.Host, Reason: why, Status: http.StatusTooManyRequests}
	defPort := 80
	if req.Method == http.MethodConnect {
		ev.Kind, defPort = "connect", 0
	} else if req.URL.Host != "" {
		ev.Dest = req.URL.Host
	}
	if t, err := netpolicy.ParseTarget(ev.Dest, defPort); err == nil {
		ev.Dest = t.String()
	}
	s.record(ev)
	// What the client still sends (a body) is read, so that closing does
	// not reset the connection before it has read the answer.
	_, _ = io.Copy(io.Discard, io.LimitReader(c.Conn, 64<<10))
}

// refuseForward closes a forwarded connection that came over the rate,
// recorded.
func (s *Server) refuseForward(f netpolicy.Forward) func(*srvConn) {
	return func(*srvConn) {
		s.record(observe.NetEvent{Time: time.Now(), Kind: "forward", Dest: f.Target(), Rule: "--forward " + f.Text,
			Reason: fmt.Sprintf("over the connection rate limit (%s per second)", strconv.FormatFloat(s.pol.MaxConnRate, 'f', -1, 64))})
	}
}

// take reserves up to n bytes of the run's budget and returns how many it
// got; fewer than n means the budget is used up, which cuts every
// connection (recorded once).
func (s *Server) take(n int) int {
	for {
		left := s.left.Load()
		k := min(int64(n), max(left, 0))
		if s.left.CompareAndSwap(left, left-k) {
			if k < int64(n) {
				s.exhausted()
			}
			return int(k)
		}
	}
}

func (s *Server) exhausted() {
	s.bytesOnce.Do(func() {
		s.mu.Lock()
		n := len(s.conns)
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.record(observe.NetEvent{Time: time.Now(), Kind: "limit",
			Reason: fmt.Sprintf("the run's byte limit (%d bytes, --net-max-bytes) was reached: %s cut, new ones refused", s.pol.MaxBytes, plural.S(n, "connection"))})
	})
}

// errByteLimit ends a connection that reached the run's byte budget.
var errByteLimit = errors.New("the run's network byte limit was reached")

// meteredConn counts a destination connection's bytes against the budget:
// Write is the sandbox's bytes going up, Read the destination's coming
// down.
type meteredConn struct {
	net.Conn
	s        *Server
	up, down atomic.Int64
	cut      atomic.Bool // the byte limit ended it
	// hold counts what is read against MaxBuffered while the response's
	// headers are awaited (a plain request's; releasing ends it).
	hold hold
}

func (c *meteredConn) Write(p []byte) (int, error) {
	k := c.s.take(len(p))
	// Counted before the write: the answer can arrive, and the request be
	// recorded, before Write returns (the transport writes from its own
	// goroutine); what was not written is taken back.
	c.up.Add(int64(k))
	n, err := c.Conn.Write(p[:k])
	c.up.Add(int64(n - k))
	if err == nil && k < len(p) {
		c.cut.Store(true)
		err = errByteLimit
	}
	return n, err
}

func (c *meteredConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		if herr := c.hold.charge(n); herr != nil {
			return 0, herr
		}
		k := c.s.take(n)
		c.down.Add(int64(k))
		if k < n {
			c.cut.Store(true)
			return k, errByteLimit
		}
	}
	return n, err
}

// decision is what the policy says about one destination.
type decision struct {
	target netpolicy.Target
	rule   string
	addrs  []netip.Addr
	reason string // why not, when addrs is empty
}

// decide matches t against the rules and resolves it, keeping only the
// addresses it may reach: a special address (loopback, private,
// link-local, documentation, …) or one of this host's own (read now) only
// when the rule names it or --net-resolve pinned the name to it.
func (s *Server) decide(ctx context.Context, t netpolicy.Target) decision {
	d := decision{target: t}
	r, ok := s.pol.Match(t)
	if !ok {
		d.reason = "no --allow-net rule matches " + t.String()
		return d
	}
	d.rule = r.Text
	var cands []netip.Addr
	pinned := false
	switch {
	case t.Addr.IsValid():
		cands = []netip.Addr{t.Addr}
	case s.pol.Hosts[t.Host].IsValid():
		cands, pinned = []netip.Addr{s.pol.Hosts[t.Host]}, true
	default:
		lctx, cancel := context.WithTimeout(ctx, s.o.ResolveTimeout)
		addrs, err := s.o.Resolver.LookupNetIP(lctx, "ip", t.Host)
		cancel()
		if err != nil || len(addrs) == 0 {
			d.reason = fmt.Sprintf("cannot resolve %s: %v", t.Host, err)
			return d
		}
		cands = addrs
	}
	var host []netip.Addr
	if !pinned {
		var err error
		if host, err = s.o.HostAddrs(); err != nil {
			d.reason = "cannot tell this host's own addresses, which a rule must name to reach: " + err.Error()
			return d
		}
	}
	var refused []string
	for _, a := range cands {
		a = a.Unmap()
		if why := r.Refuses(a, host); why != "" && !pinned {
			refused = append(refused, a.String()+" ("+why+")")
			continue
		}
		d.addrs = append(d.addrs, a)
	}
	if len(d.addrs) == 0 {
		d.reason = fmt.Sprintf("%s leads to %s, which only a rule naming the address may reach", t.String(), strings.Join(refused, ", "))
	}
	return d
}

// dial connects to the first approved address that answers.
func (s *Server) dial(ctx context.Context, d decision) (*meteredConn, string, error) {
	dl := net.Dialer{Timeout: s.o.DialTimeout}
	var errs []error
	for _, a := range d.addrs {
		addr := netip.AddrPortFrom(a, uint16(d.target.Port)).String()
		c, err := dl.DialContext(ctx, "tcp", addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		mc := &meteredConn{Conn: c, s: s}
		mc.hold.s = s
		if !s.track(mc) {
			c.Close()
			return nil, addr, errors.New("the sandbox's network is closing")
		}
		return mc, addr, nil
	}
	return nil, "", fmt.Errorf("cannot connect to %s: %w", d.target, errors.Join(errs...))
}

// ServeHTTP implements http.Handler: the proxy.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.begin() {
		http.Error(w, "agentbox: the sandbox's network is closing", http.StatusServiceUnavailable)
		return
	}
	defer s.wg.Done()
	// The headers are parsed: they no longer count as held, and the
	// connection's first request was paid for at accept.
	paid := false
	if sc, ok := r.Context().Value(connKey{}).(*srvConn); ok {
		sc.hold.release()
		paid = sc.paid.Swap(false)
	}
	if r.Method == http.MethodConnect {
		s.connect(w, r, paid)
		return
	}
	s.plain(w, r, paid)
}

// deny answers a refused request and records it.
func (s *Server) deny(w http.ResponseWriter, ev observe.NetEvent, status int) {
	ev.Allowed, ev.Status = false, status
	w.Header().Set("X-Agentbox-Denied", ev.Reason)
	http.Error(w, "agentbox: network access denied: "+ev.Reason, status)
	s.record(ev)
}

type stateKey struct{}

// reqState carries a plain request's decision to the transport's dialer
// and the connection it made back.
type reqState struct {
	d    decision
	mu   sync.Mutex
	addr string
	conn *meteredConn
}

func (st *reqState) set(addr string, c *meteredConn) {
	st.mu.Lock()
	st.addr, st.conn = addr, c
	st.mu.Unlock()
}

func (st *reqState) get() (string, *meteredConn) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.addr, st.conn
}

// releasing is the proxy's transport: once a response's headers are read
// (or the round trip failed), its connection's bytes stop counting
// against MaxBuffered.
type releasing struct{ http.RoundTripper }

func (t releasing) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.RoundTripper.RoundTrip(r)
	if st, ok := r.Context().Value(stateKey{}).(*reqState); ok {
		if _, c := st.get(); c != nil {
			c.hold.release()
		}
	}
	return resp, err
}

// plain serves an HTTP request in absolute form (GET http://host/…).
func (s *Server) plain(w http.ResponseWriter, r *http.Request, paid bool) {
	ev := observe.NetEvent{Time: time.Now(), Kind: "http", Method: r.Method, Dest: r.Host}
	if r.URL.Scheme != "http" || r.URL.Host == "" {
		ev.Reason = "not a proxy request (want an absolute http:// URL, or CONNECT for https)"
		s.deny(w, ev, http.StatusBadRequest)
		return
	}
	_, d, ok := s.admitTarget(w, r, &ev, r.URL.Host, 80, paid)
	if !ok {
		return
	}
	st := &reqState{d: d}
	sw := &statusWriter{ResponseWriter: w}
	// Recorded also when ReverseProxy aborts the response half-way (it
	// panics with http.ErrAbortHandler, which the server expects).
	defer func() {
		addr, conn := st.get()
		ev.Allowed, ev.Status, ev.Addr = true, sw.status, addr
		if conn != nil {
			ev.BytesUp, ev.BytesDown = conn.up.Load(), conn.down.Load()
			if conn.cut.Load() {
				ev.Reason = errByteLimit.Error()
			}
			conn.hold.release()
			conn.Close()
			s.untrack(conn)
		}
		if sw.err != "" {
			ev.Reason = sw.err
		}
		ev.DurationMS = msSince(ev.Time)
		s.record(ev)
	}()
	s.rp.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), stateKey{}, st)))
}

// dialApproved is the transport's dialer: it connects only to what the
// request's decision approved, whatever address the transport asks for.
func (s *Server) dialApproved(ctx context.Context, _, _ string) (net.Conn, error) {
	st, ok := ctx.Value(stateKey{}).(*reqState)
	if !ok {
		return nil, errors.New("netproxy: a request without a decision")
	}
	c, addr, err := s.dial(ctx, st.d)
	if err != nil {
		return nil, err
	}
	c.hold.arm() // the response's headers, until the round trip returns
	st.set(addr, c)
	return c, nil
}

func (s *Server) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if sw, ok := w.(*statusWriter); ok {
		sw.err = err.Error()
		switch {
		case errors.Is(err, errByteLimit):
			sw.err = errByteLimit.Error()
		case errors.Is(err, errBuffered):
			sw.err = errBuffered.Error()
		}
	}
	w.Header().Set("X-Agentbox-Error", "upstream")
	w.WriteHeader(http.StatusBadGateway)
}

// statusWriter remembers the status the proxy answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
	err    string
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// admitTarget checks a request's destination (host[:port], defPort when
// it has none) against the rate and the policy and resolves it; a refusal
// is answered and recorded (ev) here, and ok is false. t is the parsed
// destination; paid: the rate was applied at accept.
func (s *Server) admitTarget(w http.ResponseWriter, r *http.Request, ev *observe.NetEvent, hostport string, defPort int, paid bool) (t netpolicy.Target, d decision, ok bool) {
	t, err := netpolicy.ParseTarget(hostport, defPort)
	if err != nil {
		ev.Reason = err.Error()
		s.deny(w, *ev, http.StatusBadRequest)
		return t, d, false
	}
	ev.Dest = t.String()
	if why, status := s.admit(paid); why != "" {
		ev.Reason = why
		s.deny(w, *ev, status)
		return t, d, false
	}
	d = s.decide(r.Context(), t)
	ev.Rule = d.rule
	if len(d.addrs) == 0 {
		ev.Reason = d.reason
		s.deny(w, *ev, http.StatusForbidden)
		return t, d, false
	}
	return t, d, true
}

// connect serves a CONNECT tunnel: the authority is checked and resolved
// like a plain request's host; once the tunnel is up, a TLS ClientHello's
// server name must be that host.
func (s *Server) connect(w http.ResponseWriter, r *http.Request, paid bool) {
	ev := observe.NetEvent{Time: time.Now(), Kind: "connect", Method: http.MethodConnect, Dest: r.Host}
	t, d, ok := s.admitTarget(w, r, &ev, r.Host, 0, paid)
	if !ok {
		return
	}
	up, addr, err := s.dial(r.Context(), d)
	if err != nil {
		ev.Reason = err.Error()
		s.deny(w, ev, http.StatusBadGateway)
		return
	}
	ev.Addr = addr
	defer func() {
		up.Close()
		s.untrack(up)
		ev.BytesUp, ev.BytesDown = up.up.Load(), up.down.Load()
		ev.DurationMS = msSince(ev.Time)
		s.record(ev)
	}()
	hj, ok := w.(http.Hijacker)
	if !ok {
		ev.Reason = "cannot take over the connection"
		http.Error(w, "agentbox: "+ev.Reason, http.StatusInternalServerError)
		return
	}
	client, brw, err := hj.Hijack()
	if err != nil {
		ev.Reason = "cannot take over the connection: " + err.Error()
		return
	}
	defer client.Close()
	if !s.track(client) {
		return
	}
	defer s.untrack(client)
	_ = client.SetDeadline(time.Time{})
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		ev.Reason = err.Error()
		return
	}
	ev.Allowed = true
	from := &sniCheck{r: brw.Reader, client: client, host: t.Host, hold: hold{s: s}}
	defer from.hold.release()
	ev.Reason = relay(client, from, up)
	ev.SNI = from.sni
	if from.refused != "" {
		ev.Allowed, ev.Reason = false, from.refused
	}
}

// sniCheck reads the sandbox's side of a tunnel; when its first bytes are
// a TLS ClientHello (record type 22), the server name it asks for must be
// the tunnel's host. The ClientHello is read by crypto/tls itself, from a
// copy of the bytes, which then go on unchanged.
type sniCheck struct {
	r       *bufio.Reader
	client  net.Conn
	host    string // "" for an address: any server name
	started bool
	pending []byte
	sni     string
	refused string
	// hold counts the ClientHello's bytes against MaxBuffered until
	// they have gone on.
	hold hold
}

// errSNI ends a tunnel whose ClientHello names another server.
var errSNI = errors.New("TLS server name does not match the tunnel's host")

func (c *sniCheck) Read(p []byte) (int, error) {
	if !c.started {
		c.started = true
		first, err := c.r.Peek(1)
		if err != nil {
			return 0, err
		}
		if first[0] == 22 {
			if err := c.inspect(); err != nil {
				return 0, err
			}
		}
	}
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		if len(c.pending) == 0 {
			c.pending = nil
			c.hold.release()
		}
		return n, nil
	}
	return c.r.Read(p)
}

// inspect reads the ClientHello through crypto/tls, keeping every byte it
// consumed for the destination.
func (c *sniCheck) inspect() error {
	seen := &heldBytes{h: &c.hold}
	c.hold.arm()
	rec := &recordingConn{r: io.TeeReader(c.r, seen), Conn: c.client}
	var hello *tls.ClientHelloInfo
	errGot := errors.New("got the hello")
	_ = c.client.SetReadDeadline(time.Now().Add(30 * time.Second))
	err := tls.Server(rec, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		hello = h
		return nil, errGot
	}}).Handshake()
	_ = c.client.SetReadDeadline(time.Time{})
	c.pending = seen.b
	if len(c.pending) == 0 {
		c.hold.release()
	}
	if hello == nil {
		c.refused = "the tunnel began with a TLS record that is not a ClientHello crypto/tls reads: " + err.Error()
		return errSNI
	}
	c.sni = hello.ServerName
	if c.host != "" && c.sni != "" && !strings.EqualFold(strings.TrimSuffix(c.sni, "."), c.host) {
		c.refused = fmt.Sprintf("the TLS server name %q is not the tunnel's host %s", c.sni, c.host)
		return errSNI
	}
	return nil
}

// recordingConn is the net.Conn crypto/tls reads the ClientHello from: it
// reads the copy and writes nothing (an alert is dropped).
type recordingConn struct {
	net.Conn
	r io.Reader
}

func (c *recordingConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *recordingConn) Write(p []byte) (int, error) { return len(p), nil }

// heldBytes keeps what is written, counted against MaxBuffered.
type heldBytes struct {
	h *hold
	b []byte
}

func (w *heldBytes) Write(p []byte) (int, error) {
	if err := w.h.charge(len(p)); err != nil {
		return 0, err
	}
	w.b = append(w.b, p...)
	return len(p), nil
}

// relay copies both ways between the sandbox's connection (reading from
// from) and the destination until both directions end; an error in one
// ends both. It returns why it ended early, or "".
func relay(client net.Conn, from io.Reader, up *meteredConn) string {
	type result struct {
		up  bool
		err error
	}
	done := make(chan result, 2)
	go func() {
		_, err := io.Copy(up, from)
		done <- result{true, err}
	}()
	go func() {
		_, err := io.Copy(client, up)
		done <- result{false, err}
	}()
	var why string
	for i := 0; i < 2; i++ {
		r := <-done
		if r.err == nil {
			// EOF: pass the half-close on.
			if r.up {
				closeWrite(up.Conn)
			} else {
				closeWrite(client)
			}
			continue
		}
		if why == "" && !errors.Is(r.err, net.ErrClosed) {
			why = r.err.Error()
			if errors.Is(r.err, errByteLimit) {
				why = errByteLimit.Error()
			}
		}
		client.Close()
		up.Close()
	}
	return why
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	c.Close()
}

// serveForward accepts the sandbox's connections to one forward and
// relays each to the host service.
func (s *Server) serveForward(ln net.Listener, f netpolicy.Forward) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if !s.begin() {
			c.Close()
			return
		}
		go func() {
			defer s.wg.Done()
			defer c.Close()
			ev := observe.NetEvent{Time: time.Now(), Kind: "forward", Dest: f.Target(), Rule: "--forward " + f.Text}
			if why, _ := s.admit(true); why != "" { // the rate was applied at accept
				ev.Reason = why
				s.record(ev)
				return
			}
			if !s.track(c) {
				return
			}
			defer s.untrack(c)
			dl := net.Dialer{Timeout: s.o.DialTimeout}
			raw, err := dl.Dial("tcp", f.Target())
			if err != nil {
				ev.Reason = "the host service does not answer: " + err.Error()
				s.record(ev)
				return
			}
			up := &meteredConn{Conn: raw, s: s}
			if !s.track(up) {
				raw.Close()
				return
			}
			ev.Allowed, ev.Addr = true, raw.RemoteAddr().String()
			ev.Reason = relay(c, c, up)
			up.Close()
			s.untrack(up)
			ev.BytesUp, ev.BytesDown = up.up.Load(), up.down.Load()
			ev.DurationMS = msSince(ev.Time)
			s.record(ev)
		}()
	}
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }
