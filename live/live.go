// Package live is the live page: a browser watches runs as they happen
// and a person takes control of one. agentbox run --live serves one run,
// eval --live a grid of its episodes, serve --live every environment's
// episodes; each episode is a View of a session.Session.
//
// A view's screen is looked at (session.Peek: nothing recorded) only
// while someone watches, and pushed over a WebSocket only when it
// changed: the rectangle that changed, as PNG, drawn onto a canvas. The
// session's events (steps, results, output, windows, takeover, end) go
// to the page as they happen, from an EventLog each connection reads at
// its own pace. A viewer with the control token may take control: the
// session pauses its controller (session.TakeOver) and the page's
// keyboard and mouse become actions of the standard vocabulary, parsed
// strictly and performed with the actor human through session.Act, so
// they are validated, rate-limited and recorded exactly like an agent's.
// One viewer holds control at a time (a lease renewed by the page while
// it is open); the others watch.
//
// Defences (SECURITY.md, "The live page"): loopback only; a random token
// in the printed URL, moved on first load into an HttpOnly,
// SameSite=Strict cookie (named for the port) and removed from the
// address; Host must be a loopback address or localhost (DNS
// rebinding) and Origin, when sent, the page's own; a read-only token
// for viewers who may never send input; a Content-Security-Policy that
// runs only the page's own script and style (by hash) and connects only
// to itself; the tokens die with the process, and closing the server
// ends every page's session.
package live

import (
	"context"
	_ "embed" // the page's script and style
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/codegirl-games/agentbox/internal/connlimit"
	"github.com/codegirl-games/agentbox/internal/webguard"
	"github.com/codegirl-games/agentbox/report"
)

//go:embed assets/live.js
var liveJS string

//go:embed assets/live.css
var liveCSS string

// The page's inline style and script exactly as written into it, and the
// policy that allows those two and nothing else: no other script (no
// 'unsafe-inline': no injected element or handler runs), no image or
// font from anywhere, connections only to the page's own origin (its
// WebSocket).
var (
	inlineStyle  = "\n" + liveCSS
	inlineScript = "\n" + report.DrawScript + liveJS
	// CSP is the live page's Content-Security-Policy.
	CSP = "default-src 'none'; style-src " + webguard.SourceHash(inlineStyle) + "; script-src " + webguard.SourceHash(inlineScript) +
		"; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

// Options configure a Server.
type Options struct {
	// Title names what is watched, in the pages' headings
	// ("agentbox run mover").
	Title string
	// Grid makes the first page a grid of every view (eval, serve);
	// without it the first page is the first view (run).
	Grid bool
	// FrameInterval is how often a watched screen is looked at at most
	// (default 20 ms); ThumbInterval how often the grid's thumbnails are
	// (default 1 s).
	FrameInterval time.Duration
	ThumbInterval time.Duration
	// Backstop is how long a watched screen goes without a look where the
	// sandbox tells when it changes (environment.ScreenWatcher: the page
	// looks on each change, FrameInterval apart at most as often, and
	// after Backstop without one; default 1 s).
	Backstop time.Duration
	// Budget is the share of the time a view's looks at a watched screen
	// may take (default 0.1): a look that takes longer (a changed screen
	// is sent whole by the sandbox and decoded here) spaces the next ones
	// out, so watching costs about this much of a core whatever the app
	// draws, and less on a busy machine, where looks take longer.
	Budget float64
	// Lease is how long the page of the viewer in control may stay silent
	// (it speaks every 5 s while open) before control is handed back
	// (default 15 s).
	Lease time.Duration
	// MaxEnded bounds the ended views kept for the grid (default 200).
	MaxEnded int
	// Log receives a line per viewer, takeover and hand-back; nil discards.
	Log io.Writer
}

func (o *Options) defaults() {
	if o.FrameInterval <= 0 {
		o.FrameInterval = 20 * time.Millisecond
	}
	if o.ThumbInterval <= 0 {
		o.ThumbInterval = time.Second
	}
	if o.Backstop <= 0 {
		o.Backstop = time.Second
	}
	if o.Budget <= 0 || o.Budget > 1 {
		o.Budget = 0.1
	}
	if o.Lease <= 0 {
		o.Lease = 15 * time.Second
	}
	if o.MaxEnded <= 0 {
		o.MaxEnded = 200
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Title == "" {
		o.Title = "agentbox"
	}
}

// Roles of a viewer, by the token it came with.
const (
	RoleControl = "control" // may take control
	RoleView    = "view"    // watches only
)

// Server serves the live pages of its views.
type Server struct {
	o       Options
	control string // the tokens: control, and read-only
	view    string
	cookie  string // the cookie's name (per port: cookies do not tell ports apart)
	handler http.Handler

	base   context.Context
	cancel context.CancelFunc

	logMu sync.Mutex

	mu      sync.Mutex
	http    *http.Server
	addr    string
	views   map[string]*View
	order   []*View
	nextID  int
	viewers int // viewers named so far
	grids   int // open grid pages
	conns   map[*conn]struct{}
	closed  bool
	changed chan struct{} // closed and replaced when the list of views changes
	wg      sync.WaitGroup
}

// New makes a server with fresh random tokens.
func New(o Options) *Server {
	o.defaults()
	s := &Server{o: o, control: webguard.Token(), view: webguard.Token(), views: map[string]*View{},
		conns: map[*conn]struct{}{}, changed: make(chan struct{}), cookie: "agentbox_live"}
	s.base, s.cancel = context.WithCancel(context.Background())
	s.handler = s.routes()
	return s
}

// Listen starts serving on addr (host:port; port 0 picks one), which must
// be a loopback address: the page shows the app and takes input, and the
// token would travel in the clear. Watch from another machine through an
// SSH tunnel (ssh -L).
func (s *Server) Listen(addr string) error {
	ln, err := webguard.Listen("live", addr)
	if err != nil {
		return err
	}
	s.Serve(ln)
	return nil
}

// maxConns bounds the page's open connections, maxConnsPerHost those
// from one address (a browser opens a few per page): beyond them a
// connection is closed as soon as it is accepted, so a flood of
// connections holds a bounded amount of memory and a client at another
// address is served meanwhile.
const (
	maxConns        = 256
	maxConnsPerHost = 64
)

// Serve serves on a listener the caller made (tests); Listen checks the
// address first.
func (s *Server) Serve(ln net.Listener) {
	s.mu.Lock()
	s.addr = ln.Addr().String()
	if ta, ok := ln.Addr().(*net.TCPAddr); ok {
		s.cookie = "agentbox_live_" + strconv.Itoa(ta.Port)
	}
	s.http = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		BaseContext:       func(net.Listener) context.Context { return s.base },
	}
	hs := s.http
	s.mu.Unlock()
	ln = connlimit.New(ln, maxConns, maxConnsPerHost)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = hs.Serve(ln)
	}()
}

// Handler is the server's pages and WebSockets behind their defences.
func (s *Server) Handler() http.Handler { return s.handler }

// URL is the address to open in a browser: it carries the control token
// (moved to a cookie on the first load).
func (s *Server) URL() string { return s.urlWith("token", s.control) }

// ReadOnlyURL is the address for viewers who may only watch.
func (s *Server) ReadOnlyURL() string { return s.urlWith("view", s.view) }

func (s *Server) urlWith(param, tok string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return "http://" + s.addr + "/?" + param + "=" + tok
}

// Close ends every page's session: each open page is told the run has
// ended and its connection closed; the tokens are forgotten with the
// server. It waits up to ctx's deadline.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	hs := s.http
	views := append([]*View(nil), s.order...)
	s.mu.Unlock()
	for _, c := range conns {
		c.finish("the run has ended: this page's session is over")
	}
	for _, v := range views {
		v.shutdown()
	}
	var err error
	if hs != nil {
		err = hs.Shutdown(ctx)
	}
	s.cancel()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return err
}

func (s *Server) logf(format string, args ...any) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintf(s.o.Log, "agentbox: live: "+format+"\n", args...)
}

// notify tells grid pages that the list of views changed.
func (s *Server) notify() {
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// ---- routes and defences ----

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.handleIndex)
	mux.HandleFunc("GET /v/{id}", s.handleView)
	mux.HandleFunc("GET /ws/grid", s.handleGridWS)
	mux.HandleFunc("GET /ws/v/{id}", s.handleViewWS)
	var h http.Handler = mux
	h = webguard.Authenticate(webguard.Auth{
		Name:       "agentbox live",
		Cookie:     func() string { return s.cookie },
		Params:     []string{"token", "view"},
		Role:       s.roleOf,
		NoExchange: func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/ws/") },
		Wrong:      "the token in the address is not this run's",
		Missing:    "open the address agentbox printed (it carries this run's token)",
	}, h)
	h = webguard.CheckOrigin("agentbox live", h)
	h = webguard.CheckHost("agentbox live", h)
	h = webguard.Headers(CSP, h)
	return h
}

// roleOf is a token's role, compared in constant time; "" for none.
func (s *Server) roleOf(tok string) string {
	switch {
	case webguard.Equal(tok, s.control):
		return RoleControl
	case webguard.Equal(tok, s.view):
		return RoleView
	}
	return ""
}

// ---- pages ----

func (s *Server) handleIndex(w http.ResponseWriter, r *http.Request) {
	if !s.o.Grid {
		s.mu.Lock()
		var first *View
		if len(s.order) > 0 {
			first = s.order[0]
		}
		s.mu.Unlock()
		if first != nil {
			http.Redirect(w, r, "/v/"+first.id, http.StatusSeeOther)
			return
		}
	}
	writePage(w, "grid", "", s.o.Title)
}

func (s *Server) handleView(w http.ResponseWriter, r *http.Request) {
	v := s.lookup(r.PathValue("id"))
	if v == nil {
		http.Error(w, "agentbox live: no such view", http.StatusNotFound)
		return
	}
	writePage(w, "view", v.id, v.info.Name+" · "+s.o.Title)
}

func (s *Server) lookup(id string) *View {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.views[id]
}

// writePage writes a page: its data in attributes, everything else built
// by the script from the WebSocket's messages.
func writePage(w http.ResponseWriter, kind, id, title string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	b.WriteString("<meta name=\"referrer\" content=\"no-referrer\">\n")
	fmt.Fprintf(&b, "<title>%s</title>\n<style>%s</style>\n</head>\n", html.EscapeString(title), inlineStyle)
	fmt.Fprintf(&b, "<body data-page=\"%s\" data-id=\"%s\" data-title=\"%s\">\n", kind, html.EscapeString(id), html.EscapeString(title))
	b.WriteString("<noscript>The live page needs JavaScript.</noscript>\n<script>")
	b.WriteString(inlineScript)
	b.WriteString("</script>\n</body>\n</html>\n")
	_, _ = io.WriteString(w, b.String())
}

// ---- WebSockets ----

// maxMessage bounds what a page may send in one message (typed text
// included).
const maxMessage = 64 << 10

func (s *Server) accept(w http.ResponseWriter, r *http.Request) (*websocket.Conn, string, bool) {
	role := webguard.RoleOf(r.Context())
	// Accept checks the Origin again (only the page's own host).
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return nil, "", false // Accept answered
	}
	ws.SetReadLimit(maxMessage)
	return ws, role, true
}

func (s *Server) track(c *conn) (name string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", false
	}
	s.conns[c] = struct{}{}
	s.viewers++
	s.wg.Add(1)
	return "viewer " + strconv.Itoa(s.viewers), true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

func (s *Server) handleViewWS(w http.ResponseWriter, r *http.Request) {
	v := s.lookup(r.PathValue("id"))
	if v == nil {
		http.Error(w, "agentbox live: no such view", http.StatusNotFound)
		return
	}
	c, ok := s.open(w, r, v)
	if !ok {
		return
	}
	defer s.untrack(c)
	c.serveView()
}

// open accepts a page's WebSocket and tracks its connection, to view v
// (nil: the grid); false when the handshake failed or the run has ended
// (the socket is then closed).
func (s *Server) open(w http.ResponseWriter, r *http.Request, v *View) (*conn, bool) {
	ws, role, ok := s.accept(w, r)
	if !ok {
		return nil, false
	}
	c := newConn(s, v, ws, role)
	name, ok := s.track(c)
	if !ok {
		ws.Close(websocket.StatusGoingAway, "the run has ended")
		return nil, false
	}
	c.name = name
	return c, true
}

func (s *Server) handleGridWS(w http.ResponseWriter, r *http.Request) {
	c, ok := s.open(w, r, nil)
	if !ok {
		return
	}
	defer s.untrack(c)
	s.mu.Lock()
	s.grids++
	views := append([]*View(nil), s.order...)
	s.mu.Unlock()
	for _, v := range views {
		v.kick()
	}
	defer func() {
		s.mu.Lock()
		s.grids--
		s.mu.Unlock()
	}()
	c.serveGrid()
}

// gridWatched reports whether a grid page is open.
func (s *Server) gridWatched() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grids > 0
}
