// Package dashboard is agentbox dashboard: a local web UI over the index
// of runs (package store) — runs and evals with filters, pass rates over
// time per suite and per task, the runs still being written, each run's
// report (package report, rendered from its trace), replays and their
// verdicts, and an export of any selection (its traces and a summary
// CSV, as one .tar.gz).
//
// Its pages are rendered on the server (html/template), with no script and
// nothing fetched from elsewhere: they work offline. Its defences are the
// live page's (internal/webguard): loopback only, a token printed once in
// the address and exchanged for an HttpOnly, SameSite=Strict cookie, Host
// and Origin checked, no CORS; and it serves only traces below its roots
// (the directories it was given), each file through trace.OpenFile
// (confined to its trace directory, no symbolic links).
package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/codegirl-games/agentbox/internal/connlimit"
	"github.com/codegirl-games/agentbox/internal/webguard"
	"github.com/codegirl-games/agentbox/store"
)

// Name prefixes the dashboard's errors.
const Name = "agentbox dashboard"

// Options configure a Server.
type Options struct {
	// Store is the index the pages are read from.
	Store *store.Store
	// Roots are the trace roots: only runs and evals in one of these
	// directories or below are listed and served. Made absolute.
	Roots []string
	// PageSize is how many runs a page lists (default 100).
	PageSize int
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

// Server serves the dashboard.
type Server struct {
	o       Options
	roots   []string // absolute, cleaned
	real    []string // the roots with their links resolved
	token   string
	cookie  string
	handler http.Handler

	mu   sync.Mutex
	http *http.Server
	addr string
	wg   sync.WaitGroup
}

// New makes a server with a fresh random token.
func New(o Options) (*Server, error) {
	if o.Store == nil {
		return nil, errors.New("dashboard: no store")
	}
	if o.PageSize <= 0 {
		o.PageSize = 100
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{o: o, token: webguard.Token(), cookie: "agentbox_dashboard"}
	for _, r := range o.Roots {
		a, err := filepath.Abs(r)
		if err != nil {
			return nil, fmt.Errorf("dashboard: root %s: %w", r, err)
		}
		s.roots = append(s.roots, a)
		if rr, err := filepath.EvalSymlinks(a); err == nil {
			s.real = append(s.real, rr)
		} else {
			s.real = append(s.real, a)
		}
	}
	s.handler = s.routes()
	return s, nil
}

// Roots are the server's trace roots (absolute).
func (s *Server) Roots() []string { return append([]string(nil), s.roots...) }

// Token is the server's token (tests).
func (s *Server) Token() string { return s.token }

// Handler is the pages behind their defences.
func (s *Server) Handler() http.Handler { return s.handler }

// Listen starts serving on addr, which must be a loopback address.
func (s *Server) Listen(addr string) error {
	ln, err := webguard.Listen("dashboard", addr)
	if err != nil {
		return err
	}
	s.Serve(ln)
	return nil
}

// Serve serves on a listener the caller made.
func (s *Server) Serve(ln net.Listener) {
	s.mu.Lock()
	s.addr = ln.Addr().String()
	if ta, ok := ln.Addr().(*net.TCPAddr); ok {
		s.cookie = "agentbox_dashboard_" + strconv.Itoa(ta.Port)
	}
	s.http = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
	hs := s.http
	s.mu.Unlock()
	ln = connlimit.New(ln, 256, 64)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = hs.Serve(ln)
	}()
}

// URL is the address to open: it carries the token (moved to a cookie on
// the first load).
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return "http://" + s.addr + "/?token=" + s.token
}

// Close stops serving, waiting up to ctx's deadline.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	hs := s.http
	s.mu.Unlock()
	if hs == nil {
		return nil
	}
	err := hs.Shutdown(ctx)
	s.wg.Wait()
	return err
}

func (s *Server) cookieName() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cookie
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.handleRuns)
	mux.HandleFunc("GET /rates", s.handleRates)
	mux.HandleFunc("GET /replays", s.handleReplays)
	mux.HandleFunc("GET /export", s.handleExport)
	mux.HandleFunc("GET /run/{row}", s.handleRun)
	mux.HandleFunc("GET /run/{row}/report/{file...}", s.handleReport)
	mux.HandleFunc("GET /eval/{row}", s.handleEval)
	var h http.Handler = mux
	h = webguard.Authenticate(webguard.Auth{
		Name:   Name,
		Cookie: s.cookieName,
		Params: []string{"token"},
		Role: func(tok string) string {
			if webguard.Equal(tok, s.token) {
				return "view"
			}
			return ""
		},
		Wrong:   "the token in the address is not this dashboard's",
		Missing: "open the address agentbox dashboard printed (it carries the token)",
	}, h)
	h = webguard.CheckOrigin(Name, h)
	h = webguard.CheckHost(Name, h)
	h = webguard.Headers(CSP, h)
	return h
}

// inRoots reports whether dir (from the store) is below a root, its links
// resolved: the dashboard serves nothing else.
func (s *Server) inRoots(dir string) bool {
	if !filepath.IsAbs(dir) {
		return false
	}
	dir = filepath.Clean(dir)
	if !under(dir, s.roots) {
		return false
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	return under(real, s.real)
}

func under(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, strings.TrimSuffix(d, string(filepath.Separator))+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// badRequest answers 400 naming what was wrong.
func badRequest(w http.ResponseWriter, err error) {
	http.Error(w, Name+": "+err.Error(), http.StatusBadRequest)
}

func notFound(w http.ResponseWriter, what string) {
	http.Error(w, Name+": "+what, http.StatusNotFound)
}

func serverError(w http.ResponseWriter, err error) {
	http.Error(w, Name+": "+err.Error(), http.StatusInternalServerError)
}
