package guestenv_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv"
	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

// journal records, in order, the requests the guest read and what the
// sandbox was asked to do.
type journal struct {
	mu      sync.Mutex
	entries []string
	buf     []byte // a partial frame read by the guest
}

func (j *journal) add(s string) {
	j.mu.Lock()
	j.entries = append(j.entries, s)
	j.mu.Unlock()
}

func (j *journal) String() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return strings.Join(j.entries, " ")
}

// Write parses the frames the guest reads and records each request's
// method (pings aside: they come when they will).
func (j *journal) Write(p []byte) (int, error) {
	j.buf = append(j.buf, p...)
	for len(j.buf) >= 4 {
		n := 4 + int(binary.BigEndian.Uint32(j.buf))
		if len(j.buf) < n {
			break
		}
		m, err := wire.ReadFrame(bufio.NewReader(bytes.NewReader(j.buf[:n])))
		j.buf = j.buf[n:]
		if err == nil && m.Type == wire.Request && m.Method != wire.MethodPing && m.Method != wire.MethodCancel {
			j.add(m.Method)
		}
	}
	return len(p), nil
}

// testSandbox is a sandbox around a scripted guest on pipes.
type testSandbox struct {
	j        *journal
	said     []string // what Explain adds
	ended    bool     // the sandbox has ended: Explain waits for the last words
	freezer  environment.Freezer
	hostW    *io.PipeWriter
	hostR    *io.PipeReader
	stderrW  *io.PipeWriter
	done     chan struct{}
	teardown int
}

func (s *testSandbox) Info() environment.Info {
	return environment.Info{ID: "test-1", Image: "img", Extra: map[string]string{"k": "v"}}
}

func (s *testSandbox) Explain(_ context.Context, lastWords <-chan struct{}) []string {
	if s.ended {
		select {
		case <-lastWords:
		case <-time.After(10 * time.Second):
		}
	}
	return s.said
}

func (s *testSandbox) Teardown(context.Context) error {
	s.j.add("teardown")
	s.teardown++
	s.hostW.Close()
	s.hostR.CloseWithError(errors.New("test sandbox torn down"))
	s.stderrW.Close()
	<-s.done
	return nil
}

// freezingSandbox can freeze when its freezer is not nil.
type freezingSandbox struct{ *testSandbox }

func (s freezingSandbox) Freezer() environment.Freezer { return s.freezer }

// testFreezer records freezing.
type testFreezer struct{ j *journal }

func (f testFreezer) Freeze(context.Context) error { f.j.add("freeze"); return nil }
func (f testFreezer) Thaw(context.Context) error   { f.j.add("thaw"); return nil }

// fixture is a scripted guest on pipes, its sandbox and its Env, not yet
// started.
type fixture struct {
	sb     *testSandbox
	e      *guestenv.Env
	stderr io.Writer // the guest's stderr
	stdout io.Reader // the guest's stdout, for Start
	stdin  io.Writer // the guest's stdin, for Start
}

// newFixture runs g on pipes. wrap, if set, turns the sandbox into the one
// the Env gets (to add optional interfaces).
func newFixture(t *testing.T, g *guestenvtest.Guest, o guestenv.Options, wrap func(*testSandbox) guestenv.Sandbox) *fixture {
	t.Helper()
	j := &journal{}
	hostR, guestW := io.Pipe()
	guestR, hostW := io.Pipe()
	errR, errW := io.Pipe()
	sb := &testSandbox{j: j, hostW: hostW, hostR: hostR, stderrW: errW, done: make(chan struct{})}
	go func() {
		defer close(sb.done)
		_ = g.Serve(io.TeeReader(guestR, j), guestW)
		guestW.CloseWithError(io.EOF)
		guestR.CloseWithError(io.ErrClosedPipe)
	}()
	if o.Backend == "" {
		o.Backend = "test"
	}
	if o.Config.Screen == (observe.Screen{}) {
		o.Config.Screen = observe.DefaultScreen
	}
	var s guestenv.Sandbox = sb
	if wrap != nil {
		s = wrap(sb)
	}
	e := guestenv.New(s, o)
	e.KeepStderr(errR)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.Close(ctx)
	})
	return &fixture{sb: sb, e: e, stderr: errW, stdout: hostR, stdin: hostW}
}

// TestEnvLifecycle: Start performs the handshake and brings up the
// display; Info joins the sandbox's part, the guest's and the timings;
// Close stops the guest, then tears the sandbox down, once.
func TestEnvLifecycle(t *testing.T) {
	ctx := t.Context()
	f := newFixture(t, &guestenvtest.Guest{}, guestenv.Options{Backend: "test", Began: time.Now().Add(-time.Second)}, nil)
	sb := f.sb
	f.e.Timing("sandbox_create", 1500*time.Millisecond)
	env, err := f.e.Start(ctx, f.stdout, f.stdin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := env.(environment.Freezer); ok {
		t.Error("an environment whose sandbox cannot freeze implements environment.Freezer")
	}
	info := env.Info()
	if info.Backend != "test" || info.ID != "test-1" || info.Image != "img" || info.Extra["k"] != "v" || info.Display != ":1" || !info.WM {
		t.Errorf("Info = %+v", info)
	}
	for _, k := range []string{"sandbox_create", "guest_hello", "xvfb", "wm", "total"} {
		if _, ok := info.Timings[k]; !ok {
			t.Errorf("Info.Timings has no %s: %v", k, info.Timings)
		}
	}
	if info.Timings["sandbox_create"] != 1500 || info.Timings["total"] < 1000 {
		t.Errorf("timings %v: want sandbox_create 1500 and total from Began", info.Timings)
	}
	if _, err := env.Act(ctx, action.Action{Kind: action.MouseMove, X: new(10), Y: new(10)}); err != nil {
		t.Fatal(err)
	}
	if f, st, err := env.Observe(ctx); err != nil || f.Width != 640 || !st.Running {
		t.Fatalf("Observe = %v, %+v, %v", f, st, err)
	}
	if err := env.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := env.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if got, want := sb.j.String(), "hello start act screenshot stop teardown"; got != want {
		t.Errorf("sequence %q, want %q", got, want)
	}
	if sb.teardown != 1 {
		t.Errorf("the sandbox was torn down %d times", sb.teardown)
	}
}

// TestEnvFreezer: the environment is an environment.Freezer exactly when
// the sandbox gives a freezer, and Close thaws a frozen sandbox before it
// asks the guest to stop.
func TestEnvFreezer(t *testing.T) {
	ctx := t.Context()
	for _, c := range []struct {
		name    string
		freezer bool
		want    string
	}{
		{"no freezer on this host", false, "hello start stop teardown"},
		{"a freezer", true, "hello start freeze thaw freeze thaw stop teardown"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var j *journal
			fx := newFixture(t, &guestenvtest.Guest{}, guestenv.Options{}, func(sb *testSandbox) guestenv.Sandbox {
				j = sb.j
				if c.freezer {
					sb.freezer = testFreezer{sb.j}
				}
				return freezingSandbox{sb}
			})
			env, err := fx.e.Start(ctx, fx.stdout, fx.stdin, nil)
			if err != nil {
				t.Fatal(err)
			}
			f, ok := env.(environment.Freezer)
			if ok != c.freezer {
				t.Fatalf("implements environment.Freezer: %v, want %v", ok, c.freezer)
			}
			if ok {
				if err := f.Freeze(ctx); err != nil {
					t.Fatal(err)
				}
				if err := f.Thaw(ctx); err != nil {
					t.Fatal(err)
				}
				if err := f.Freeze(ctx); err != nil { // left frozen: Close thaws
					t.Fatal(err)
				}
			}
			if err := env.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if got := j.String(); got != c.want {
				t.Errorf("sequence %q, want %q", got, c.want)
			}
		})
	}
}

// TestEnvExplain: a guest failure keeps its class (environment.ErrGuest)
// and gains what the sandbox says about how it ended and the guest's last
// stderr lines (at most 20), with the backend's label and hint.
func TestEnvExplain(t *testing.T) {
	ctx := t.Context()
	var logged []string
	var logMu sync.Mutex
	g := &guestenvtest.Guest{OnAct: func(w *guestenvtest.Writer) {
		_ = w.Raw([]byte{0xff, 0xff, 0xff, 0xff}) // a frame far above any bound: the stream ends
	}}
	f := newFixture(t, g, guestenv.Options{
		Said: "it said",
		Hint: func(tail string) string {
			if strings.Contains(tail, "namespace") {
				return " (a hint)"
			}
			return ""
		},
		Config: environment.Config{GuestLog: func(l string) {
			logMu.Lock()
			logged = append(logged, l)
			logMu.Unlock()
		}},
	}, nil)
	f.sb.said, f.sb.ended = []string{"sandbox exited (exit code 9)"}, true
	env, err := f.e.Start(ctx, f.stdout, f.stdin, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 25 {
		fmt.Fprintf(f.stderr, "line %d\n", i)
	}
	fmt.Fprintln(f.stderr, "no user namespace")
	f.sb.stderrW.Close() // the guest's last words
	_, err = env.Act(ctx, action.Action{Kind: action.MouseMove, X: new(1), Y: new(1)})
	if !errors.Is(err, environment.ErrGuest) {
		t.Fatalf("Act = %v, want an environment.ErrGuest", err)
	}
	msg := err.Error()
	for _, want := range []string{"; sandbox exited (exit code 9); it said:\n  line 6\n  line 7", "line 24\n  no user namespace (a hint)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "line 5\n") {
		t.Errorf("error %q quotes more than the last 20 lines", msg)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if len(logged) != 26 || logged[0] != "line 0" {
		t.Errorf("GuestLog got %d lines, first %q; want all 26", len(logged), logged)
	}
}

// TestEnvStartErrors: a guest that fails the handshake, or a backend's
// check after it, gives an explained error of its class; Close still tears
// the sandbox down.
func TestEnvStartErrors(t *testing.T) {
	ctx := t.Context()
	t.Run("afterHello", func(t *testing.T) {
		f := newFixture(t, &guestenvtest.Guest{}, guestenv.Options{}, nil)
		f.sb.said = []string{"the sandbox still runs"}
		check := fmt.Errorf("%w: the guest's limits: not set", environment.ErrGuest)
		_, err := f.e.Start(ctx, f.stdout, f.stdin, func(context.Context) error { return check })
		if !errors.Is(err, check) || !strings.Contains(err.Error(), "the sandbox still runs") {
			t.Fatalf("Start = %v", err)
		}
		if err := f.e.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if got, want := f.sb.j.String(), "hello stop teardown"; got != want {
			t.Errorf("sequence %q, want %q (no display started)", got, want)
		}
	})
	t.Run("no hello", func(t *testing.T) {
		f := newFixture(t, &guestenvtest.Guest{}, guestenv.Options{}, nil)
		fmt.Fprintln(f.stderr, "exec format error")
		f.sb.stderrW.Close()
		f.sb.ended = true
		_, err := f.e.Start(ctx, strings.NewReader(""), f.stdin, nil)
		if !errors.Is(err, environment.ErrGuest) || !strings.Contains(err.Error(), "exited before saying hello") ||
			!strings.Contains(err.Error(), "guest said:\n  exec format error") {
			t.Fatalf("Start = %v", err)
		}
		if err := f.e.Close(ctx); err != nil || f.sb.teardown != 1 {
			t.Fatalf("Close = %v, %d teardowns", err, f.sb.teardown)
		}
	})
	t.Run("never started", func(t *testing.T) {
		f := newFixture(t, &guestenvtest.Guest{}, guestenv.Options{}, nil)
		if err := f.e.Close(ctx); err != nil || f.sb.teardown != 1 {
			t.Fatalf("Close = %v, %d teardowns", err, f.sb.teardown)
		}
	})
}

// TestEnvStopFails: a guest that answers stop with an error is torn down
// all the same; what counts is that nothing is left, so Close succeeds and
// the failed stop goes to the guest log.
func TestEnvStopFails(t *testing.T) {
	ctx := t.Context()
	var (
		logMu  sync.Mutex
		logged []string
	)
	g := &guestenvtest.Guest{OnStop: func(w *guestenvtest.Writer, m *wire.Message) bool {
		_ = w.Frame(&wire.Header{Type: wire.Response, ID: m.ID, Method: m.Method,
			Error: &wire.RemoteError{Code: wire.CodeTimeout, Message: "the app did not exit"}}, nil)
		return true
	}}
	f := newFixture(t, g, guestenv.Options{Config: environment.Config{GuestLog: func(l string) {
		logMu.Lock()
		logged = append(logged, l)
		logMu.Unlock()
	}}}, nil)
	env, err := f.e.Start(ctx, f.stdout, f.stdin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Close(ctx); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if f.sb.teardown != 1 {
		t.Errorf("%d teardowns", f.sb.teardown)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if len(logged) != 1 || !strings.Contains(logged[0], "the app did not exit") {
		t.Errorf("guest log %q", logged)
	}
}

// TestEnvStagesBehindStart: with Config.Stage the app's files are sent
// right behind the display's start, before its answer (the guest answers
// in turn), their answers are all waited for within Start, and the
// launch of the same files sends none of them again; another bundle is
// sent at its launch as before.
func TestEnvStagesBehindStart(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	big := bytes.Repeat([]byte("agentbox"), 5<<17) // 5 MiB: five chunks
	if err := os.WriteFile(filepath.Join(dir, "game"), big, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "level.txt"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command": "game"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := app.Load(dir, app.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	f := newFixture(t, &guestenvtest.Guest{}, guestenv.Options{Config: environment.Config{Stage: b}}, nil)
	env, err := f.e.Start(ctx, f.stdout, f.stdin, nil)
	if err != nil {
		t.Fatal(err)
	}
	writes := 5 + len(b.Files) - 1 // the game's chunks, the others one each
	want := "hello start" + strings.Repeat(" write_file", writes)
	if got := f.sb.j.String(); got != want {
		t.Fatalf("sequence %q, want %q", got, want)
	}
	if _, ok := env.Info().Timings["stage"]; !ok {
		t.Errorf("Info.Timings has no stage: %v", env.Info().Timings)
	}
	r, err := env.Launch(ctx, environment.LaunchSpec{App: b})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.sb.j.String(); got != want+" launch" {
		t.Errorf("the launch of the staged files sent more: %q", strings.TrimPrefix(got, want))
	}
	sum := sha256.Sum256(big)
	regular := 0
	for _, f := range b.Files {
		if f.Mode.IsRegular() {
			regular++
		}
	}
	if r.Files["game"] != hex.EncodeToString(sum[:]) || len(r.Files) != regular {
		t.Errorf("Files = %v", r.Files)
	}
}
