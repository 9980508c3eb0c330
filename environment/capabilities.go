package environment

import (
	"context"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
)

// Capabilities is what a backend supports on this host. Callers choose
// behaviour by what a backend can do, never by its name: the CLI refuses
// --image for a backend without images, `doctor` lists them, `bench` takes
// the seed-style step where there is one, and the conformance suite holds
// each backend to what it declares (as Nomad's drivers declare theirs).
type Capabilities struct {
	// Images: Config.Image chooses the sandbox's system (a custom image).
	Images bool `json:"images"`
	// OCIRuntime: Config.Runtime chooses an alternative OCI runtime
	// (runsc, …).
	OCIRuntime bool `json:"oci_runtime"`
	// Freeze: its environments implement Freezer on this host.
	Freeze bool `json:"freeze"`
	// Reap: the backend implements Reaper.
	Reap bool `json:"reap"`
	// Limits: which of Resources bound the sandbox as a whole on this host.
	Limits Limits `json:"limits"`
	// SeedStep: the backend implements SeedStepper.
	SeedStep bool `json:"seed_step"`
	// Network: Config.Network gives its sandboxes a way out through
	// agentbox's recording proxy, and forwarded host services.
	Network bool `json:"network"`
	// VirtualClock: LaunchSpec.Clock starts the app on a virtual clock
	// its environments move (Clocked): libfaketime in the sandbox.
	VirtualClock bool `json:"virtual_clock"`
	// Relaunch: its environments implement Resetter (reset in place,
	// the relaunch reset mode).
	Relaunch bool `json:"relaunch"`
	// Named: Config.Name keeps the app user's home across runs of that
	// name (a Docker volume, a directory on this host), and the backend
	// implements NamedHomes.
	Named bool `json:"named"`
	// Fork is how a running environment of the backend is forked (agentbox
	// serve's fork): ForkSnapshot when the backend can copy a running
	// sandbox (a microVM's snapshot); empty means ForkReplay, which every
	// backend can do (ForkOf).
	Fork string `json:"fork,omitempty"`
}

// Fork modes (Capabilities.Fork).
const (
	// ForkReplay: a fork is a fresh sandbox into which the parent's
	// recorded episode is replayed, verified by its screen. Exact when
	// the app's time is controlled (the virtual clock) or the app does
	// not read it.
	ForkReplay = "replay"
	// ForkSnapshot: a fork is a copy of the running sandbox.
	ForkSnapshot = "snapshot"
)

// ForkOf is how b's environments are forked: its declared Fork, else
// ForkReplay.
func ForkOf(b Backend) string {
	if f := CapabilitiesOf(b).Fork; f != "" {
		return f
	}
	return ForkReplay
}

// Limits says which of Resources a backend holds the whole sandbox to.
// The tmpfs and /dev/shm sizes are always enforced.
type Limits struct {
	CPU    bool `json:"cpu"`
	Memory bool `json:"memory"`
	PIDs   bool `json:"pids"`
}

// Capable is implemented by backends that declare their capabilities. A
// backend without it has none of them.
type Capable interface {
	Capabilities() Capabilities
}

// CapabilitiesOf returns what b declares; none when it declares nothing.
func CapabilitiesOf(b Backend) Capabilities {
	if c, ok := b.(Capable); ok {
		return c.Capabilities()
	}
	return Capabilities{}
}

// capability is one capability's name and whether a set has it.
type capability struct {
	name string
	has  func(Capabilities) bool
}

var capabilityList = []capability{
	{"custom images", func(c Capabilities) bool { return c.Images }},
	{"OCI runtimes", func(c Capabilities) bool { return c.OCIRuntime }},
	{"freezing", func(c Capabilities) bool { return c.Freeze }},
	{"reaping", func(c Capabilities) bool { return c.Reap }},
	{"a CPU limit", func(c Capabilities) bool { return c.Limits.CPU }},
	{"a memory limit", func(c Capabilities) bool { return c.Limits.Memory }},
	{"a process limit", func(c Capabilities) bool { return c.Limits.PIDs }},
	{"the seed-style step", func(c Capabilities) bool { return c.SeedStep }},
	{"a network by policy", func(c Capabilities) bool { return c.Network }},
	{"a virtual clock", func(c Capabilities) bool { return c.VirtualClock }},
	{"reset in place", func(c Capabilities) bool { return c.Relaunch }},
	{"named sandboxes", func(c Capabilities) bool { return c.Named }},
}

// Missing names what need asks for and c lacks ("custom images"), in a
// fixed order; none when c has all of it.
func (c Capabilities) Missing(need Capabilities) []string {
	var out []string
	for _, k := range capabilityList {
		if k.has(need) && !k.has(c) {
			out = append(out, k.name)
		}
	}
	return out
}

// String lists the capabilities c has ("custom images, OCI runtimes, …"),
// or "none".
func (c Capabilities) String() string {
	var out []string
	for _, k := range capabilityList {
		if k.has(c) {
			out = append(out, k.name)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// NamedHomes is implemented by backends with Capabilities.Named: the
// homes of named sandboxes as the backend keeps them (agentbox's record
// of each, its lock and its directory, are environment/named's).
type NamedHomes interface {
	// HomeSize is the bytes the name's home holds; -1 when unknown.
	HomeSize(ctx context.Context, name string) (int64, error)
	// RemoveHome removes the name's home; one already gone is no error.
	RemoveHome(ctx context.Context, name string) error
}

// SeedStepper is implemented by backends that can take the seed-style step
// in one of their environments: a screenshot and a mouse move the way
// agentbox's seed spike did (three processes started in the sandbox from
// outside), for `agentbox bench` to compare the guest's step against. It
// returns the screenshot's size in bytes. The environment's image must
// have the tools (the test image has).
type SeedStepper interface {
	SeedStep(ctx context.Context, env Environment, x, y int) (int, error)
}

// ColdFloorer is implemented by backends that can time their runtime's own
// floor for a cold start, for `agentbox bench` to hold the cold start
// against: a sandbox made with Create's hardening from cfg, running `true`
// in place of the guest, from its creation until it has exited. What is
// left of it is removed afterwards, outside the time.
type ColdFloorer interface {
	ColdFloor(ctx context.Context, cfg Config) (time.Duration, error)
}

// DisplayFloorer is implemented by backends that can also time a cold
// start's floor with its display: the sandbox ColdFloor makes, running
// the X server as the guest starts it (Xvfb at cfg's screen) instead of
// `true`, until the server reports that it accepts connections. Every
// environment has an X server, so this is the least a cold start can cost
// beside the runtime's own floor; on a backend whose runtime starts in
// milliseconds (bubblewrap) it is most of it.
type DisplayFloorer interface {
	DisplayFloor(ctx context.Context, cfg Config) (time.Duration, error)
}

// ScreenWatcher is implemented by environments that can tell when their
// screen may have changed, so that a watcher (the live page) looks on a
// change instead of polling. WatchScreen returns a channel that receives
// a value (coalesced: it has a buffer of one) when the screen may have
// changed since the last Observe or Screenshot, and is closed when the
// environment's guest is gone; stop unsubscribes. To follow the screen:
// subscribe, then look, then look again on each value. Changes the
// environment cannot see (an app moving the pointer itself) come without
// one: a watcher also looks now and then. It fails with
// ErrNoScreenEvents where the sandbox cannot tell (no X DAMAGE): poll.
type ScreenWatcher interface {
	WatchScreen(ctx context.Context) (changed <-chan struct{}, stop func(), err error)
}

// Stepper is implemented by environments that can perform an action and
// take the observation after it in one exchange with the sandbox (a
// step's action followed at once by its look). The action is performed
// exactly as Act performs it, and its result and error are Act's; settle,
// when set, is a wait until stable performed after it as Act would
// perform it; then the screen is observed as Observe does. The
// observation is nil when it could not be taken with the action (the
// action failed, or the settle or the screenshot did): the caller looks
// with Observe.
type Stepper interface {
	Step(ctx context.Context, a action.Action, settle *action.Action) (action.Result, *Stepped, error)
}

// Stepped is the observation a Stepper took after the action: Observe's
// frame and state, the settle's result (when one was asked for), and how
// long the settle and the screenshot took in the sandbox.
type Stepped struct {
	Frame   *observe.Frame
	State   State
	Settled *action.Result
	Observe time.Duration
}

// Floorer is implemented by environments that can time the primitives of
// a step alone, in their sandbox (`agentbox bench`): the samples spec
// asks for.
type Floorer interface {
	Floor(ctx context.Context, spec FloorSpec) (Floor, error)
}

// RelaunchFloorer is implemented by environments whose sandbox can time
// the least a relaunch costs in it (`agentbox bench`): the app launched
// last killed and waited for until its windows are gone, its command
// started again and waited for until the window manager lists its
// window, and one capture — as a minimal program in the sandbox would do
// it, without anything agentbox adds to a relaunch (the X server's
// reset, the directories restored, the round trips, the trace). The app
// it starts is nobody's: call it on a sandbox of the bench's own, after a
// launch, and end the sandbox after.
type RelaunchFloorer interface {
	RelaunchFloor(ctx context.Context) (RelaunchFloor, error)
}

// RelaunchFloor is one sample of a relaunch's floor, in its parts.
type RelaunchFloor struct {
	Kill    time.Duration // SIGKILL until the processes ended and their windows gone
	Start   time.Duration // the command started until its window is listed
	Capture time.Duration // one capture of the screen
}

// Total is the floor: its parts in a row.
func (f RelaunchFloor) Total() time.Duration { return f.Kill + f.Start + f.Capture }

// FloorSpec says what a Floor call times: Samples of each primitive but
// the PNG encode, and PNG encodes. From is the index of the first sample,
// which sets where its motion moves the pointer: one-sample calls with
// From 0, 1, 2, … move it as one call of many would (agentbox bench takes
// the floor a sample at a time, in turn with the step's samples, on the
// same sandbox). With Unchanged, a sample is only what the floor of a
// step of an unchanged screen is made of: the empty round trip, the
// motion and the damage check (a capture and a hash without DAMAGE); no
// frame is carried, compressed or decompressed.
type FloorSpec struct {
	Samples   int
	From      int
	PNG       int
	Unchanged bool
}

// Floor is what the primitives of a step cost alone, one duration a
// sample. Ping is an empty request's round trip over the backend's
// channel, FrameTrip the round trip of one that carries a whole frame
// back, compressed as a screenshot's (FrameBytes), and Decode its
// decompression; the guest times the others in the sandbox: one XTEST
// motion with its sync, one capture of the screen (MIT-SHM when SHM), the
// check for damage of an unchanged screen (where the guest uses DAMAGE;
// none otherwise), the hash of a frame, its compression (Encode) and a PNG encode of it.
type Floor struct {
	SHM        bool
	FrameBytes int
	Ping       []time.Duration
	FrameTrip  []time.Duration
	Motion     []time.Duration
	Capture    []time.Duration
	Damage     []time.Duration
	Hash       []time.Duration
	Encode     []time.Duration
	Decode     []time.Duration
	PNG        []time.Duration
}
