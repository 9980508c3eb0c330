package guestenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/netproxy"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

// Sandbox is a backend's part of one guest-backed environment: the sandbox
// the guest runs in. The backend creates it and hands the guest's stdio to
// Env.Start; Env does everything the guest does (staging, launching,
// screenshots, input, stopping), keeps the guest's last words for error
// messages and calls the sandbox to explain a failure and to tear down.
type Sandbox interface {
	// Info describes the sandbox (ID, image, runtime, extra details);
	// Env fills in Backend, Display, WM, SHM and Timings.
	Info() environment.Info
	// Explain says how the sandbox ended, for the message of a failed
	// guest ("container exited (exit code 137, OOM-killed)"), or nothing
	// while it still runs. lastWords is closed once the guest's stderr has
	// ended: a sandbox that has ended may wait for it briefly, so the tail
	// of what the guest said is complete.
	Explain(ctx context.Context, lastWords <-chan struct{}) []string
	// Teardown removes the sandbox once the guest has been asked to stop
	// (or could not be): it closes the guest's stdin, waits briefly, kills
	// what is left, removes the sandbox and verifies that nothing of it
	// remains. Env calls it once, on every path, also when Start failed or
	// never ran.
	Teardown(ctx context.Context) error
}

// LaunchExplainer is implemented by sandboxes that can say more about an
// app that would not start than the guest can (Docker: which of the
// images here has a program this image lacks). ExplainLaunch returns err,
// or err wrapped with what it adds.
type LaunchExplainer interface {
	ExplainLaunch(ctx context.Context, spec environment.LaunchSpec, err error) error
}

// Freezing is implemented by sandboxes that can freeze their processes
// (Docker's pause, a cgroup's freezer). Freezer returns how, or nil where
// this sandbox cannot (a local sandbox without a cgroup of its own); Env
// then implements environment.Freezer through it.
type Freezing interface {
	Freezer() environment.Freezer
}

// Options describe an Env.
type Options struct {
	// Backend names the backend in Info.
	Backend string
	// Config is the environment's configuration (Events, GuestLog, Screen,
	// NoWM, FullFrames are used).
	Config environment.Config
	// Began is when Create began, for the "total" timing; zero means New.
	Began time.Time
	// Said introduces the guest's stderr in error messages; default
	// "guest said".
	Said string
	// Hint, if set, may add advice to that tail in error messages.
	Hint func(tail string) string
	// Preset, if set, says what each Launch adds for its app before the
	// task's inputs: files below the home and environment variables (the
	// local backend sets the host's apps up as the office image does).
	Preset func(spec environment.LaunchSpec) Preset
	// AfterTeardown, if set, runs once the sandbox is gone, in Close (a
	// named sandbox's home is measured and its lock released).
	AfterTeardown func(ctx context.Context) error
}

// Preset is what a backend adds to one launch: files written below the
// home before the task's inputs (which may replace them), and variables
// of the app's environment before the manifest's (which may override
// them).
type Preset struct {
	Files []PresetFile
	Env   []string // KEY=VALUE
}

// PresetFile is a file of a Preset: its path below the home (slashes,
// checked as a staged path), and its bytes.
type PresetFile struct {
	Path string
	Data []byte
}

// Env is an environment.Environment whose guest runs in a backend's
// Sandbox. A backend's Create makes one with New as soon as it has a
// sandbox to tear down, hands the guest's stderr to KeepStderr and its
// stdio to Start, and on any error closes it.
type Env struct {
	sb      Sandbox
	opts    Options
	timings map[string]int64

	guest *Client
	start wire.StartResponse
	net   *netproxy.Server // the sandbox's network, if it has one (net.go)
	// netCarried: the network's connections go over the guest's stream
	// (CarryNetwork).
	netCarried bool

	tailMu    sync.Mutex
	tail      []string // the guest's last stderr lines, for error messages
	lastWords chan struct{}
	keeping   atomic.Bool

	freezer environment.Freezer
	frozen  atomic.Bool // Freeze succeeded and Thaw has not

	// floorBuf is what Floor decompresses the frame into, kept from one
	// call to the next (agentbox bench calls it a sample at a time, in
	// turn with steps: a new 8 MB buffer each time would put the
	// collector in the steps' way).
	floorMu  sync.Mutex
	floorBuf []byte

	// lastApp is the app staged last, lastSums its files' hashes; appKept
	// says a reset restaged it in the guest (from the guest's copy of
	// what was sent): the next Launch of the same bundle sends nothing.
	lastApp  *app.Bundle
	lastSums map[string]string
	appKept  bool
	// staging is the app's files sent behind the display's start
	// (Config.Stage), owed answers until Start flushes it.
	staging *staging

	closeOnce sync.Once
	closeErr  error
}

var (
	_ environment.Environment   = (*Env)(nil)
	_ environment.ScreenWatcher = (*Env)(nil)
)

// WatchScreen implements environment.ScreenWatcher through the guest's
// screen events (wire.MethodWatch).
func (e *Env) WatchScreen(ctx context.Context) (<-chan struct{}, func(), error) {
	return e.guest.WatchScreen(ctx)
}

// tailLines is how many of the guest's last stderr lines error messages
// quote.
const tailLines = 20

// Bounds of Close: the guest's stop, the app's grace period within it, a
// thaw before it, and the wait for the last events after teardown.
const (
	stopBound   = 5 * time.Second
	stopGrace   = 2 * time.Second
	thawBound   = 5 * time.Second
	servedBound = time.Second
	// startBound bounds bringing up the display and window manager.
	startBound = 30 * time.Second
)

// New makes the Env of a sandbox. Nothing runs yet.
func New(sb Sandbox, o Options) *Env {
	if o.Began.IsZero() {
		o.Began = time.Now()
	}
	if o.Said == "" {
		o.Said = "guest said"
	}
	return &Env{sb: sb, opts: o, timings: map[string]int64{}, lastWords: make(chan struct{})}
}

// Timing records how long a step of Create took, in Info().Timings.
func (e *Env) Timing(name string, d time.Duration) { e.timings[name] = d.Milliseconds() }

// KeepStderr reads the guest's diagnostics (and whatever else writes to
// the sandbox's stderr) until r ends: it passes each line to the
// configuration's GuestLog and keeps the last ones for error messages. r
// is closed at the end if it is an io.Closer. Call it at most once.
func (e *Env) KeepStderr(r io.Reader) {
	if !e.keeping.CompareAndSwap(false, true) {
		panic("guestenv: KeepStderr called twice")
	}
	go func() {
		defer close(e.lastWords)
		if c, ok := r.(io.Closer); ok {
			defer c.Close()
		}
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 64<<10)
		for sc.Scan() {
			line := sc.Text()
			e.tailMu.Lock()
			e.tail = append(e.tail, line)
			if len(e.tail) > tailLines {
				e.tail = e.tail[len(e.tail)-tailLines:]
			}
			e.tailMu.Unlock()
			if e.opts.Config.GuestLog != nil {
				e.opts.Config.GuestLog(line)
			}
		}
		_, _ = io.Copy(io.Discard, r)
	}()
}

// Explain adds what the sandbox says about how it ended and what the
// guest said last to err, an error of the guest or of starting it.
func (e *Env) Explain(ctx context.Context, err error) error {
	parts := e.sb.Explain(ctx, e.lastWords)
	e.tailMu.Lock()
	tail := strings.Join(e.tail, "\n  ")
	e.tailMu.Unlock()
	if tail != "" {
		if e.opts.Hint != nil {
			tail += e.opts.Hint(tail)
		}
		parts = append(parts, e.opts.Said+":\n  "+tail)
	}
	if len(parts) == 0 {
		return err
	}
	return fmt.Errorf("%w; %s", err, strings.Join(parts, "; "))
}

// DisplayArgs are the guest's arguments that bring its display up as soon
// as it runs (`agentbox guest --display WxHxD [--wm]`, guest/prestart.go):
// the screen and window manager cfg's start will ask for, so that Xvfb and
// Openbox start while the host is still busy with the handshake. The guest
// starts afresh should the start ask for something else.
func DisplayArgs(cfg environment.Config) []string {
	a := []string{"--display", cfg.Screen.OrDefault().String()}
	if !cfg.NoWM {
		a = append(a, "--wm")
	}
	if cfg.NoGLX {
		a = append(a, "--no-glx")
	}
	if os.Getenv(ProfileEnv) != "" {
		a = append(a, "--cpuprofile", guestProfile)
	}
	return a
}

// ProfileEnv names the host's environment variable that asks every guest
// the docker and local backends start for a CPU profile, for developers:
// AGENTBOX_GUEST_CPUPROFILE=DIR makes the guest profile itself from its
// start to its stop (guest/profile.go), and Close copies the profile to
// DIR/guest-RUNID.pprof on the host before the sandbox goes
// (`go tool pprof bin/agentbox-guest DIR/guest-RUNID.pprof`). Never set by
// default; a profile that cannot be copied is reported to the guest log.
const ProfileEnv = "AGENTBOX_GUEST_CPUPROFILE"

// guestProfile is the profile's file in the guest's home.
const guestProfile = "agentbox-guest.cpu.pprof"

// fetchProfile copies the guest's CPU profile to the directory
// ProfileEnv names (after the guest's stop wrote it).
func (e *Env) fetchProfile(ctx context.Context) error {
	dir := os.Getenv(ProfileEnv)
	if dir == "" || e.guest == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("guest cpu profile: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("guest cpu profile: %w", err)
	}
	defer root.Close()
	_, _, reason, err := e.guest.fetch(ctx, root, guestProfile, 1<<30)
	if err == nil && reason != "" {
		err = errors.New(reason)
	}
	if err != nil {
		return fmt.Errorf("guest cpu profile: %w", err)
	}
	name := "guest-" + sanitizeName(e.opts.Config.RunID) + ".pprof"
	if err := root.Rename(guestProfile, name); err != nil {
		return fmt.Errorf("guest cpu profile: %w", err)
	}
	return nil
}

// sanitizeName keeps a run ID's letters, digits, '-', '_' and '.' for a
// file name.
func sanitizeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '-'
		}
	}
	if len(b) == 0 {
		return "run"
	}
	return string(b)
}

// Start performs the handshake with the guest on its stdio (stdout: what
// the guest writes, stdin: what it reads), runs afterHello if set (a
// backend's check of the guest it started), and brings up the display. It
// returns the environment: an environment.Freezer too when the sandbox
// can freeze. Its errors are explained; the caller closes e on error.
func (e *Env) Start(ctx context.Context, stdout io.Reader, stdin io.Writer, afterHello func(context.Context) error) (environment.Environment, error) {
	cfg := e.opts.Config
	netSetup, err := e.netSetup()
	if err != nil {
		return nil, err
	}
	t := time.Now()
	gc, err := Dial(ctx, stdout, stdin, cfg.Events, cfg.GuestLog)
	if err != nil {
		return nil, e.Explain(ctx, err)
	}
	e.guest = gc
	gc.FullFrames = cfg.FullFrames
	gc.Net = netSetup
	if e.netCarried {
		gc.CarryNetwork(e.dialSocket)
	}
	e.Timing("guest_hello", time.Since(t))
	if afterHello != nil {
		if err := afterHello(ctx); err != nil {
			return nil, e.Explain(ctx, err)
		}
	}
	gc.A11y = cfg.A11y
	gc.NoGLX = cfg.NoGLX
	gc.Observer = cfg.Observe
	t = time.Now()
	sr, err := e.startStaged(ctx, cfg)
	if err != nil {
		return nil, e.Explain(ctx, err)
	}
	e.Timing("start", time.Since(t))
	if e.staging != nil {
		// The app's files went while the display came up; what is left
		// is the guest writing the last of them.
		t = time.Now()
		sums, err := e.staging.flush(ctx)
		e.staging = nil
		if err != nil {
			return nil, e.Explain(ctx, fmt.Errorf("stage the app: %w", err))
		}
		e.Timing("stage", time.Since(t))
		e.lastApp, e.lastSums, e.appKept = cfg.Stage, sums, true
	}
	e.start = sr
	e.timings["xvfb"], e.timings["wm"] = sr.XvfbMS, sr.WMMS
	if cfg.A11y {
		e.timings["a11y"] = sr.A11yMS
	}
	e.Timing("total", time.Since(e.opts.Began))
	if f, ok := e.sb.(Freezing); ok {
		if e.freezer = f.Freezer(); e.freezer != nil {
			return freezable{e}, nil
		}
	}
	return e, nil
}

// startStaged sends the display's start and, with cfg.Stage, the app's
// files right behind it (e.staging, flushed after): the guest answers in
// turn, so the files cross the channel while the display comes up. It
// returns the start's answer.
func (e *Env) startStaged(ctx context.Context, cfg environment.Config) (wire.StartResponse, error) {
	gc := e.guest
	if cfg.Stage == nil || len(cfg.Stage.Files) == 0 {
		return gc.Start(ctx, cfg.Screen, cfg.NoWM, startBound)
	}
	s, err := gc.sendStart(cfg.Screen, cfg.NoWM, startBound)
	if err != nil {
		return wire.StartResponse{}, err
	}
	e.staging = gc.stageBehind(ctx, cfg.Stage, startBound)
	sr, err := gc.waitStart(ctx, s)
	if err != nil {
		// The files' answers come after the start's; wait for them so
		// nothing is left owed.
		_, _ = e.staging.flush(ctx)
		e.staging = nil
	}
	return sr, err
}

// Info implements environment.Environment.
func (e *Env) Info() environment.Info {
	info := e.sb.Info()
	info.Backend = e.opts.Backend
	info.Display = e.start.Display
	info.WM = e.start.WM
	info.SHM = e.start.SHM
	info.Damage = e.start.Damage
	info.Timings = e.timings
	return info
}

// Launch implements environment.Environment.
func (e *Env) Launch(ctx context.Context, spec environment.LaunchSpec) (environment.LaunchResult, error) {
	var sums map[string]string
	if e.appKept && spec.App.SameFiles(e.lastApp) {
		sums = e.lastSums // restaged by the guest's reset, or staged ahead (Stage)
	} else {
		var err error
		e.lastApp, e.lastSums = nil, nil
		if sums, err = e.guest.Stage(ctx, spec.App); err != nil {
			return environment.LaunchResult{}, e.Explain(ctx, fmt.Errorf("stage the app: %w", err))
		}
		e.lastApp, e.lastSums = spec.App, sums
	}
	e.appKept = false
	var err error
	var preset Preset
	if e.opts.Preset != nil {
		preset = e.opts.Preset(spec)
	}
	if err := e.guest.StagePreset(ctx, preset.Files); err != nil {
		return environment.LaunchResult{}, e.Explain(ctx, fmt.Errorf("stage the app's preset: %w", err))
	}
	var inputs map[string]string
	if spec.Inputs != nil {
		if inputs, err = e.guest.StageInputs(ctx, spec.Inputs); err != nil {
			return environment.LaunchResult{}, e.Explain(ctx, fmt.Errorf("stage the task's inputs: %w", err))
		}
	}
	r, err := e.guest.Launch(ctx, spec, preset.Env)
	r.Files, r.Inputs = sums, inputs
	if errors.Is(err, environment.ErrGuest) {
		return r, e.Explain(ctx, err)
	}
	if le, ok := e.sb.(LaunchExplainer); ok && err != nil {
		err = le.ExplainLaunch(ctx, spec, err)
	}
	return r, err // the app's own failure: its output is in the trace
}

// Stage sends the app's files into the sandbox ahead of its launch (a
// warm pool's sandbox waiting for an episode of that app): the next
// Launch of the same files (app.Bundle.SameFiles) sends nothing.
func (e *Env) Stage(ctx context.Context, b *app.Bundle) error {
	if e.guest == nil {
		return fmt.Errorf("stage: %w", environment.ErrClosed)
	}
	e.lastApp, e.lastSums, e.appKept = nil, nil, false
	sums, err := e.guest.Stage(ctx, b)
	if err != nil {
		return e.Explain(ctx, fmt.Errorf("stage the app: %w", err))
	}
	e.lastApp, e.lastSums, e.appKept = b, sums, true
	return nil
}

var _ environment.Collector = (*Env)(nil)

// Collect implements environment.Collector.
func (e *Env) Collect(ctx context.Context, patterns []string, lim app.CollectLimits, dir string) (environment.Collected, error) {
	if e.guest == nil {
		return environment.Collected{}, fmt.Errorf("collect: %w", environment.ErrClosed)
	}
	c, err := e.guest.Collect(ctx, patterns, lim, dir)
	if errors.Is(err, environment.ErrGuest) {
		err = e.Explain(ctx, err)
	}
	return c, err
}

// Observe implements environment.Environment.
func (e *Env) Observe(ctx context.Context) (*observe.Frame, environment.State, error) {
	f, st, err := e.guest.Observe(ctx)
	if errors.Is(err, environment.ErrGuest) {
		err = e.Explain(ctx, err) // how the sandbox ended (killed, stopped), what the guest said
	}
	return f, st, err
}

// Act implements environment.Environment.
func (e *Env) Act(ctx context.Context, a action.Action) (action.Result, error) {
	r, err := e.guest.Act(ctx, a)
	if errors.Is(err, environment.ErrGuest) {
		err = e.Explain(ctx, err)
	}
	return r, err
}

var _ environment.Stepper = (*Env)(nil)

// Step implements environment.Stepper: the action, the settle and the
// screenshot in one round trip to the guest (wire.MethodStep).
func (e *Env) Step(ctx context.Context, a action.Action, settle *action.Action) (action.Result, *environment.Stepped, error) {
	r, st, err := e.guest.Step(ctx, a, settle)
	if errors.Is(err, environment.ErrGuest) {
		err = e.Explain(ctx, err)
	}
	return r, st, err
}

// Tree implements environment.Accessible: the accessibility tree, read by
// the guest (the sandbox needs Config.A11y).
func (e *Env) Tree(ctx context.Context, lim observe.TreeLimits) (*observe.Tree, error) {
	if !e.opts.Config.A11y {
		return nil, fmt.Errorf("accessibility tree: %w", environment.ErrNoA11y)
	}
	t, err := e.guest.Tree(ctx, lim)
	if errors.Is(err, environment.ErrGuest) {
		err = e.Explain(ctx, err)
	}
	return t, err
}

var _ environment.Observer = (*Env)(nil)

// Activity implements environment.Observer: a checkpoint of the guest's
// trusted observer (the sandbox needs Config.Observe).
func (e *Env) Activity(ctx context.Context) ([]observe.ActivityEvent, error) {
	if !e.opts.Config.Observe {
		return nil, fmt.Errorf("activity: %w", environment.ErrNoObserver)
	}
	evs, err := e.guest.Activity(ctx)
	if errors.Is(err, environment.ErrGuest) {
		err = e.Explain(ctx, err)
	}
	return evs, err
}

var _ environment.Clocked = (*Env)(nil)

// SetClock implements environment.Clocked: the guest rewrites the app's
// virtual clock.
func (e *Env) SetClock(ctx context.Context, t time.Time) error {
	if e.guest == nil {
		return fmt.Errorf("clock: %w", environment.ErrClosed)
	}
	err := e.guest.SetClock(ctx, t)
	if errors.Is(err, environment.ErrGuest) {
		err = e.Explain(ctx, err)
	}
	return err
}

var _ environment.Resetter = (*Env)(nil)

// Reset implements environment.Resetter: the guest kills the app and
// everything it left running, resets the X server's state and restores
// the writable directories (wire.MethodReset). A frozen sandbox is
// thawed first.
func (e *Env) Reset(ctx context.Context) error {
	if e.guest == nil {
		return fmt.Errorf("reset: %w", environment.ErrClosed)
	}
	if n := e.opts.Config.Name; n != "" {
		return fmt.Errorf("reset: sandbox %s is named: its home is kept across runs, not restored; a named sandbox is not reset in place (start each episode fresh)", n)
	}
	if e.frozen.Load() {
		if err := e.thaw(ctx); err != nil {
			return fmt.Errorf("reset: thaw: %w", err)
		}
	}
	resp, err := e.guest.Reset(ctx)
	if errors.Is(err, environment.ErrGuest) {
		err = e.Explain(ctx, err)
	}
	e.appKept = err == nil && resp.AppKept
	return err
}

var _ environment.Liveness = (*Env)(nil)

// closedChan is Done's answer before the guest has started.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Done implements environment.Liveness: closed when the guest's stream
// has ended (the sandbox was killed, crashed or closed).
func (e *Env) Done() <-chan struct{} {
	if e.guest == nil {
		return closedChan
	}
	return e.guest.Done()
}

// Ping implements environment.Liveness: one round trip to the guest.
func (e *Env) Ping(ctx context.Context) error {
	if e.guest == nil {
		return fmt.Errorf("ping: %w", environment.ErrClosed)
	}
	return e.guest.Ping(ctx)
}

var _ environment.AppHolder = (*Env)(nil)

// HoldApp implements environment.AppHolder: the guest stops (SIGSTOP)
// or continues the app's process group and its descendants
// (wire.MethodHoldApp).
func (e *Env) HoldApp(ctx context.Context, hold bool) (environment.AppHold, error) {
	if e.guest == nil {
		return environment.AppHold{}, fmt.Errorf("hold the app: %w", environment.ErrClosed)
	}
	resp, err := e.guest.HoldApp(ctx, hold)
	if err != nil {
		return environment.AppHold{}, err
	}
	return environment.AppHold{Processes: resp.Processes, CPU: time.Duration(resp.CPUMS * float64(time.Millisecond))}, nil
}

var (
	_ environment.Floorer         = (*Env)(nil)
	_ environment.RelaunchFloorer = (*Env)(nil)
)

// RelaunchFloor implements environment.RelaunchFloorer: the guest times
// the kill, the start and the capture in the sandbox.
func (e *Env) RelaunchFloor(ctx context.Context) (environment.RelaunchFloor, error) {
	if e.guest == nil {
		return environment.RelaunchFloor{}, fmt.Errorf("relaunch floor: %w", environment.ErrClosed)
	}
	r, err := e.guest.RelaunchFloor(ctx)
	if err != nil {
		return environment.RelaunchFloor{}, err
	}
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	return environment.RelaunchFloor{Kill: us(r.KillUS), Start: us(r.StartUS), Capture: us(r.CaptureUS)}, nil
}

// Floor implements environment.Floorer: the guest times the motion, the
// capture, the hash, the compression and the PNG encode in the sandbox;
// the round trips of an empty request (ping) and of a compressed frame,
// and the frame's decompression, are timed here.
func (e *Env) Floor(ctx context.Context, spec environment.FloorSpec) (environment.Floor, error) {
	var fl environment.Floor
	if e.guest == nil {
		return fl, fmt.Errorf("floor: %w", environment.ErrClosed)
	}
	samples := spec.Samples
	r, err := e.guest.Floor(ctx, samples, spec.From, spec.PNG, spec.Unchanged)
	if err != nil {
		return fl, err
	}
	us := func(v []int64) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x) * time.Microsecond
		}
		return d
	}
	fl.SHM = r.SHM
	fl.Motion, fl.Capture, fl.Damage, fl.Hash, fl.Encode, fl.PNG = us(r.Motion), us(r.Capture), us(r.Damage), us(r.Hash), us(r.Encode), us(r.PNG)
	for range samples {
		t := time.Now()
		if err := e.guest.Ping(ctx); err != nil {
			return fl, err
		}
		fl.Ping = append(fl.Ping, time.Since(t))
	}
	if spec.Unchanged {
		return fl, nil
	}
	e.floorMu.Lock()
	defer e.floorMu.Unlock()
	buf := e.floorBuf
	defer func() { e.floorBuf = buf }()
	for range samples {
		t := time.Now()
		p, err := e.guest.FloorFrame(ctx)
		if err != nil {
			return fl, err
		}
		fl.FrameTrip = append(fl.FrameTrip, time.Since(t))
		fl.FrameBytes = len(p)
		t = time.Now()
		if buf, err = s2.Decode(buf[:cap(buf)], p); err != nil {
			return fl, fmt.Errorf("floor: the frame: %w", err)
		}
		fl.Decode = append(fl.Decode, time.Since(t))
	}
	return fl, nil
}

// Close implements environment.Environment: a frozen sandbox is thawed
// (a frozen guest could not stop the app), the guest stops the app and the
// display, and the sandbox is torn down; Close then waits briefly for the
// guest's last events.
//
// A guest that does not stop in time (busy with a launch Close aborts, or
// broken) is killed by the teardown: what counts is that nothing is left,
// which the teardown verifies. Such a failed stop is therefore not an
// error of Close; it is told to the configuration's GuestLog.
func (e *Env) Close(ctx context.Context) error {
	e.closeOnce.Do(func() { e.closeErr = e.close(ctx) })
	return e.closeErr
}

func (e *Env) close(ctx context.Context) error {
	if e.frozen.Load() {
		tctx, cancel := context.WithTimeout(ctx, thawBound)
		_ = e.thaw(tctx) // best effort: the teardown kills a frozen sandbox too
		cancel()
	}
	if e.guest != nil {
		select {
		case <-e.guest.Done():
		default:
			sctx, cancel := context.WithTimeout(ctx, stopBound)
			_, err := e.guest.Stop(sctx, stopGrace)
			if err != nil && !errors.Is(err, environment.ErrGuest) && e.opts.Config.GuestLog != nil {
				e.opts.Config.GuestLog("agentbox: the guest did not stop the app and the display (the sandbox is removed regardless): " + err.Error())
			}
			if err == nil {
				if perr := e.fetchProfile(sctx); perr != nil && e.opts.Config.GuestLog != nil {
					e.opts.Config.GuestLog("agentbox: " + perr.Error())
				}
			}
			cancel()
		}
	}
	err := e.sb.Teardown(ctx)
	if nerr := e.closeNetwork(); nerr != nil {
		err = errors.Join(err, nerr)
	}
	if e.opts.AfterTeardown != nil {
		err = errors.Join(err, e.opts.AfterTeardown(ctx))
	}
	if e.guest != nil {
		wctx, cancel := context.WithTimeout(ctx, servedBound)
		e.guest.WaitServed(wctx)
		cancel()
	}
	return err
}

func (e *Env) freeze(ctx context.Context) error {
	err := e.freezer.Freeze(ctx)
	if err == nil {
		e.frozen.Store(true)
	}
	return err
}

func (e *Env) thaw(ctx context.Context) error {
	err := e.freezer.Thaw(ctx)
	if err == nil {
		e.frozen.Store(false)
	}
	return err
}

// freezable is an Env whose sandbox can freeze.
type freezable struct{ *Env }

var _ environment.Freezer = freezable{}

// Freeze implements environment.Freezer.
func (f freezable) Freeze(ctx context.Context) error { return f.freeze(ctx) }

// Thaw implements environment.Freezer.
func (f freezable) Thaw(ctx context.Context) error { return f.thaw(ctx) }
