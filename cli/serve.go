package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/atomicfile"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/live"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/pool"
	"github.com/codegirl-games/agentbox/serve"
	"github.com/codegirl-games/agentbox/serve/api"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

type serveFlags struct {
	listen, certFile, keyFile string
	insecure                  bool
	tokenFile, writeToken     string
	apps, allowHosts          []string

	// The sandbox flags serve shares with run and eval (serveFlagUses).
	sandboxFlags
	index     indexFlags
	maxScreen string
	vault     vaultFlag

	maxEnvs, maxUploads int
	uploadsInProgress   int
	uploadTimeout       time.Duration
	lease               time.Duration
	maxUpload           string
	out                 string
	pool, poolMax       int
	poolLaunch          bool
	live                liveFlag
}

// tokenEnv names the environment variable holding serve's token.
const tokenEnv = "AGENTBOX_TOKEN"

func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve environments over HTTP and WebSocket (API v1) to clients that drive them",
		Long: `Serve runs a server that owns environments on this machine: a client creates
one (an app registered with --app NAME=DIR, or an app directory it uploads),
observes and acts step by step over HTTP or a WebSocket, resets it for the
next episode (a fresh sandbox) and closes it. Every episode writes the trace
agentbox run writes, under --out, with each step's actor "remote".

It listens on loopback unless --tls-cert/--tls-key are given or --insecure
says plainly that the network may read the token. Every request needs the
bearer token: AGENTBOX_TOKEN, the tokens of --token-file (one a line, not
readable by others), or else the token of --write-token (mode 0600): a new
one, unless another agentbox serve that is running uses that file, whose
token this server then accepts too (the file is never replaced under a live
server). Requests for other hosts (Host) and from other origins are refused;
each token holds at most --max-envs live environments and --max-uploads
uploads; an environment nobody uses for --lease is closed. SIGINT or SIGTERM closes every environment (its episode ends as
interrupted, its sandbox is removed, its trace finalised) and exits 0.

--pool N keeps N sandboxes warm (display and window manager up, no app) for
each backend, image, screen and limits asked for, so that creating or
resetting an environment only starts its app; each serves one episode.
--pool-launch also starts each registered app in its pooled sandboxes, so
that a fresh episode from the pool is a hand-over: its app was started,
then held (stopped, no CPU) from its window's arrival until the episode
took it over (run.json's app.launched_ahead says how long); an episode that launches otherwise (a virtual clock, task inputs)
launches its own.

The API is described at /v1/openapi.json (serve/openapi.json). MCP clients
connect at /v1/mcp (streamable HTTP) with the same token: each MCP session
drives an environment of its own with the tools of agentbox mcp.`,
		Example: `  agentbox serve --app mover=examples/mover
  curl -H "Authorization: Bearer $(cat ~/.config/agentbox/serve.token)" http://127.0.0.1:8470/v1/server
  agentbox serve --listen 0.0.0.0:8470 --tls-cert cert.pem --tls-key key.pem --allow-host box.example.org`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", serve.DefaultAddr, "address to listen on (beyond loopback only with TLS or --insecure)")
	fl.StringVar(&f.certFile, "tls-cert", "", "TLS certificate file (PEM)")
	fl.StringVar(&f.keyFile, "tls-key", "", "TLS key file (PEM)")
	fl.BoolVar(&f.insecure, "insecure", false, "allow listening beyond loopback without TLS (the token travels in the clear)")
	fl.StringVar(&f.tokenFile, "token-file", "", "read the accepted tokens from this file, one a line (it must not be readable by group or others)")
	fl.StringVar(&f.writeToken, "write-token", api.DefaultTokenFile(), "where a generated token is written (mode 0600) when neither "+tokenEnv+" nor --token-file gives one; an agentbox serve running with the same file shares its token instead")
	fl.StringArrayVar(&f.apps, "app", nil, "register an app NAME=DIR (or NAME=FILE: an executable or a manifest) clients may create environments of (repeatable)")
	fl.StringArrayVar(&f.allowHosts, "allow-host", nil, "a host name the Host header may carry besides IP addresses and localhost (repeatable)")
	f.register(fl, "serve")
	f.vault.register(fl)
	fl.StringVar(&f.maxScreen, "max-screen", fmt.Sprintf("%dx%d", serve.DefaultMaxScreen.Width, serve.DefaultMaxScreen.Height), "the largest screen a client may ask for")
	fl.IntVar(&f.maxEnvs, "max-envs", serve.DefaultMaxEnvironments, "live environments per token")
	fl.IntVar(&f.maxUploads, "max-uploads", serve.DefaultMaxUploads, "uploaded apps per token (those being received count)")
	fl.IntVar(&f.uploadsInProgress, "max-uploads-in-progress", serve.DefaultUploadsInProgress, "uploads received and unpacked at once over all tokens (each may write --max-upload to the disk before it is checked)")
	fl.DurationVar(&f.uploadTimeout, "upload-timeout", serve.DefaultUploadTimeout, "the most an upload's body may take to arrive")
	fl.DurationVar(&f.lease, "lease", serve.DefaultLease, "close an environment after this long without a request or an open connection of its client")
	fl.StringVar(&f.maxUpload, "max-upload", sizeFlag(app.DefaultLimits.MaxBytes), "largest total of an uploaded app's files")
	fl.StringVar(&f.out, "out", serve.DefaultOut, "directory of the episodes' traces (one per run ID)")
	fl.IntVar(&f.pool, "pool", 0, "keep this many sandboxes warm (display and window manager up) per backend, image, screen and limits, so an episode only launches its app (0: none)")
	fl.BoolVar(&f.poolLaunch, "pool-launch", false, "also launch each registered app ahead in its pooled sandboxes: a fresh episode from the pool starts with its app running (held, stopped, until then)")
	fl.IntVar(&f.poolMax, "pool-max", 0, fmt.Sprintf("the most sandboxes the warm pool holds over all its keys (default %d × --pool)", pool.DefaultMaxPerSize))
	f.live.register(fl, "every environment's episodes (a grid)")
	f.index.register(fl)
	return cmd
}

// runServe checks everything, then serves until a signal.
func runServe(cmd *cobra.Command, f serveFlags) error {
	stderr := cmd.ErrOrStderr()
	o, err := f.options(cmd)
	if err != nil {
		return err
	}
	defer func() {
		for _, b := range o.Apps {
			b.Close()
		}
	}()
	if (f.certFile == "") != (f.keyFile == "") {
		return usageErrorf("--tls-cert and --tls-key go together")
	}
	// The address first: a server that cannot listen (another one has
	// the port) touches no token file.
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return failErr(fmt.Errorf("--listen %s: %w", f.listen, err))
	}
	defer ln.Close()
	addr := ln.Addr().(*net.TCPAddr)
	if !addr.IP.IsLoopback() && f.certFile == "" && !f.insecure {
		return usageErrorf("--listen %s is beyond loopback: give --tls-cert and --tls-key, or --insecure to send the token in the clear", f.listen)
	}
	tok, err := f.tokens()
	if err != nil {
		return err
	}
	defer tok.release()
	o.Tokens = tok.tokens
	for _, name := range strings.Split(f.backend, ",") {
		b, note, err := resolveBackend(cmd.Context(), chooseBackend(cmd, strings.TrimSpace(name)), f.image, f.ociRuntime)
		if err != nil {
			return err
		}
		// Every environment's limits are at most the server's: what the
		// backend cannot bound for them it cannot bound for any.
		if err := checkHostLimits(cmd.Context(), b, o.Env.Resources, flagNames, f.allowUnbounded); err != nil {
			return err
		}
		fmt.Fprint(stderr, note)
		o.Backends = append(o.Backends, b)
	}
	for _, b := range o.Backends {
		reapLeftovers(cmd.Context(), b, stderr)
	}
	// The traces a predecessor that died left running (its sandboxes were
	// just reaped) are finalised as crashed: agentbox resume continues
	// those of scripts and exec agents.
	marked, errs := trace.MarkCrashedUnder(f.out, 2)
	for _, d := range marked {
		fmt.Fprintf(stderr, "agentbox: %s was left running by an agentbox that died: finalised as crashed\n", termsafe.Line(d))
	}
	for _, err := range errs {
		fmt.Fprintf(stderr, "agentbox: warning: %v\n", err)
	}
	liveSrv, err := f.live.start(stderr, "agentbox serve", true)
	if err != nil {
		return err
	}
	defer stopLive(liveSrv)
	if liveSrv != nil {
		o.Watch = func(env string, n int, cfg *session.Config) func(*session.Session) {
			opened, _ := watch(liveSrv, live.Info{Name: fmt.Sprintf("environment %s · episode %d", env, n), Task: cfg.Task,
				Agent: "a client of agentbox serve", RunID: cfg.RunID, Trace: cfg.TraceDir, Screen: cfg.Env.Screen}, cfg)
			return opened
		}
	}
	ix := openLiveIndex(stderr, f.index)
	defer ix.close()
	o.Indexer = ix.indexer()
	srv, err := serve.New(o)
	if err != nil {
		return failErr(err)
	}
	scheme := "http"
	if f.certFile != "" {
		scheme = "https"
	}
	fmt.Fprintf(stderr, "agentbox serve: listening on %s://%s (API %s, described at /%s/openapi.json)\n", scheme, addr, api.Version, api.Version)
	switch {
	case tok.shared:
		fmt.Fprintf(stderr, "agentbox serve: the token is in %s (that of the agentbox serve already running with it)\n", termsafe.Line(tok.written))
	case tok.written != "":
		fmt.Fprintf(stderr, "agentbox serve: the token is in %s\n", termsafe.Line(tok.written))
	case f.tokenFile != "":
		fmt.Fprintf(stderr, "agentbox serve: tokens from %s\n", termsafe.Line(f.tokenFile))
	default:
		fmt.Fprintf(stderr, "agentbox serve: the token is %s\n", tokenEnv)
	}
	if !addr.IP.IsLoopback() && f.certFile == "" {
		fmt.Fprintf(stderr, "agentbox serve: warning: --insecure: tokens and screens travel in the clear on %s\n", addr)
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln, f.certFile, f.keyFile) }()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	select {
	case err := <-errc:
		shutdown(srv, o.Backends, sigs, stderr)
		return failErr(fmt.Errorf("serve: %w", err))
	case s := <-sigs:
		fmt.Fprintf(stderr, "agentbox serve: %v: closing every environment (press Ctrl-C again to force)\n", s)
	}
	shutdown(srv, o.Backends, sigs, stderr)
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return failErr(fmt.Errorf("serve: %w", err))
	}
	fmt.Fprintf(stderr, "agentbox serve: stopped\n")
	return nil
}

// shutdown closes every environment; a second signal removes this
// process's sandboxes at once and exits 130.
func shutdown(srv *serve.Server, backends []environment.Backend, sigs <-chan os.Signal, stderr io.Writer) {
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			fmt.Fprintf(stderr, "agentbox serve: forced stop: removing the sandboxes\n")
			for _, b := range backends {
				if r, ok := b.(environment.Reaper); ok {
					ctx, c := context.WithTimeout(context.Background(), 10*time.Second)
					_, _ = r.Reap(ctx, environment.ReapOptions{Mine: true})
					c()
				}
			}
			os.Exit(ExitInterrupted)
		case <-done:
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_ = srv.Shutdown(ctx)
	close(done)
}

// options are the server's options from the flags, every value checked.
func (f serveFlags) options(cmd *cobra.Command) (serve.Options, error) {
	var o serve.Options
	// The sandbox flags first, as every command checks them.
	so, err := f.validate()
	if err != nil {
		return o, err
	}
	vt, err := f.vault.load()
	if err != nil {
		return o, err
	}
	screen, res := so.env.Screen, so.env.Resources
	maxScreen, err := observe.ParseScreen(f.maxScreen)
	if err != nil {
		return o, usageErrorf("--max-screen %v", err)
	}
	if screen.Width > maxScreen.Width || screen.Height > maxScreen.Height {
		return o, usageErrorf("--screen %v is larger than --max-screen %v", screen, maxScreen)
	}
	maxUpload, err := parseSize("--max-upload", f.maxUpload)
	if err != nil {
		return o, err
	}
	for _, c := range []struct {
		name   string
		v      float64
		lo, hi float64
	}{
		{"--max-envs", float64(f.maxEnvs), 1, 4096},
		{"--max-uploads", float64(f.maxUploads), 1, 1024},
		{"--max-uploads-in-progress", float64(f.uploadsInProgress), 1, 1024},
		{"--upload-timeout", f.uploadTimeout.Seconds(), 1, 24 * 3600},
		{"--lease", f.lease.Seconds(), 0.1, 7 * 24 * 3600},
		{"--timeout", f.timeout.Seconds(), 0.001, 7 * 24 * 3600},
		{"--start-timeout", f.startTimeout.Seconds(), 0.001, 3600},
		{"--max-steps", float64(f.maxSteps), 1, 100_000_000},
		{"--max-rate", f.maxRate, 0, 1e6},
		{"--max-upload", float64(maxUpload), 1, 1 << 40},
		{"--pool", float64(f.pool), 0, pool.MaxSize},
		{"--pool-max", float64(f.poolMax), 0, pool.MaxSize},
	} {
		if err := checkRange(c.name, c.v, c.lo, c.hi, ""); err != nil {
			return o, err
		}
	}
	if f.maxRate == 0 {
		f.maxRate = -1 // no bound (serve's zero is its default)
	}
	if f.poolMax > 0 && f.poolMax < f.pool {
		return o, usageErrorf("--pool-max %d is below --pool %d", f.poolMax, f.pool)
	}
	if f.poolLaunch && f.pool == 0 {
		return o, usageErrorf("--pool-launch needs --pool")
	}
	if f.poolMax > 0 && f.pool == 0 {
		return o, usageErrorf("--pool-max needs --pool")
	}
	o = serve.Options{
		Env:       so.env,
		MaxScreen: maxScreen, MaxEnvironments: f.maxEnvs, MaxUploads: f.maxUploads, Lease: f.lease,
		UploadsInProgress: f.uploadsInProgress, UploadTimeout: f.uploadTimeout,
		MaxSteps: f.maxSteps, Timeout: f.timeout, StartTimeout: f.startTimeout, MaxRate: f.maxRate, LogCap: so.logCap, ReadyTimeout: f.readyTimeout, Settle: so.settle,
		UploadLimits: app.Limits{MaxFiles: app.DefaultLimits.MaxFiles, MaxBytes: min(maxUpload, int64(res.TmpfsMB)<<20*3/4)},
		Out:          f.out, AllowedHosts: f.allowHosts, Log: cmd.ErrOrStderr(), Pool: f.pool, PoolMax: f.poolMax, PoolLaunch: f.poolLaunch,
		RunID: func(name string) string {
			return newRunID(&app.Bundle{Manifest: app.Manifest{Command: name}, InImage: true})
		},
		Apps:  map[string]*app.Bundle{},
		Vault: vt,
	}
	for _, h := range f.allowHosts {
		if h == "" || strings.ContainsAny(h, ":/ ") {
			return o, usageErrorf("--allow-host %q: want a host name, without a port", h)
		}
	}
	for _, spec := range f.apps {
		name, dir, ok := strings.Cut(spec, "=")
		if !ok || name == "" || dir == "" || strings.ContainsAny(name, "/ ") {
			return o, usageErrorf("--app %q: want NAME=DIR", spec)
		}
		if _, dup := o.Apps[name]; dup {
			return o, usageErrorf("--app %s: registered twice", name)
		}
		b, err := loadApp(dir, res, nil)
		if err != nil {
			return o, usageErrorf("--app %s: %v", name, err)
		}
		o.Apps[name] = b
		if b.PolicyPath() != "" {
			p, err := policy.Load(b.PolicyPath())
			if err != nil {
				return o, usageErrorf("--app %s: the manifest's policy: %v", name, err)
			}
			if o.AppPolicies == nil {
				o.AppPolicies = map[string]*policy.Policy{}
			}
			o.AppPolicies[name] = p
		}
	}
	return o, nil
}

// serveTokens are the tokens the server accepts and where they came from.
type serveTokens struct {
	tokens []string
	// written is the --write-token file holding the token (none when
	// the tokens came from elsewhere); shared, when another agentbox serve
	// running with that file wrote it.
	written string
	shared  bool
	// lock is held while the server runs: the file's token is in use.
	lock *os.File
}

func (t serveTokens) release() {
	if t.lock != nil {
		t.lock.Close()
	}
}

// tokens are the tokens the server accepts: from --token-file, from
// AGENTBOX_TOKEN, or the token of --write-token (claimTokenFile).
func (f serveFlags) tokens() (serveTokens, error) {
	if f.tokenFile != "" {
		fi, err := os.Stat(f.tokenFile)
		if err != nil {
			return serveTokens{}, usageErrorf("--token-file: %v", err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return serveTokens{}, usageErrorf("--token-file %s is readable by others (mode %v): chmod 600 it", f.tokenFile, fi.Mode().Perm())
		}
		data, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return serveTokens{}, usageErrorf("--token-file: %v", err)
		}
		var tokens []string
		line := map[string]int{}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for n := 1; sc.Scan(); n++ {
			t := strings.TrimSpace(sc.Text())
			if t == "" || strings.HasPrefix(t, "#") {
				continue
			}
			if err := serve.CheckToken(t); err != nil {
				return serveTokens{}, usageErrorf("--token-file %s:%d: %v", f.tokenFile, n, err)
			}
			// A token is its owner: two lines with one token would be one
			// client sharing everything with another.
			if first, dup := line[t]; dup {
				return serveTokens{}, usageErrorf("--token-file %s:%d: the same token as line %d: give each client its own", f.tokenFile, n, first)
			}
			line[t] = n
			tokens = append(tokens, t)
		}
		if len(tokens) == 0 {
			return serveTokens{}, usageErrorf("--token-file %s holds no token", f.tokenFile)
		}
		return serveTokens{tokens: tokens}, nil
	}
	if t := os.Getenv(tokenEnv); t != "" {
		if err := serve.CheckToken(t); err != nil {
			return serveTokens{}, usageErrorf("%s: %v", tokenEnv, err)
		}
		return serveTokens{tokens: []string{t}}, nil
	}
	if f.writeToken == "" {
		return serveTokens{}, usageErrorf("no token: set %s, or give --token-file or --write-token", tokenEnv)
	}
	return claimTokenFile(f.writeToken)
}

// tokenLockWait bounds waiting for another agentbox serve that is writing
// the token file.
const tokenLockWait = 30 * time.Second

// claimTokenFile is the token of path for a server about to serve: a new
// one, written there (mode 0600), unless a running agentbox serve uses
// the file, whose token it is then (shared: the file is never replaced
// under a live server, whose clients read it). A server using the file
// holds a shared lock on path+".lock" while it runs; a server that would
// write it first takes that lock exclusively, which it gets only when no
// server holds it.
func claimTokenFile(path string) (serveTokens, error) {
	fail := func(err error) (serveTokens, error) {
		return serveTokens{}, failErr(fmt.Errorf("--write-token: %w", err))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fail(err)
	}
	lock, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fail(err)
	}
	fd := int(lock.Fd())
	wrote := ""
	switch err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); {
	case err == nil: // no server uses the file: a new token
		wrote = serve.NewToken()
		if err := atomicfile.WriteFile(path, []byte(wrote+"\n"), 0o600); err != nil {
			lock.Close()
			return fail(err)
		}
	case !errors.Is(err, syscall.EWOULDBLOCK):
		lock.Close()
		return fail(fmt.Errorf("locking %s: %w", lock.Name(), err))
	}
	// Shared from here on, for as long as this server runs. (Turning the
	// exclusive lock into a shared one lets go of it for a moment, so the
	// token is read again below, under the shared lock: whoever wrote
	// last held the exclusive one, and no one can take it now.)
	deadline := time.Now().Add(tokenLockWait)
	for {
		err := syscall.Flock(fd, syscall.LOCK_SH|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			lock.Close()
			return fail(fmt.Errorf("locking %s (another agentbox serve is writing the token): %w", lock.Name(), err))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t, err := readTokenFile(path)
	if err != nil {
		lock.Close()
		return fail(fmt.Errorf("an agentbox serve that is running uses %s, but %w", path, err))
	}
	return serveTokens{tokens: []string{t}, written: path, shared: t != wrote, lock: lock}, nil
}

// readTokenFile is the token a token file holds (its first line), if the
// file is private to its owner.
func readTokenFile(path string) (string, error) {
	fi, err := os.Lstat(path)
	switch {
	case err != nil:
		return "", err
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("it is not a regular file (%v)", fi.Mode().Type())
	case fi.Mode().Perm()&0o077 != 0:
		return "", fmt.Errorf("it is readable by others (mode %v)", fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	first, _, _ := strings.Cut(string(data), "\n")
	t := strings.TrimSpace(first)
	if err := serve.CheckToken(t); err != nil {
		return "", fmt.Errorf("its token: %w", err)
	}
	return t, nil
}
