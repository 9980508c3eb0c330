package e2e

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/client"
	"github.com/codegirl-games/agentbox/internal/cpuload"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/serve/api"
	"github.com/codegirl-games/agentbox/trace"
)

// served is a running `agentbox serve`.
type served struct {
	cmd   *exec.Cmd
	url   string
	token string
	done  chan struct{}
	code  int

	mu     sync.Mutex
	stderr strings.Builder
}

func (s *served) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

var listening = regexp.MustCompile(`listening on (https?://\S+)`)

// startServe starts the agentbox binary's serve with args (plus a token
// file of its own) and waits until it listens. The test's end kills it if
// it still runs.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	return launchServe(t, tokenFile, nil, append([]string{"--listen", "127.0.0.1:0", "--write-token", tokenFile}, args...)...)
}

// spawnServe starts `agentbox serve args…` with env added to the test's
// environment (AGENTBOX_TOKEN empty) and waits until it listens. The
// test's end kills it if it still runs.
func spawnServe(t *testing.T, env []string, args ...string) *served {
	t.Helper()
	bin := testenv.Build(t, "./cmd/agentbox")
	s := &served{done: make(chan struct{})}
	s.cmd = exec.Command(bin, append([]string{"serve"}, args...)...)
	s.cmd.Env = append(append(os.Environ(), "AGENTBOX_TOKEN="), env...)
	pr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.stderr.WriteString(line + "\n")
			s.mu.Unlock()
			if m := listening.FindStringSubmatch(line); m != nil {
				urls <- m[1]
			}
		}
		s.cmd.Wait()
		s.code = s.cmd.ProcessState.ExitCode()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-s.done
	})
	select {
	case s.url = <-urls:
	case <-s.done:
		t.Fatalf("agentbox serve ended before listening (exit %d):\n%s", s.code, s.log())
	case <-time.After(2 * time.Minute):
		t.Fatalf("agentbox serve did not listen within 2 minutes:\n%s", s.log())
	}
	return s
}

// launchServe starts `agentbox serve args…` with env added to the
// test's environment (AGENTBOX_TOKEN empty), waits until it listens and
// reads its token from tokenFile.
func launchServe(t *testing.T, tokenFile string, env []string, args ...string) *served {
	t.Helper()
	s := spawnServe(t, env, args...)
	fi, err := os.Stat(tokenFile)
	if err != nil {
		t.Fatalf("the token file: %v\n%s", err, s.log())
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the token file has mode %v, want 0600", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(tokenFile)
	s.token = strings.TrimSpace(string(data))
	if strings.Contains(s.log(), s.token) {
		t.Errorf("the token was printed:\n%s", s.log())
	}
	return s
}

// stop sends SIGTERM and returns the exit code.
func (s *served) stop(t *testing.T) int {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("agentbox serve did not stop within 3 minutes of SIGTERM:\n%s", s.log())
	}
	return s.code
}

// TestServeRejectedBeforeStart: what serve refuses before it listens for
// long (in-process, no daemon asked): an address beyond loopback without
// TLS or --insecure, half a TLS pair, a token file others may read, a
// token too short, a bad --app.
func TestServeRejectedBeforeStart(t *testing.T) {
	dir := t.TempDir()
	readable := filepath.Join(dir, "readable")
	os.WriteFile(readable, []byte("a-token-long-enough-0123456789\n"), 0o644)
	private := filepath.Join(dir, "private")
	os.WriteFile(private, []byte("short\n"), 0o600)
	twice := filepath.Join(dir, "twice")
	os.WriteFile(twice, []byte("a-token-long-enough-0123456789\nanother-token-0123456789\n# the first again\na-token-long-enough-0123456789\n"), 0o600)
	for _, tt := range []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"beyond loopback in the clear", []string{"--listen", "0.0.0.0:0"}, "", "beyond loopback: give --tls-cert and --tls-key, or --insecure"},
		{"a cert without its key", []string{"--tls-cert", "c.pem"}, "", "--tls-cert and --tls-key go together"},
		{"a token file others may read", []string{"--token-file", readable}, "", "readable by others"},
		{"a short token in a file", []string{"--token-file", private}, "", "at least 16 characters"},
		{"a short token in the environment", nil, "short", "AGENTBOX_TOKEN: serve: a token must have at least 16"},
		{"an app without its directory", []string{"--app", "mover"}, "", "--app \"mover\": want NAME=DIR"},
		{"an app that is not there", []string{"--app", "m=" + filepath.Join(dir, "nothing")}, "", "--app m:"},
		{"a screen above the most", []string{"--screen", "1920x1080", "--max-screen", "640x480"}, "", "larger than --max-screen"},
		{"no environments", []string{"--max-envs", "0"}, "", "--max-envs"},
		{"one token twice in a token file", []string{"--token-file", twice}, "", twice + ":4: the same token as line 1"},
		{"no upload timeout", []string{"--upload-timeout", "0s"}, "", "--upload-timeout"},
		{"no uploads in progress", []string{"--max-uploads-in-progress", "0"}, "", "--max-uploads-in-progress"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("AGENTBOX_TOKEN", tt.env)
			args := append([]string{"serve", "--backend", "docker", "--listen", "127.0.0.1:0", "--write-token", filepath.Join(t.TempDir(), "t")}, tt.args...)
			r := cliMain(t, args...)
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("want exit 2 saying %q:\n%s", tt.want, r)
			}
		})
	}
}

// TestServeEndToEnd: the real binary serves the mover on Docker; a Go
// client plays an episode over the WebSocket (a key held across steps), a
// second environment is left open, a request without the token is refused;
// SIGTERM closes everything (exit 0), finalises the traces and leaves no
// container; a served trace works with view, export and replay like a
// run's.
//
// The replay replays a second episode, of the mover that moves a fixed
// distance per key press (-step): the held key's episode moves by time ×
// speed, and its screen in the middle of the hold depends on how the
// machine kept time in both runs (CI at 2721484 saw its replay's square 34
// px from the recording's, 168 ms at 200 px/s: a divergence with nothing
// wrong). The stepping mover's screens depend on the keys alone, so its
// replay must match.
func TestServeEndToEnd(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	out := t.TempDir()
	s := startServe(t, "--backend", "docker", "--app", "mover="+moverApp(t, ""), "--app", "stepper="+moverApp(t, moverStep60Manifest), "--out", out)
	c, err := client.New(s.url, s.token)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	env, err := c.Create(ctx, api.CreateRequest{App: "mover", Task: "Move the character right."})
	if err != nil {
		t.Fatalf("%v\n%s", err, s.log())
	}
	obs, info, err := env.Reset(ctx)
	if err != nil {
		t.Fatal(err)
	}
	x0, _, _ := obs.Screen.Centroid(green)
	for _, a := range []action.Action{
		{Kind: action.KeyDown, Key: "Right"},
		{Kind: action.Wait, MS: 1000},
		{Kind: action.KeyUp, Key: "Right"},
	} {
		if obs, _, _, _, _, err = env.Step(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	x1, _, _ := obs.Screen.Centroid(green)
	if x1-x0 < 100 {
		t.Errorf("the square moved %.1f px, want ≥ 100", x1-x0)
	}
	if _, _, terminated, _, _, err := env.Step(ctx, action.Action{Kind: action.Done, Message: "moved"}); err != nil || !terminated {
		t.Fatalf("done: %v, terminated %v", err, terminated)
	}
	stepped := playStepper(t, c)
	open, err := c.Create(ctx, api.CreateRequest{App: "mover"})
	if err != nil {
		t.Fatal(err)
	}
	openInfo, _ := open.Info(ctx)

	resp, err := http.Get(s.url + "/v1/envs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("a request without the token: %s", resp.Status)
	}

	if code := s.stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0:\n%s", code, s.log())
	}
	done := openTrace(t, info.Trace)
	if done.Incomplete || done.Run.Outcome != trace.Success || len(done.Steps) != 4 || len(done.Missing) > 0 {
		t.Errorf("the finished episode: incomplete %v, %s, %d steps, missing %v", done.Incomplete, done.Run.Outcome, len(done.Steps), done.Missing)
	}
	steps := openTrace(t, stepped)
	if steps.Incomplete || steps.Run.Outcome != trace.Success || len(steps.Steps) != 3 {
		t.Errorf("the stepping episode: incomplete %v, %s, %d steps", steps.Incomplete, steps.Run.Outcome, len(steps.Steps))
	}
	cut := openTrace(t, openInfo.Trace)
	if cut.Incomplete || cut.Run.Outcome != trace.Interrupted || cut.Run.Reason != trace.ReasonSignal {
		t.Errorf("the environment left open: incomplete %v, %s/%s", cut.Incomplete, cut.Run.Outcome, cut.Run.Reason)
	}
	assertNoContainers(t, done.Run.ID)
	assertNoContainers(t, steps.Run.ID)
	assertNoContainers(t, cut.Run.ID)

	// The trace is a run's: view, export and replay take it.
	if r := agentbox(t, "view", info.Trace, "--out", filepath.Join(t.TempDir(), "report.html")); r.code != 0 {
		t.Errorf("view: %s", r)
	}
	if r := agentbox(t, "export", info.Trace, "--video", filepath.Join(t.TempDir(), "run.gif")); r.code != 0 {
		t.Errorf("export: %s", r)
	}
	replayed := filepath.Join(t.TempDir(), "replay")
	if r := agentbox(t, "replay", stepped, "--out", replayed); r.code != 0 {
		t.Errorf("replay of the served episode: %s", r)
	} else if sum := readSummary(t, replayed); sum.Verdict != "matched" || sum.Replayed != 3 {
		t.Errorf("replay of the served episode: %s, %d steps replayed", sum.Verdict, sum.Replayed)
	}
	assertNoContainers(t, openTrace(t, replayed).Run.ID)
}

// playStepper plays an episode of the stepping mover ("stepper") over the
// WebSocket: two taps of Right (60 px each), then done, each screen taken
// once it has been still for a second (a loaded machine's mover may draw
// late; TestReplay records with the same settle). It returns the trace.
func playStepper(t *testing.T, c *client.Client) string {
	t.Helper()
	ctx := t.Context()
	env, err := c.Create(ctx, api.CreateRequest{App: "stepper", Task: "Step right twice.", Settle: "stable:1s"})
	if err != nil {
		t.Fatal(err)
	}
	obs, info, err := env.Reset(ctx)
	if err != nil {
		t.Fatal(err)
	}
	x0, _, _ := obs.Screen.Centroid(green)
	for range 2 {
		if obs, _, _, _, _, err = env.Step(ctx, action.Action{Kind: action.Key, Keys: "Right"}); err != nil {
			t.Fatal(err)
		}
	}
	if x1, _, _ := obs.Screen.Centroid(green); x1-x0 != 120 {
		t.Errorf("stepper: the square moved %.1f px after two presses, want 120", x1-x0)
	}
	if _, _, terminated, _, _, err := env.Step(ctx, action.Action{Kind: action.Done, Message: "stepped"}); err != nil || !terminated {
		t.Fatalf("stepper: done: %v, terminated %v", err, terminated)
	}
	return info.Trace
}

// green matches the mover's square.
func green(r, g, b uint8) bool { return g > 180 && r < 80 && b < 80 }

// TestServeTokenFile (issue 22, finding 5): a second agentbox serve
// never locks out the first one's clients by replacing the token file
// they read (the default one, $XDG_RUNTIME_DIR/agentbox/serve.token). On
// the first's address it fails ("address already in use") before
// touching the file; on another address it shares the first's token.
// With no server running, the next one writes a new token.
func TestServeTokenFile(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	runtimeDir := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", runtimeDir)
	t.Setenv("AGENTBOX_TOKEN", "")
	tokenFile := api.DefaultTokenFile()
	if !strings.HasPrefix(tokenFile, runtimeDir) {
		t.Fatalf("the default token file %s is not under XDG_RUNTIME_DIR", tokenFile)
	}
	env := []string{"XDG_RUNTIME_DIR=" + runtimeDir}
	args := []string{"--backend", "docker"}
	// reaches says whether a client reading the default token file (as
	// the Go and Python clients do) is served at url.
	reaches := func(url string) error {
		t.Setenv("AGENTBOX_URL", url)
		c, err := client.FromEnv()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err = c.Server(ctx)
		return err
	}
	first := launchServe(t, tokenFile, env, append([]string{"--listen", "127.0.0.1:0"}, args...)...)
	if err := reaches(first.url); err != nil {
		t.Fatalf("the first server, before: %v", err)
	}

	// A second one on the same address.
	addr := strings.TrimPrefix(first.url, "http://")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.Build(t, "./cmd/agentbox"), append([]string{"serve", "--listen", addr}, args...)...)
	cmd.Env = append(append(os.Environ(), "AGENTBOX_TOKEN="), env...)
	out, err := cmd.CombinedOutput()
	if err == nil || cmd.ProcessState.ExitCode() == 0 || !strings.Contains(string(out), "address already in use") {
		t.Errorf("a second server on %s: %v, want a failure saying the address is in use:\n%s", addr, err, out)
	}
	if data, _ := os.ReadFile(tokenFile); strings.TrimSpace(string(data)) != first.token {
		t.Errorf("the second server, which could not listen, replaced the token file")
	}
	if err := reaches(first.url); err != nil {
		t.Errorf("the first server's clients after a second one failed to start: %v", err)
	}

	// A second one on another address shares the token.
	second := launchServe(t, tokenFile, env, append([]string{"--listen", "127.0.0.1:0"}, args...)...)
	if second.token != first.token {
		t.Errorf("a second server on another address replaced the token file")
	}
	says := func(s *served, what string) bool {
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if strings.Contains(s.log(), what) {
				return true
			}
		}
		return false
	}
	if !says(second, "the token is in "+tokenFile+" (that of the agentbox serve already running with it)") {
		t.Errorf("the second server does not say it shares the token:\n%s", second.log())
	}
	for _, s := range []*served{first, second} {
		if err := reaches(s.url); err != nil {
			t.Errorf("%s with the token file: %v", s.url, err)
		}
	}

	// Neither runs any more: the next server writes a token of its own.
	for _, s := range []*served{first, second} {
		if code := s.stop(t); code != 0 {
			t.Errorf("%s exited %d:\n%s", s.url, code, s.log())
		}
	}
	third := launchServe(t, tokenFile, env, append([]string{"--listen", "127.0.0.1:0"}, args...)...)
	if third.token == first.token || !says(third, "the token is in "+tokenFile+"\n") {
		t.Errorf("with no server running, the next one did not make a new token:\n%s", third.log())
	}
	if err := reaches(third.url); err != nil {
		t.Errorf("the third server: %v", err)
	}
}

// TestServeTLS: beyond loopback the server speaks TLS; a client that
// trusts its certificate plays, one that speaks plain HTTP gets nothing.
func TestServeTLS(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	cert, key, pool := selfSigned(t)
	s := startServe(t, "--backend", "docker", "--app", "mover="+moverApp(t, ""), "--out", t.TempDir(),
		"--tls-cert", cert, "--tls-key", key, "--listen", "0.0.0.0:0")
	if !strings.HasPrefix(s.url, "https://") {
		t.Fatalf("listening on %s", s.url)
	}
	port := s.url[strings.LastIndex(s.url, ":")+1:]
	base := "https://127.0.0.1:" + port
	c, err := client.New(base, s.token, client.WithHTTPClient(&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}))
	if err != nil {
		t.Fatal(err)
	}
	env, err := c.Create(t.Context(), api.CreateRequest{App: "mover"})
	if err != nil {
		t.Fatalf("%v\n%s", err, s.log())
	}
	if _, _, err := env.Reset(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, _, _, _, _, err := env.Step(t.Context(), action.Action{Kind: action.Key, Keys: "Right"}); err != nil {
		t.Fatal(err)
	}
	info, _ := env.Info(t.Context())
	if resp, err := http.Get("http://127.0.0.1:" + port + "/v1/server"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("plain HTTP was served: %s", body)
		}
	}
	if code := s.stop(t); code != 0 {
		t.Errorf("exit %d:\n%s", code, s.log())
	}
	assertNoContainers(t, info.RunID)
}

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agentbox test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(k)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	parsed, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(parsed)
	return certFile, keyFile, pool
}

// TestServeLoad: 16 clients step their own environments concurrently for
// a minute over WebSockets, each moving the pointer to points of its own:
// every answer is the client's (its environment, the next step number,
// the pointer where it asked), every step a client got back is in its
// trace and nothing else, and once the server has stopped no sandbox is
// left.
//
// The server keeps a warm pool (--pool 4) and each client resets its
// environment every resetEvery steps or resetAfter, whichever comes
// first (on a loaded machine 16 clients may step at 2.5 steps/s each: a
// reset by steps alone never came, and no episode could start in a
// pooled sandbox — seen on a fresh-clone CI run): every episode starts in a sandbox
// of its own (pooled or, when the pool is empty, cold), none reused, and
// neither the pool's nor the episodes' sandboxes are left afterwards.
func TestServeLoad(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage), testenv.Slow("16 sandboxes stepped for a minute"))
	const clients, resetEvery, resetAfter = 16, 150, 15 * time.Second
	duration := time.Minute
	s := startServe(t, "--backend", "docker", "--app", "mover="+moverApp(t, ""), "--out", t.TempDir(),
		"--max-envs", fmt.Sprint(clients), "--start-timeout", "5m", "--max-rate", "0", "--pool", "4")
	poolPrefix := poolRunIDs.FindStringSubmatch(s.log())
	if poolPrefix == nil {
		t.Fatalf("the server did not say its pool's run IDs:\n%s", s.log())
	}
	c, err := client.New(s.url, s.token)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	type episode struct {
		steps        int
		trace, runID string
	}
	type result struct {
		steps    int // over all episodes
		episodes []episode
		err      error
		elapsed  time.Duration
	}
	results := make([]result, clients)
	var ready, wg sync.WaitGroup
	start := make(chan struct{})
	ready.Add(clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &results[i]
			env, err := c.Create(ctx, api.CreateRequest{App: "mover"})
			if err != nil {
				r.err = fmt.Errorf("create: %w", err)
				ready.Done()
				return
			}
			defer env.Close(context.WithoutCancel(ctx))
			_, info, err := env.Reset(ctx)
			ready.Done()
			if err != nil {
				r.err = err
				return
			}
			r.episodes = append(r.episodes, episode{trace: info.Trace, runID: info.RunID})
			<-start
			t0 := time.Now()
			epStart := t0
			for time.Since(t0) < duration {
				ep := &r.episodes[len(r.episodes)-1]
				if ep.steps == resetEvery || ep.steps > 0 && time.Since(epStart) > resetAfter {
					epStart = time.Now()
					_, info, err := env.Reset(ctx)
					if err != nil {
						r.err = fmt.Errorf("reset after %d steps: %w", r.steps, err)
						return
					}
					r.episodes = append(r.episodes, episode{trace: info.Trace, runID: info.RunID})
					ep = &r.episodes[len(r.episodes)-1]
				}
				step := ep.steps + 1
				x, y := 20+i*37, 20+(step*13)%440 // a column of its own
				obs, _, terminated, truncated, info, err := env.Step(ctx, action.Action{Kind: action.MouseMove, X: &x, Y: &y})
				switch {
				case err != nil:
					r.err = fmt.Errorf("step %d: %w", step, err)
				case terminated || truncated:
					r.err = fmt.Errorf("step %d ended the episode: %+v", step, info.Ended)
				case obs.Env != env.ID() || info.Step != step || obs.Step != step+1:
					r.err = fmt.Errorf("step %d: an answer for environment %s, step %d, observation %d", step, obs.Env, info.Step, obs.Step)
				case info.Result == nil || info.Result.Cursor == nil || *info.Result.Cursor != (action.Point{X: x, Y: y}) || obs.Cursor != (action.Point{X: x, Y: y}):
					r.err = fmt.Errorf("step %d: moved to (%d,%d), the answer says %+v / %+v", step, x, y, info.Result, obs.Cursor)
				}
				if r.err != nil {
					return
				}
				ep.steps = step
				r.steps++
			}
			r.elapsed = time.Since(t0)
		}()
	}
	ready.Wait()
	// The machine is as busy as a loaded CI runner while they step.
	cpuload.Start(t, 1)
	close(start)
	wg.Wait()
	total, episodes := 0, 0
	for i, r := range results {
		if r.err != nil {
			t.Errorf("client %d: %v", i, r.err)
			continue
		}
		total += r.steps
		episodes += len(r.episodes)
		t.Logf("client %d: %d steps in %d episodes in %v (%.1f steps/s)", i, r.steps, len(r.episodes), r.elapsed.Round(time.Millisecond), float64(r.steps)/r.elapsed.Seconds())
	}
	t.Logf("%d clients, %d steps in %d episodes in a minute", clients, total, episodes)
	info, err := c.Server(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the pool: %+v", *info.Pool)
	if info.Pool.Warm == 0 {
		t.Errorf("no episode started in a pooled sandbox: %+v", *info.Pool)
	}
	if code := s.stop(t); code != 0 {
		t.Errorf("exit %d:\n%s", code, s.log())
	}
	sandboxes := map[string]string{} // sandbox ID → the episode's trace
	for i, r := range results {
		for _, ep := range r.episodes {
			tr := openTrace(t, ep.trace)
			if tr.Incomplete || len(tr.Steps) != ep.steps {
				t.Errorf("client %d, %s: the trace has %d steps (incomplete %v), the client got %d answers", i, ep.runID, len(tr.Steps), tr.Incomplete, ep.steps)
			}
			for _, st := range tr.Steps {
				if st.Result == nil || st.Actor != trace.ActorRemote {
					t.Errorf("client %d, %s, step %d: result %v, actor %q", i, ep.runID, st.Step, st.Result != nil, st.Actor)
					break
				}
			}
			if prev, ok := sandboxes[tr.Run.Env.ID]; ok || tr.Run.Env.ID == "" {
				t.Errorf("client %d, %s: sandbox %q, which %s had too", i, ep.runID, tr.Run.Env.ID, prev)
			}
			sandboxes[tr.Run.Env.ID] = ep.trace
			assertNoContainers(t, ep.runID)
		}
	}
	assertNoContainers(t, poolPrefix[1]+"-*")
	if errs := strings.Count(s.log(), "panic"); errs > 0 {
		t.Errorf("the server panicked:\n%s", s.log())
	}
}
