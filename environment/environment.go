// Package environment defines "the computer": a disposable sandbox with a
// virtual display and one application, driven through backend-neutral
// actions. Backends (Docker, …) live in their own packages and register
// themselves here; only a backend's package may know its tricks.
//
// A typical life:
//
//	b, _ := environment.Lookup("docker", environment.Options{})
//	env, err := b.Create(ctx, cfg)      // sandbox up, display up
//	if err != nil { … }
//	defer env.Close(context.WithoutCancel(ctx))
//	_, err = env.Launch(ctx, spec)      // stage files, start the app, wait for its window
//	frame, state, err := env.Observe(ctx)
//	res, err := env.Act(ctx, action.Action{Kind: action.KeyDown, Key: "Right"})
//	env.Close(ctx)                      // app, display and sandbox gone
package environment

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/netpolicy"
	"github.com/codegirl-games/agentbox/observe"
)

// Resources bounds the sandbox. Zero fields take the defaults.
type Resources struct {
	CPUs     float64 `json:"cpus"`      // default 1
	MemoryMB int     `json:"memory_mb"` // default 1024
	PIDs     int     `json:"pids"`      // default 256
	TmpfsMB  int     `json:"tmpfs_mb"`  // writable /tmp (app, home); default 256
	ShmMB    int     `json:"shm_mb"`    // /dev/shm; default 64
}

// WithDefaults fills zero fields.
func (r Resources) WithDefaults() Resources {
	if r.CPUs == 0 {
		r.CPUs = DefaultCPUs
	}
	if r.MemoryMB == 0 {
		r.MemoryMB = DefaultMemoryMB
	}
	if r.PIDs == 0 {
		r.PIDs = DefaultPIDs
	}
	if r.TmpfsMB == 0 {
		r.TmpfsMB = DefaultTmpfsMB
	}
	if r.ShmMB == 0 {
		r.ShmMB = DefaultShmMB
	}
	return r
}

// The defaults of Resources, which WithDefaults fills in: also the
// defaults of the CLI's flags that set them (--cpus, --memory, --pids,
// --tmpfs).
const (
	DefaultCPUs     = 1.0
	DefaultMemoryMB = 1024
	DefaultPIDs     = 256
	DefaultTmpfsMB  = 256
	DefaultShmMB    = 64
)

// MinPIDs is the smallest process limit a sandbox can start with. The
// limit counts threads as well as processes, and before the app runs any
// of its own the desktop takes about 36: the guest (a Go program that
// keeps a reserve of threads, so that an app using up the limit cannot
// take it down), Xvfb, Openbox, and the launcher the app starts through
// (the guest binary again, with the Go runtime's threads). Measured with
// xterm, a one-process app, on both backends at one CPU: at 35, 1 of 5
// Docker and 4 of 5 local starts failed (the guest or the launcher crashed
// for want of a thread); at 36, 10 of 10 started; at 36 with two CPUs, 1 of
// 5 failed (the Go runtime starts more threads with more CPUs). Below this
// the sandbox is certain (or all but) to fail; at it, only an app that
// starts no threads of its own fits.
const MinPIDs = 40

// Validate checks the resources as a sandbox gets them (zero fields take
// their defaults): every limit positive, at least MinPIDs processes, and
// the writable tmpfs and /dev/shm together below the memory limit, since
// their pages count against it. Every backend checks this before it
// creates anything; the CLI checks it before it starts a run.
func (r Resources) Validate() error {
	r = r.WithDefaults()
	if !(r.CPUs > 0) || r.MemoryMB <= 0 || r.PIDs <= 0 || r.TmpfsMB <= 0 || r.ShmMB <= 0 {
		return fmt.Errorf("the sandbox's limits must be positive: %s CPU, %d MiB memory, %d processes, %d MiB tmpfs, %d MiB shm",
			strconv.FormatFloat(r.CPUs, 'f', -1, 64), r.MemoryMB, r.PIDs, r.TmpfsMB, r.ShmMB)
	}
	if r.PIDs < MinPIDs {
		return fmt.Errorf("a process limit of %d is too low: %s", r.PIDs, PIDsWhy)
	}
	if r.TmpfsMB >= r.MemoryMB || r.ShmMB >= r.MemoryMB-r.TmpfsMB { // tmpfs + shm ≥ memory, without overflow
		return fmt.Errorf("tmpfs (%d MiB) + shm (%d MiB) must stay below the memory limit (%d MiB): tmpfs pages count against it", r.TmpfsMB, r.ShmMB, r.MemoryMB)
	}
	return nil
}

// PIDsWhy says why the process limit is at least MinPIDs, for messages.
var PIDsWhy = fmt.Sprintf("the desktop alone (the guest, Xvfb, Openbox and the app's launcher) takes about 36 processes and threads before the app starts its own; give at least %d", MinPIDs)

// HostLimits is what a backend can give one sandbox on this host, beyond
// the rules every backend shares (Resources.Validate): limits past these
// are certain to fail once the sandbox is created, so callers refuse them
// before. Zero fields bound nothing.
type HostLimits struct {
	// CPUs is the most CPUs a sandbox can be given here: the host's.
	CPUs float64 `json:"cpus,omitempty"`
	// MinMemoryMB is the smallest memory limit with which the sandbox's
	// own processes start, where the backend's way of bounding memory needs
	// more than the shared rule (the local backend's per-process rlimit);
	// MemoryWhy says why.
	MinMemoryMB int    `json:"min_memory_mb,omitempty"`
	MemoryWhy   string `json:"memory_why,omitempty"`
	// Unbounded are the limits of Resources the backend cannot hold the
	// sandbox to here (the local backend without cgroups: its CPU and total
	// memory): callers refuse them unless the user says plainly that the
	// sandbox may run unbounded. UnboundedWhy says why, UnboundedFix how to
	// get them.
	Unbounded    Limits `json:"unbounded"`
	UnboundedWhy string `json:"unbounded_why,omitempty"`
	UnboundedFix string `json:"unbounded_fix,omitempty"`
}

// HostLimiter is implemented by backends that know what a sandbox can be
// given on this host. HostLimits may ask a daemon (bound ctx).
type HostLimiter interface {
	HostLimits(ctx context.Context) (HostLimits, error)
}

// Config describes the sandbox to create.
type Config struct {
	// RunID names the run; backends label what they create with it.
	RunID string
	// Image is the root filesystem to use (a Docker image reference for the
	// docker backend).
	Image string
	// Runtime selects an alternative OCI runtime (e.g. "runsc"), where the
	// backend supports it.
	Runtime string
	// Screen is the display; the zero Screen is observe.DefaultScreen.
	Screen    observe.Screen
	Resources Resources
	// NoWM starts no window manager.
	NoWM bool
	// NoGLX starts the X server without its GLX extension, for an app that
	// draws without OpenGL (the manifest's "opengl": false): Xvfb's start
	// then skips loading Mesa's software renderer (about 90 ms of CPU).
	NoGLX bool
	// Events receives what the app does; nil discards.
	Events Events
	// GuestBinary is the agentbox binary delivered into the sandbox as its
	// supervisor; empty means the running executable.
	GuestBinary string
	// GuestLog receives the guest's own diagnostics (stderr); nil discards.
	GuestLog func(line string)
	// FullFrames transfers every screenshot in full even when the screen
	// is unchanged (benchmarks use it to measure the worst case).
	FullFrames bool
	// A11y starts the sandbox's private accessibility bus (D-Bus and
	// AT-SPI) for the app, so its tree can be read (Accessible) and
	// actions can name their targets by role and name.
	A11y bool
	// Network, when it has a rule or a forward, gives the sandbox a way
	// out through agentbox's recording proxy and the forwarded host
	// services (backends with Capabilities.Network); nil or empty: only
	// loopback, as always. Connections are told to an Events that is a
	// NetRecorder.
	Network *netpolicy.Policy
	// Name, when set, makes the sandbox a named one (backends with
	// Capabilities.Named): the app user's home is the name's, kept from
	// the last run of that name and kept for the next, and held by this
	// sandbox alone until it is closed (environment/named). Create fails
	// at once, wrapping named.ErrLocked, while another run holds it.
	// Such a sandbox does not reset in place (Resetter): its home is not
	// the sandbox's to restore.
	Name string
	// Observe starts the trusted observer (--observe): the guest records
	// the app's processes and the files it changes, read at each
	// checkpoint through Observer.
	Observe bool
	// Stage, when set, is the app a cold start will launch: its files are
	// sent into the sandbox while the display comes up, and the first
	// Launch of the same files (app.Bundle.SameFiles) sends nothing.
	// Backends without a guest channel ignore it.
	Stage *app.Bundle
}

// Events receives the app's output and life events. Calls come from one
// goroutine per environment, in order, and must not block for long.
type Events interface {
	// Output delivers bytes the app wrote. dropped > 0 says the stream hit
	// its cap and that many bytes were discarded.
	Output(stream observe.Stream, data []byte, dropped int64)
	// Exited reports that the app ended.
	Exited(exit observe.Exit)
	// Window reports a window mapped ("mapped"), retitled ("title") or
	// unmapped ("unmapped").
	Window(kind string, w observe.Window)
}

// LaunchSpec says how to start the app.
type LaunchSpec struct {
	App *app.Bundle
	// ReadyTimeout bounds waiting for the app's window.
	ReadyTimeout time.Duration
	// LogCap bounds the bytes of each output stream the guest forwards.
	LogCap int64
	// Inputs, when set, are a task's files, staged below the home after
	// the app's and before it starts (docs/tasks.md).
	Inputs *app.Inputs
	// Clock, when not zero, starts the app on a virtual clock stopped at
	// this instant, which only Clocked.SetClock moves (backends with
	// Capabilities.VirtualClock). A program that cannot be faked (a
	// static executable, a Go program) fails to launch with an error
	// wrapping ErrAppStart that says why.
	Clock time.Time
	// Observe asks for the first observation with the launch, taken once
	// the window is up (LaunchResult.Frame and State), where the backend
	// can give it without a call of its own; others leave them nil.
	Observe bool
}

// LaunchResult reports the started app.
type LaunchResult struct {
	PID    int
	Window *observe.Window // the window waited for, if any
	Ready  time.Duration   // from launch to window (or to start)
	// Files maps each staged regular file to its SHA-256 (hex), computed
	// from the bytes sent into the sandbox.
	Files map[string]string
	// Inputs maps each staged input file (its path below the home) to
	// its SHA-256 (hex).
	Inputs map[string]string
	// Frame and State are the first observation when LaunchSpec.Observe
	// asked for it and the backend gave it (else nil): what Observe
	// would have returned just after the launch.
	Frame *observe.Frame
	State *State
}

// Collector is implemented by environments that can copy files out of
// the sandbox's home when an episode ends (a task's collect; every
// guest-backed backend).
type Collector interface {
	// Collect copies the regular files below the home that the patterns
	// (relative to the home, checked by app.CollectPattern) name into dir
	// on the host, by their path below the home, within lim: no link is
	// followed, devices and FIFOs are refused. Its error means collection
	// itself failed (the sandbox is gone); what was refused is in the
	// result.
	Collect(ctx context.Context, patterns []string, lim app.CollectLimits, dir string) (Collected, error)
}

// Collected is what Collect copied out and what it refused.
type Collected struct {
	Files   []CollectedFile
	Refused []RefusedFile
}

// CollectedFile is one file copied out: its path below the home, size and
// SHA-256 (hex) of the bytes written on the host.
type CollectedFile struct {
	Path   string
	Size   int64
	SHA256 string
}

// RefusedFile is a match of a pattern that was not copied out, and why.
type RefusedFile struct {
	Path   string
	Reason string
}

// State is the desktop's state next to a screenshot.
type State struct {
	Cursor  action.Point
	Windows []observe.Window
	Running bool
	Exit    *observe.Exit
}

// Info describes a created environment.
type Info struct {
	Backend string            `json:"backend"`
	ID      string            `json:"id"` // container ID, …
	Image   string            `json:"image,omitempty"`
	ImageID string            `json:"image_id,omitempty"`
	Runtime string            `json:"runtime,omitempty"`
	Display string            `json:"display"`
	WM      bool              `json:"wm"`
	SHM     bool              `json:"shm"`
	Damage  bool              `json:"damage,omitempty"`     // DAMAGE spares capturing an unchanged screen
	Timings map[string]int64  `json:"timings_ms,omitempty"` // create, guest, xvfb, wm …
	Extra   map[string]string `json:"extra,omitempty"`
}

// Environment is one live sandbox. Methods may be called from one goroutine
// at a time, except Close, which may be called concurrently to abort.
type Environment interface {
	// Info describes the sandbox.
	Info() Info
	// Launch stages the app's files, starts it and waits for its window.
	Launch(ctx context.Context, spec LaunchSpec) (LaunchResult, error)
	// Observe takes a screenshot and reads the desktop's state.
	Observe(ctx context.Context) (*observe.Frame, State, error)
	// Act performs one validated action. Errors the action caused (a window
	// that never appeared) are in the Result; a returned error means the
	// environment failed.
	Act(ctx context.Context, a action.Action) (action.Result, error)
	// Close stops the app and the desktop and removes the sandbox. It is
	// idempotent and safe to call at any time; callers pass a context that
	// is not cancelled (context.WithoutCancel) with a deadline.
	Close(ctx context.Context) error
}

// Backend creates environments.
type Backend interface {
	// Name is the name the backend registered under.
	Name() string
	// Create brings up a sandbox with its display. On error nothing is left
	// behind.
	Create(ctx context.Context, cfg Config) (Environment, error)
}

// Freezer is implemented by environments whose processes can be frozen
// while the agent thinks.
type Freezer interface {
	Freeze(ctx context.Context) error
	Thaw(ctx context.Context) error
}

// AppHolder is implemented by environments whose guest can stop the
// running app's processes while the guest itself keeps answering (pings,
// requests): a warm pool holds an app launched ahead while its sandbox
// is idle, so that it takes no CPU from the episodes running, and lets
// it go at the hand-over. Unlike Freezer, which stops the whole sandbox,
// the display, the window manager and the guest run on.
type AppHolder interface {
	// HoldApp stops the app's processes (hold) or continues them; with
	// no app running it does nothing.
	HoldApp(ctx context.Context, hold bool) (AppHold, error)
}

// AppHold is what HoldApp did.
type AppHold struct {
	// Processes is how many of the app's processes were signalled.
	Processes int
	// CPU is the CPU time the app's processes have used so far: unchanged
	// while they are held.
	CPU time.Duration
}

// Clocked is implemented by environments that can run the app on a
// virtual clock (LaunchSpec.Clock).
type Clocked interface {
	// SetClock moves the app's virtual clock to t (never backwards); it
	// fails when the app was launched without one.
	SetClock(ctx context.Context, t time.Time) error
}

// Resetter is implemented by environments that can be reset in place
// for a relaunch: Reset ends the app and every process it started
// (daemons too), resets the display's state (other X clients killed, the
// root window's properties and the selections the app set cleared, keys
// and buttons released, the pointer home) and restores the writable
// directories to their state before the first launch; the window manager
// and the display stay. The next Launch then stages and starts the app
// as in a sandbox just created. The app's exit and windows reach the
// Events before Reset returns. Backends that offer it say so with
// Capabilities.Relaunch.
type Resetter interface {
	Reset(ctx context.Context) error
}

// Liveness is implemented by environments that can tell, without a
// step, whether their sandbox still lives: a warm pool checks the
// sandboxes it holds with it, so that one that died while idle is
// replaced, never handed out.
type Liveness interface {
	// Done is closed when the sandbox has ended: killed, crashed, or
	// closed (the guest's stream ended).
	Done() <-chan struct{}
	// Ping asks the guest to answer.
	Ping(ctx context.Context) error
}

// Observer is implemented by environments whose guest can run the trusted
// observer; a sandbox created without Config.Observe answers with an error
// wrapping ErrNoObserver.
type Observer interface {
	// Activity is a checkpoint: what the app did since the previous one
	// (processes, files; written files hashed now), in the order seen,
	// bounded with overflow events that say what was left out.
	Activity(ctx context.Context) ([]observe.ActivityEvent, error)
}

// Accessible is implemented by environments that can read the
// accessibility tree; a sandbox created without Config.A11y answers with
// an error wrapping ErrNoA11y.
type Accessible interface {
	Tree(ctx context.Context, lim observe.TreeLimits) (*observe.Tree, error)
}

// Errors. Backends wrap these with %w so callers can classify failures.
var (
	// ErrUnavailable: the backend cannot run here (no daemon, no binary).
	ErrUnavailable = errors.New("backend unavailable")
	// ErrImage: the image is missing or unusable.
	ErrImage = errors.New("image problem")
	// ErrGuest: the in-sandbox supervisor failed or broke the protocol.
	ErrGuest = errors.New("guest failure")
	// ErrAppStart: the app could not be started (missing command, exec error).
	ErrAppStart = errors.New("app did not start")
	// ErrNoWindow: the app started but its window did not appear in time.
	ErrNoWindow = errors.New("app window did not appear")
	// ErrAppExited: the app exited before it was ready.
	ErrAppExited = errors.New("app exited")
	// ErrClosed: the environment was closed.
	ErrClosed = errors.New("environment closed")
	// ErrNoObserver: the sandbox has no trusted observer (Config.Observe).
	ErrNoObserver = errors.New("the sandbox has no observer (start it with --observe)")
	// ErrNoScreenEvents: the environment cannot tell when its screen
	// changes (ScreenWatcher); poll it instead.
	ErrNoScreenEvents = errors.New("no screen events")
	// ErrNoA11y: the sandbox has no accessibility bus (Config.A11y).
	ErrNoA11y = errors.New("the sandbox has no accessibility bus (start it with --a11y)")
)

// Reaper is implemented by backends that can find and remove sandboxes a
// killed agentbox left behind (they label what they create with the owner's
// host, PID and start time).
type Reaper interface {
	Reap(ctx context.Context, opts ReapOptions) ([]Reaped, error)
}

// ReapOptions selects what Reap removes. By default: sandboxes whose owning
// process on this host is gone.
type ReapOptions struct {
	// All removes every agentbox sandbox, owners alive or not.
	All bool
	// RunID limits reaping to one run, owner alive or not (the forced
	// teardown after a second Ctrl-C).
	RunID string
	// Mine limits reaping to sandboxes this process created (a forced stop).
	Mine bool
	// DryRun lists without removing.
	DryRun bool
}

// Reaped describes one sandbox Reap found.
type Reaped struct {
	ID      string
	Name    string
	RunID   string
	Owner   string // "host/pid"
	Created string
	Reason  string
	Removed bool
	Err     error
}

// Checker is implemented by backends that can say what they need and what
// is missing on this machine (`agentbox doctor`).
type Checker interface {
	Check(ctx context.Context, cfg Config) []Check
}

// Check is one finding of a Checker.
type Check struct {
	Name   string // what was checked
	OK     bool
	Detail string // what was found
	Fix    string // how to fix it, when not OK
}

// DropCounter is implemented by Events receivers that record what the host
// discarded from the guest beyond its bounds: window events past their
// budget, log lines past theirs, a second exit. kind names the event kind
// ("window", "log", "exit"); n how many were dropped. Output beyond its cap
// is reported through Output's dropped argument instead.
type DropCounter interface {
	Dropped(kind string, n int64)
}

// NetRecorder is implemented by Events receivers that record the
// sandbox's network connections (Config.Network): every request, tunnel
// and forwarded connection when it ends or is refused, and every limit
// when it bites. Unlike Events' methods it is called from many goroutines
// at once.
type NetRecorder interface {
	Network(ev observe.NetEvent)
}
