// Package envtest is the conformance suite every environment backend runs:
// lifecycle, staging, every action kind checked against real X11
// applications nobody here wrote (xev, xterm, xcalc), screenshots, output,
// exit reporting, deadlines, cleanup, and the isolation posture checked
// from inside with a probe (identity, capabilities, namespaces, read-only
// system, capped tmpfs, no egress, a fork bomb, detached daemons, an
// output flood — each negative check with a positive control that shows
// the probe itself works), and the network by policy where the backend
// declares it (no rule: only the forward; an allowlist: exactly the
// allowed host; a direct dial: nothing; Chromium opening a forwarded
// page). A new backend starts from this failing list,
// not from a blank page:
//
//	func TestConformance(t *testing.T) {
//		envtest.Run(t, envtest.Options{Backend: &mybackend.Backend{}, Config: …})
//	}
//
// The apps come from the test image (agentbox image build --test) or, for a
// backend without images, from the host.
package envtest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
)

// Options configure the suite.
type Options struct {
	Backend environment.Backend
	// Config is the base configuration of every environment the suite
	// creates (image, guest binary, …); Events and RunID are set per test.
	Config environment.Config
	// Mover is the path of a built mover demo binary.
	Mover string
	// Gone reports whether the sandbox described by info no longer exists
	// (checked after Close); nil skips the check.
	Gone func(ctx context.Context, info environment.Info) (bool, error)
	// Leftovers lists what of the run named runID still exists on the host
	// (containers, processes); the cleanup tests call it after Create
	// failed half-way. nil skips those checks.
	Leftovers func(ctx context.Context, runID string) ([]string, error)
	// Posture is what the backend promises about its sandbox beyond what
	// every backend must do; the Isolation tests hold it to that.
	Posture Posture
	// Probe is the path of the built isolation probe
	// (./environment/envtest/probe); empty builds it.
	Probe string
	// PIDs is the process limit of the backend's sandboxes when it cannot
	// hold one to Resources.PIDs (Capabilities().Limits.PIDs is false): a
	// cluster's per-Pod limit. The ForkBomb test expects the bomb to stop
	// below it; 0 means the sandbox's Resources.PIDs.
	PIDs int
}

// Posture is what a backend promises about its sandbox's isolation where
// backends may differ; what it can do (images, freezing, reaping, …) it
// declares in its environment.Capabilities, which the suite holds it to.
// What all must do is not here: a non-root uid or a user namespace,
// no effective capabilities, no new privileges, only lo, private PID,
// network, IPC, UTS and mount namespaces, a read-only system, a writable
// size-capped tmpfs /tmp and /dev/shm, no host environment, files or D-Bus,
// no egress, processes bounded, daemons gone after Close, output capped.
type Posture struct {
	// UserNamespace: the sandbox runs in a user namespace of its own.
	UserNamespace bool
	// Seccomp: a seccomp filter is in force (Seccomp: 2).
	Seccomp bool
	// GuestSurvivesForkBomb: the guest keeps answering while the app holds
	// every process the sandbox may have. (A Go guest aborts when it cannot
	// create a thread it needs; the local backend starts its guest with
	// threads in reserve.)
	GuestSurvivesForkBomb bool
	// PodInterface: the sandbox has one network interface beside lo, as
	// every Kubernetes Pod has; its traffic is held by policy and the
	// network plugin, which the Egress test checks from inside.
	PodInterface bool
}

// Run runs every conformance test as a subtest of t.
func Run(t *testing.T, o Options) {
	s := &suite{o: o}
	for _, c := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"Capabilities", s.testCapabilities},
		{"Lifecycle", s.testLifecycle},
		{"StagingAndOutput", s.testStagingAndOutput},
		{"GLX", s.testGLX},
		{"LaunchErrors", s.testLaunchErrors},
		{"Waits", s.testWaits},
		{"TypeEveryCharacter", s.testTypeEveryCharacter},
		{"KeysAndChords", s.testKeysAndChords},
		{"Mouse", s.testMouse},
		{"InputUnderLoad", s.testInputUnderLoad},
		{"Xterm", s.testXterm},
		{"Xcalc", s.testXcalc},
		{"Deadlines", s.testDeadlines},
		{"FreezeThaw", s.testFreezeThaw},
		{"Cleanup", s.testCleanup},
		{"Isolation", s.testIsolation},
		{"Network", s.testNetwork},
		{"VirtualClock", s.testVirtualClock},
		{"Observer", s.testObserver},
		{"RelaunchFloor", s.testRelaunchFloor},
	} {
		t.Run(c.name, c.f)
	}
}

type suite struct{ o Options }

// sink collects an environment's events.
type sink struct {
	mu      sync.Mutex
	out     map[observe.Stream]*bytes.Buffer
	dropped map[observe.Stream]int64
	exit    *observe.Exit
	windows []string
	net     []observe.NetEvent
	changed chan struct{}
}

func newSink() *sink {
	return &sink{out: map[observe.Stream]*bytes.Buffer{observe.Stdout: {}, observe.Stderr: {}}, dropped: map[observe.Stream]int64{}, changed: make(chan struct{}, 1)}
}

func (s *sink) poke() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *sink) Output(st observe.Stream, d []byte, dropped int64) {
	s.mu.Lock()
	s.out[st].Write(d)
	s.dropped[st] += dropped
	s.mu.Unlock()
	s.poke()
}

func (s *sink) Exited(e observe.Exit) {
	s.mu.Lock()
	s.exit = &e
	s.mu.Unlock()
	s.poke()
}

func (s *sink) Window(kind string, w observe.Window) {
	s.mu.Lock()
	s.windows = append(s.windows, kind+":"+w.Title)
	s.mu.Unlock()
	s.poke()
}

func (s *sink) stdout() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out[observe.Stdout].String()
}

func (s *sink) stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out[observe.Stderr].String()
}

func (s *sink) exited() *observe.Exit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exit
}

// waitFor polls cond until it holds or d passes.
func (s *sink) waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.After(d)
	for !cond() {
		select {
		case <-s.changed:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			return cond()
		}
	}
	return true
}

// box is one environment under test.
type box struct {
	t    *testing.T
	env  environment.Environment
	sink *sink
	ctx  context.Context
	cfg  environment.Config
}

// config is the suite's configuration for a new environment of test t,
// with a run ID of its own.
func (s *suite) config(t *testing.T) environment.Config {
	cfg := s.o.Config
	cfg.Events = newSink()
	cfg.RunID = "envtest-" + strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()) + "-" + time.Now().Format("150405.000000")
	return cfg
}

// newBox creates an environment; it is closed (and checked gone) when the
// test ends. Options change the suite's configuration for this box.
func (s *suite) newBox(t *testing.T, opts ...func(*environment.Config)) *box {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cfg := s.config(t)
	for _, o := range opts {
		o(&cfg)
	}
	env, err := s.o.Backend.Create(ctx, cfg)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	b := &box{t: t, env: env, sink: cfg.Events.(*sink), ctx: ctx, cfg: cfg}
	t.Cleanup(func() {
		cctx, c := context.WithTimeout(context.Background(), 30*time.Second)
		defer c()
		info := env.Info()
		if err := env.Close(cctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		if s.o.Gone != nil {
			gone, err := s.o.Gone(cctx, info)
			if err != nil || !gone {
				t.Errorf("the sandbox %s still exists after Close (%v)", info.ID, err)
			}
		}
	})
	return b
}

// inImage launches a program of the image.
func (b *box) inImage(cmd string, args []string, title string) environment.LaunchResult {
	b.t.Helper()
	m := app.Manifest{Command: cmd, Args: args, WindowTitle: title}
	r, err := b.env.Launch(b.ctx, environment.LaunchSpec{App: &app.Bundle{Target: cmd, InImage: true, Manifest: m}, ReadyTimeout: 20 * time.Second})
	if err != nil {
		b.t.Fatalf("launch %s: %v\nstderr: %s", cmd, err, b.sink.stderr())
	}
	return r
}

// staged launches an app directory built by the test.
func (b *box) staged(dir string, timeout time.Duration) (environment.LaunchResult, error) {
	b.t.Helper()
	bundle, err := app.Load(dir, app.DefaultLimits)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { bundle.Close() })
	return b.env.Launch(b.ctx, environment.LaunchSpec{App: bundle, ReadyTimeout: timeout, LogCap: 1 << 20})
}

// do performs actions and fails the test on any error.
func (b *box) do(acts ...action.Action) []action.Result {
	b.t.Helper()
	var out []action.Result
	for _, a := range acts {
		if err := action.Validate(a, action.DefaultLimits(640, 480)); err != nil {
			b.t.Fatalf("test bug: %v", err)
		}
		r, err := b.env.Act(b.ctx, a)
		if err != nil {
			b.t.Fatalf("%s: %v", a, err)
		}
		if !r.OK {
			b.t.Fatalf("%s: %s", a, r.Error)
		}
		out = append(out, r)
	}
	return out
}

func (b *box) observe() (*observe.Frame, environment.State) {
	b.t.Helper()
	f, st, err := b.env.Observe(b.ctx)
	if err != nil {
		b.t.Fatalf("Observe: %v", err)
	}
	return f, st
}

// writeApp makes an app directory with a manifest and files.
func writeApp(t *testing.T, manifest string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		mode := os.FileMode(0o644)
		if strings.HasPrefix(content, "#!") || strings.HasPrefix(content, "\x7fELF") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, app.ManifestName), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func pt(x, y int) (*int, *int) { return &x, &y }

// tail is the last n bytes (or a few more, to start on a character) of
// a long output, for messages.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return "…" + s[i:]
}
