// Package serve is agentbox serve: a long-running server that owns
// environments on this machine and lets clients drive them over HTTP and
// a WebSocket (API v1, described by openapi.json). Each environment is a
// sequence of episodes; each episode is a session.Session with its own
// sandbox and trace, driven by the client with the actor "remote",
// exactly as the agent loop drives one.
//
// Defences, in the order a request meets them (SECURITY.md, "agentbox
// serve"): the listener (loopback unless TLS or --insecure), header and
// body bounds, the Host check (DNS rebinding), cross-origin browser
// requests refused, the bearer token, then per-token limits (live
// environments, uploads) and ownership (a token sees only its own).
package serve

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/connlimit"
	"github.com/codegirl-games/agentbox/internal/owner"
	"github.com/codegirl-games/agentbox/internal/vault"
	"github.com/codegirl-games/agentbox/internal/version"
	"github.com/codegirl-games/agentbox/mcp"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/pool"
	"github.com/codegirl-games/agentbox/serve/api"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

// Options configure a Server. Zero fields take the defaults below.
type Options struct {
	// Backends an environment may use; the first is the default.
	Backends []environment.Backend
	// Indexer, when set, indexes each episode's trace as it is written.
	Indexer trace.Indexer
	// Apps are the registered apps (--app NAME=DIR), by name. The server
	// closes them when it shuts down.
	Apps map[string]*app.Bundle
	// AppPolicies are the registered apps' manifest policies (their
	// field policy), by name: an environment of the app whose create
	// request names no policy — and every one an MCP client launches —
	// is gated by it.
	AppPolicies map[string]*policy.Policy
	// Tokens are the bearer tokens the server accepts (at least one).
	Tokens []string

	// Env is the sandbox every environment starts from: image, OCI
	// runtime, guest binary, no window manager. Its Resources are the
	// default and the most a client may ask for; its Screen the default.
	Env environment.Config
	// Vault holds the secrets every episode's type_secret types (serve
	// --vault): the server's own, never sent over the API; a client names
	// a secret, and its value is replaced with [secret:NAME] in
	// everything the API, the live page and the traces carry.
	Vault *vault.Vault
	// MaxScreen is the largest screen a client may ask for (default
	// 1920x1080).
	MaxScreen observe.Screen

	MaxEnvironments int // live environments per token (default 4)
	MaxUploads      int // uploads per token, those being received included (default 4)
	// UploadsInProgress bounds the uploads being received and unpacked at
	// once over every token (default 4): each may write up to
	// UploadLimits.MaxBytes to the disk before it is checked.
	UploadsInProgress int
	// UploadTimeout is how long an upload's body may take to arrive
	// (default 5 minutes): a client that trickles it holds a slot and
	// disk space no longer.
	UploadTimeout time.Duration
	Lease         time.Duration // an environment's idle lease (default 60s)
	MaxSteps      int           // per episode, default and most (default 10000)
	Timeout       time.Duration // per episode, default and most (default 1h)
	StartTimeout  time.Duration // creating the sandbox and starting the app (default 60s)
	MaxRate       float64       // actions per second per environment (default 1000)
	LogCap        int64         // per output stream and episode (default trace.DefaultLogCap)
	ReadyTimeout  time.Duration // the app's window (default: the manifest's ready_timeout)
	// Settle is an environment's settle before each screenshot when its
	// create request names none (default: none).
	Settle       session.Settle
	UploadLimits app.Limits // per upload (default app.DefaultLimits)

	// Out is where the episodes' traces go, one directory per run ID.
	Out string
	// UploadDir is where uploads are unpacked (default a new directory in
	// the system's temporary directory); the server removes it when it
	// shuts down.
	UploadDir string
	// RunID names an episode of an app (default: serve-TIME-RANDOM).
	RunID func(app string) string
	// AllowedHosts are host names (besides IP addresses and localhost)
	// the Host header may carry.
	AllowedHosts []string
	// MCPSessionTimeout ends an MCP session of /v1/mcp that has had no
	// request for this long, closing its environment (default one hour;
	// the environment's own lease is Lease, renewed by every tool call).
	MCPSessionTimeout time.Duration

	// Pool, when positive, keeps that many sandboxes warm per key
	// (backend, image, screen, limits, …): an episode then only stages
	// and launches its app. The registered apps' default keys are warmed
	// from the start; other keys once a client asks for them. PoolMax
	// bounds the pooled sandboxes over all keys (default 4×Pool).
	Pool, PoolMax int
	// PoolLaunch launches each registered app ahead in its pooled
	// sandboxes (pool.Options.Launch): a fresh episode from the pool
	// starts with its app running, idle since its sandbox was made. An
	// opt-in: it changes what a fresh episode is.
	PoolLaunch bool
	// PoolRefillDelay is the pool's pool.Options.RefillDelay (zero: its
	// default): how long after a take a key's refill, and the removal of
	// sandboxes released in a loop of takes, wait for the loop to pause.
	PoolRefillDelay time.Duration

	// Log receives a line per environment created, closed or reaped, and
	// the sessions' progress lines; nil discards.
	Log io.Writer

	// Watch, when set, is told of each episode as it starts (serve --live:
	// the live page): it may hook the session's configuration (its
	// Listener), and returns what is given the session once it is open
	// (nil: nothing).
	Watch func(env string, episode int, cfg *session.Config) (opened func(*session.Session))
}

// The defaults of Options: also those of agentbox serve's flags that set
// them. An episode a client drives (here, or agentbox mcp's) is given
// longer and more steps than an agent's run (session's defaults).
const (
	DefaultAddr              = "127.0.0.1:8470"
	DefaultMaxEnvironments   = 4
	DefaultMaxUploads        = 4
	DefaultUploadsInProgress = 4
	DefaultUploadTimeout     = 5 * time.Minute
	DefaultLease             = time.Minute
	DefaultMaxSteps          = 10000
	DefaultTimeout           = time.Hour
	DefaultOut               = "agentbox-runs"
)

// DefaultMaxScreen is the default MaxScreen.
var DefaultMaxScreen = observe.Screen{Width: 1920, Height: 1080, Depth: observe.ScreenDepth}

func (o *Options) defaults() error {
	if len(o.Backends) == 0 {
		return errors.New("serve: no backend")
	}
	if len(o.Tokens) == 0 {
		return errors.New("serve: no token")
	}
	if o.MaxScreen == (observe.Screen{}) {
		o.MaxScreen = DefaultMaxScreen
	}
	if o.MaxEnvironments <= 0 {
		o.MaxEnvironments = DefaultMaxEnvironments
	}
	if o.MaxUploads <= 0 {
		o.MaxUploads = DefaultMaxUploads
	}
	if o.UploadsInProgress <= 0 {
		o.UploadsInProgress = DefaultUploadsInProgress
	}
	if o.UploadTimeout <= 0 {
		o.UploadTimeout = DefaultUploadTimeout
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.MaxSteps <= 0 {
		o.MaxSteps = DefaultMaxSteps
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = session.DefaultStartTimeout
	}
	if o.MaxRate == 0 {
		o.MaxRate = session.DefaultMaxRate
	}
	if o.LogCap <= 0 {
		o.LogCap = trace.DefaultLogCap
	}
	if o.UploadLimits == (app.Limits{}) {
		o.UploadLimits = app.DefaultLimits
	}
	if o.Out == "" {
		o.Out = DefaultOut
	}
	if abs, err := filepath.Abs(o.Out); err == nil {
		o.Out = abs // the traces' paths in answers mean the same wherever the client runs
	}
	if o.RunID == nil {
		o.RunID = func(string) string { return "serve-" + time.Now().Format("20060102-150405") + "-" + randomID(3) }
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	o.Env.Resources = o.Env.Resources.WithDefaults()
	o.Env.Screen = o.Env.Screen.OrDefault()
	if err := o.Env.Resources.Validate(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// Server owns the environments of agentbox serve.
type Server struct {
	o      Options
	tokens map[[32]byte]string // SHA-256 of a token → its owner ID (the whole digest, hex)
	// images bounds the observations with an image a token's
	// WebSockets hold, being made or sent, at once (ws.go).
	images tokenSlots
	api    http.Handler
	http   *http.Server
	mcp    *mcp.Server // the MCP endpoint's sessions

	// base is the context of everything the server does for its
	// environments (not of one request: a client that goes away does not
	// end its episode mid-step); Shutdown cancels it with
	// session.ErrInterrupted.
	base   context.Context
	cancel context.CancelCauseFunc

	logMu sync.Mutex

	mu      sync.Mutex
	closing bool
	envs    map[string]*env
	uploads map[string]*upload
	// receiving counts the uploads being received, per owner; they count
	// against the owner's MaxUploads, and together against
	// UploadsInProgress.
	receiving map[string]int
	conns     map[*websocket.Conn]struct{}
	uploadMk  bool // UploadDir was made by the server
	reaper    chan struct{}
	pool      *pool.Pool     // nil without Options.Pool
	wg        sync.WaitGroup // episodes closing in the background, the reaper
}

// New makes a server; Serve starts it.
func New(o Options) (*Server, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	s := &Server{o: o, tokens: map[[32]byte]string{}, envs: map[string]*env{}, uploads: map[string]*upload{},
		receiving: map[string]int{}, conns: map[*websocket.Conn]struct{}{}, reaper: make(chan struct{})}
	first := map[[32]byte]int{}
	for i, t := range o.Tokens {
		if err := CheckToken(t); err != nil {
			return nil, err
		}
		// The owner is the whole digest: two tokens that share a prefix
		// of it are two owners. Two tokens with one owner would share
		// everything they own: refused.
		sum := sha256.Sum256([]byte(t))
		if j, dup := first[sum]; dup {
			return nil, fmt.Errorf("serve: tokens %d and %d are the same token: each client needs its own", j+1, i+1)
		}
		first[sum] = i
		s.tokens[sum] = hex.EncodeToString(sum[:])
	}
	if s.o.UploadDir == "" {
		d, err := owner.TempDir("serve")
		if err != nil {
			return nil, fmt.Errorf("serve: a directory for uploads: %w", err)
		}
		s.o.UploadDir, s.uploadMk = d, true
	} else if err := os.MkdirAll(s.o.UploadDir, 0o700); err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	s.base, s.cancel = context.WithCancelCause(context.Background())
	s.mcp = s.newMCP(version.Version)
	s.api = s.routes()
	if o.Pool > 0 {
		if err := s.startPool(); err != nil {
			s.cancel(nil)
			if s.uploadMk {
				os.RemoveAll(s.o.UploadDir)
			}
			return nil, err
		}
	}
	s.wg.Add(1)
	go s.reap()
	return s, nil
}

// MinTokenLength is the shortest token the server accepts.
const MinTokenLength = 16

// CheckToken refuses a token too short to resist guessing, or one with
// characters an Authorization header cannot carry.
func CheckToken(t string) error {
	if len(t) < MinTokenLength {
		return fmt.Errorf("serve: a token must have at least %d characters, this one has %d", MinTokenLength, len(t))
	}
	for _, r := range t {
		if r <= ' ' || r > '~' {
			return errors.New("serve: a token may hold printable ASCII characters only, no spaces")
		}
	}
	return nil
}

// NewToken makes a token: 32 random bytes, hex.
func NewToken() string { return "abx_" + randomID(32) }

// Handler is the API with every defence in front of it.
func (s *Server) Handler() http.Handler { return s.api }

// Serve answers on ln until Shutdown; with a certificate and key it
// speaks TLS. It returns http.ErrServerClosed after Shutdown. Its
// connections, headers and large bodies are bounded (bodies.go).
func (s *Server) Serve(ln net.Listener, certFile, keyFile string) error {
	s.mu.Lock()
	s.http = &http.Server{
		Handler:           boundBodies(s.owner, s.api),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          log.New(httpLog{s}, "", 0),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(s.base) },
	}
	hs := s.http
	s.mu.Unlock()
	ln = connlimit.New(ln, maxConns, maxConnsPerHost)
	if certFile != "" {
		return hs.ServeTLS(ln, certFile, keyFile)
	}
	return hs.Serve(ln)
}

// Shutdown stops the server: no new request is accepted, every step in
// flight is interrupted, every environment is closed (its episode ends
// as interrupted, its sandbox is removed, its trace finalised), every
// upload is removed. It waits for all of it, up to ctx's deadline.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	already := s.closing
	s.closing = true
	hs := s.http
	envs := make([]*env, 0, len(s.envs))
	for _, e := range s.envs {
		envs = append(envs, e)
	}
	conns := make([]*websocket.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	if already {
		s.wg.Wait()
		return nil
	}
	close(s.reaper)
	s.cancel(session.ErrInterrupted)
	poolClosed := s.closePool()
	for _, c := range conns {
		c.Close(websocket.StatusGoingAway, "the server is shutting down")
	}
	// MCP sessions end (their streams with them); each closes its
	// environment, as below.
	mcpDone := make(chan struct{})
	go func() {
		defer close(mcpDone)
		s.mcp.Close()
	}()
	defer func() { <-mcpDone }()
	end := session.End{Outcome: trace.Interrupted, Reason: trace.ReasonSignal, Message: "the server shut down"}
	var wg sync.WaitGroup
	for _, e := range envs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.closeEnv(e, end)
		}()
	}
	wg.Wait()
	err := poolClosed(ctx)
	if hs != nil {
		err = errors.Join(err, hs.Shutdown(ctx))
	}
	s.wg.Wait()
	s.mu.Lock()
	for id, u := range s.uploads {
		u.remove()
		delete(s.uploads, id)
	}
	s.mu.Unlock()
	for _, b := range s.o.Apps {
		b.Close()
	}
	if s.uploadMk {
		os.RemoveAll(s.o.UploadDir)
	}
	return err
}

// logf writes a line to the server's log.
func (s *Server) logf(format string, args ...any) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintf(s.o.Log, "agentbox serve: "+format+"\n", args...)
}

// httpLog takes net/http's own messages into the server's log, less the
// TLS handshakes a peer ended before a word ("…: EOF"): what a TCP
// readiness or liveness probe (deploy/kubernetes/serve.yaml) or a load
// balancer's health check does every few seconds.
type httpLog struct{ s *Server }

func (l httpLog) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	if strings.HasPrefix(line, "http: TLS handshake error from ") && strings.HasSuffix(line, ": EOF") {
		return len(p), nil
	}
	l.s.logf("%s", strings.TrimPrefix(line, "http: "))
	return len(p), nil
}

// ownerLogLen is how much of an owner ID the log and the traces show: a
// label, not the owner (the whole digest is).
const ownerLogLen = 8

// ownerLabel is the short form of an owner ID the log and the traces
// show: its first ownerLogLen hex digits.
func ownerLabel(owner string) string { return owner[:min(len(owner), ownerLogLen)] }

// owner is the owner ID of a request's token, or "" when it has none the
// server knows. Every known token is compared, in constant time.
func (s *Server) owner(r *http.Request) string {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(tok))
	found := ""
	for known, id := range s.tokens {
		if subtle.ConstantTimeCompare(sum[:], known[:]) == 1 {
			found = id
		}
	}
	return found
}

// info is GET /v1/server.
func (s *Server) info() api.Server {
	backends, apps := []string{}, []string{}
	for _, b := range s.o.Backends {
		backends = append(backends, b.Name())
	}
	for name := range s.o.Apps {
		apps = append(apps, name)
	}
	sort.Strings(apps)
	r := s.o.Env.Resources
	return api.Server{
		Agentbox: version.Version, API: api.Version, Backends: backends, Apps: apps,
		MaxEnvironments: s.o.MaxEnvironments, LeaseMS: s.o.Lease.Milliseconds(), MaxScreen: s.o.MaxScreen,
		Limits:         api.Limits{CPUs: r.CPUs, MemoryMB: r.MemoryMB, PIDs: r.PIDs, TmpfsMB: r.TmpfsMB},
		MaxUploadBytes: s.o.UploadLimits.MaxBytes, MaxUploadFiles: s.o.UploadLimits.MaxFiles,
		MaxSteps: s.o.MaxSteps, MaxTimeoutMS: s.o.Timeout.Milliseconds(), Pool: s.poolInfo(),
		Capabilities: api.Capabilities{Fork: s.forkMode()},
	}
}

// backend is the named backend, or the default.
func (s *Server) backend(name string) (environment.Backend, bool) {
	if name == "" {
		return s.o.Backends[0], true
	}
	for _, b := range s.o.Backends {
		if b.Name() == name {
			return b, true
		}
	}
	return nil, false
}

// reap closes the environments whose lease ran out: no request and no
// open connection of their client for the lease.
func (s *Server) reap() {
	defer s.wg.Done()
	tick := min(max(s.o.Lease/10, 50*time.Millisecond), time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-s.reaper:
			return
		case <-t.C:
		}
		now := time.Now()
		var expired []*env
		s.mu.Lock()
		for _, e := range s.envs {
			if e.expired(now, s.o.Lease) {
				expired = append(expired, e)
			}
		}
		s.mu.Unlock()
		for _, e := range expired {
			s.logf("environment %s: no request from its client for %v: closing it", e.id, s.o.Lease)
			done, ok := s.track()
			if !ok {
				return // shutting down: the shutdown closes it
			}
			go func() {
				defer done()
				s.closeEnv(e, session.End{Outcome: trace.Interrupted, Reason: trace.ReasonLeaseExpired,
					Message: fmt.Sprintf("no request or connection from the client for %v (the lease)", s.o.Lease)})
			}()
		}
	}
}

// randomID is n random bytes in hex.
func randomID(n int) string {
	b := make([]byte, n)
	if _, err := randRead(b); err != nil {
		panic("serve: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b)
}

// uploadPath is where an upload is unpacked.
func (s *Server) uploadPath(id string) string { return filepath.Join(s.o.UploadDir, id) }
