package session

import (
	"errors"
	"reflect"
	"sync"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/lockrank"
	"github.com/codegirl-games/agentbox/observe"
)

// Launched is an app launched ahead in a prepared environment (a warm
// pool's, serve --pool-launch): the episode that takes the environment
// over finds its app running and ready, and its first observation is the
// first thing it asks of the sandbox. The app has run idle (no input)
// from Started until the hand-over; the trace records how long
// (run.json's launched_ahead).
type Launched struct {
	// Spec is what the app was launched with (LaunchAheadSpec of the
	// config it was launched for); Open takes the environment only for a
	// config whose own spec is the same (SameLaunch).
	Spec   environment.LaunchSpec
	Result environment.LaunchResult
	// Started is when the launch began; Took how long it took, to the
	// app's window (and ready output).
	Started time.Time
	Took    time.Duration
	// Held, when set, is when the app was stopped after its launch
	// (environment.AppHolder): the episode that takes it over lets it go
	// before its first observation.
	Held time.Time
}

// ErrNoLaunchAhead is wrapped by LaunchAheadSpec's errors: the episode's
// app must be launched by the episode itself.
var ErrNoLaunchAhead = errors.New("the app cannot be launched ahead")

// LaunchAheadSpec is the launch an episode of cfg would make (its app,
// its log cap, its task's inputs), for launching it ahead in a pooled
// sandbox; the error (wrapping ErrNoLaunchAhead) says why an episode of
// cfg launches its app itself: its app runs on a virtual clock (the
// episode sets the clock at the launch).
func LaunchAheadSpec(cfg Config) (environment.LaunchSpec, error) {
	if cfg.App == nil {
		return environment.LaunchSpec{}, errors.Join(ErrNoLaunchAhead, errors.New("no app"))
	}
	cfg.defaults()
	if cfg.Clock.Virtual {
		return environment.LaunchSpec{}, errors.Join(ErrNoLaunchAhead, errors.New("the app runs on a virtual clock, started by the episode"))
	}
	return environment.LaunchSpec{App: cfg.App, ReadyTimeout: cfg.ReadyTimeout, LogCap: cfg.LogCap, Inputs: cfg.Inputs}, nil
}

// SameLaunch reports whether an app launched with a may serve an episode
// that would launch with b: the same app files (copies of one Load) and
// manifest (command, arguments, environment, readiness), the same log
// cap, the same task inputs (one loaded set, or none on either side) and
// no virtual clock on either. The ready timeout and the launch's own
// first look do not matter once the app is up.
func SameLaunch(a, b environment.LaunchSpec) bool {
	if a.App == nil || b.App == nil || !a.Clock.IsZero() || !b.Clock.IsZero() {
		return false
	}
	sameApp := a.App == b.App || a.App.SameFiles(b.App) ||
		len(a.App.Files) == 0 && len(b.App.Files) == 0 && a.App.Dir == b.App.Dir && a.App.InImage == b.App.InImage
	if !sameApp {
		return false
	}
	return reflect.DeepEqual(a.App.Manifest, b.App.Manifest) && a.LogCap == b.LogCap && a.Inputs == b.Inputs
}

// LaunchMismatch says why an app launched with a may not serve an episode
// that would launch with b ("" when SameLaunch holds), for the trace.
func LaunchMismatch(a, b environment.LaunchSpec) string {
	switch {
	case SameLaunch(a, b):
		return ""
	case a.App == nil || b.App == nil:
		return "no app"
	case !b.Clock.IsZero() || !a.Clock.IsZero():
		return "the episode's app runs on a virtual clock"
	case a.Inputs != b.Inputs:
		return "the episode stages other task inputs"
	case a.LogCap != b.LogCap:
		return "the episode has another log cap"
	case !reflect.DeepEqual(a.App.Manifest, b.App.Manifest):
		return "the episode launches its app with another manifest (command, arguments, environment)"
	}
	return "the episode runs another app"
}

// Hold makes the relay keep the environment's events (the output, the
// windows, the exit of an app launched ahead) until Open attaches a
// session, which receives them first, in order. The channel is closed
// when the app's exit arrives while held: an app that ended while its
// sandbox waited in a pool. Output beyond heldOutputCap bytes is counted
// as dropped.
func (r *Relay) Hold() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held == nil {
		r.held = &heldEvents{exited: make(chan struct{})}
	}
	return r.held.exited
}

// heldOutputCap bounds the output a held relay keeps.
const heldOutputCap = 1 << 20

type heldEvents struct {
	mu     lockrank.Mutex[heldLock]
	evs    []func(eventReceiver)
	bytes  int
	exited chan struct{}
	once   sync.Once
}

type heldLock struct{}

func (heldLock) Rank() lockrank.Rank { return lockrank.Leaf }
func (heldLock) String() string      { return "Relay.held (a leaf)" }

func (h *heldEvents) add(f func(eventReceiver)) {
	h.mu.Lock()
	h.evs = append(h.evs, f)
	h.mu.Unlock()
}

func (h *heldEvents) output(stream observe.Stream, data []byte, dropped int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bytes+len(data) > heldOutputCap {
		dropped += int64(len(data))
		data = nil
	} else {
		data = append([]byte(nil), data...)
		h.bytes += len(data)
	}
	h.evs = append(h.evs, func(to eventReceiver) { to.Output(stream, data, dropped) })
}

func (h *heldEvents) take() []func(eventReceiver) {
	h.mu.Lock()
	defer h.mu.Unlock()
	evs := h.evs
	h.evs = nil
	return evs
}

// handOver attaches to, first passing it what the relay held, in order
// (events that arrive meanwhile are held behind them).
func (r *Relay) handOver(to eventReceiver) {
	for {
		r.mu.Lock()
		var evs []func(eventReceiver)
		if r.held != nil {
			evs = r.held.take()
		}
		if len(evs) == 0 {
			r.held = nil
			r.to = to
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		for _, f := range evs {
			f(to)
		}
	}
}
