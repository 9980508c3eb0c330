package session

import (
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/lockrank"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/trace"
)

// Event kinds: what a session tells its Listener as it happens.
const (
	EventOutput  = "output"  // the app wrote to stdout or stderr
	EventWindow  = "window"  // a window was mapped, retitled or unmapped
	EventExit    = "exit"    // the app ended
	EventDropped = "dropped" // the host discarded events beyond their bound
	EventStep    = "step"    // a step's action was recorded, before it runs
	EventResult  = "result"  // what a step's action did
	EventEnd     = "end"     // the episode ended
	// EventTakeover: a person took control (By); EventHandBack: they
	// handed it back (By, Reason, Steps: how many they took);
	// EventNotApplied: an action of Actor that a person's control
	// preempted was not performed (Action). Each is spelled as the trace
	// records it (steps.jsonl's events), one name on every surface.
	EventTakeover   = trace.EventTakeover
	EventHandBack   = trace.EventHandBack
	EventNotApplied = trace.EventNotApplied
	// EventEpisode starts an episode in a log that holds several in a row
	// (a server's environment): Episode, RunID and Trace say which. The
	// session never sends it; whoever runs the episodes adds it.
	EventEpisode = "episode"
	// EventApproval: the policy gate asks whether a step's action may run
	// (Approval, with Answer empty), then says how it was answered
	// (Answer "allowed" or "denied", By, Reason).
	EventApproval = "approval"
)

// EventKinds lists every event kind, in the order serve/openapi.json's
// Event schema gives them; a test holds it to the constants above and to
// every surface that shows events (serve/contract_test.go).
var EventKinds = []string{EventOutput, EventWindow, EventExit, EventDropped, EventStep, EventResult,
	EventEnd, EventTakeover, EventHandBack, EventNotApplied, EventEpisode, EventApproval}

// Event is one thing that happened in a session, for whoever watches it
// (a server's event stream, a live page). Only the fields of its Kind are
// set.
type Event struct {
	// Seq numbers the events of an EventLog from 1; 0 until one is added.
	Seq  int64  `json:"seq,omitempty"`
	Kind string `json:"kind"`
	// T is the time since the session started.
	T time.Duration `json:"t_ns"`
	// Episode, RunID and Trace are set by whoever runs several episodes
	// into one log (the session leaves them empty): the episode's number,
	// and for an episode event its run ID and trace directory.
	Episode int    `json:"episode,omitempty"`
	RunID   string `json:"run_id,omitempty"`
	Trace   string `json:"trace,omitempty"`

	// output
	Stream observe.Stream `json:"stream,omitempty"`
	Text   string         `json:"text,omitempty"`
	// output: bytes the cap discarded; dropped: events discarded.
	Dropped int64 `json:"dropped,omitempty"`

	// window: "mapped", "title", "unmapped"; dropped: the kind.
	Change string          `json:"change,omitempty"`
	Window *observe.Window `json:"window,omitempty"`

	// exit
	Exit *observe.Exit `json:"exit,omitempty"`

	// step and result
	Step    int            `json:"step,omitempty"`
	Actor   string         `json:"actor,omitempty"`
	Action  *action.Action `json:"action,omitempty"`
	Invalid string         `json:"invalid,omitempty"`
	Result  *action.Result `json:"result,omitempty"`

	// end
	End *End `json:"end,omitempty"`

	// approval: the ask; once answered, the answer ("allowed", "denied")
	// with By and Reason.
	Approval *policy.Request `json:"approval,omitempty"`
	Answer   string          `json:"answer,omitempty"`

	// takeover and hand_back: who; hand_back: why, and the steps taken;
	// approval: who answered, and why for an answer no person gave.
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
	Steps  int    `json:"steps,omitempty"`

	// size is what the event holds in memory, roughly (EventLog's bound).
	size int
}

// Relay passes an environment's events on to the session that takes the
// environment over. An environment created before its session exists (a
// warm pool's) is created with a Relay as its Config.Events; Open attaches
// the session's receiver. Events before that (there is no app yet) are
// discarded, unless the relay holds them (Hold: an app launched ahead).
type Relay struct {
	mu lockrank.RWMutex[relayLock]
	to eventReceiver
	// held, while set (Hold), keeps the events for the session that
	// takes the environment over (handOver).
	held *heldEvents
}

// eventReceiver is what a Relay forwards to.
type eventReceiver interface {
	environment.Events
	environment.DropCounter
}

// NewRelay makes a Relay that discards until attached.
func NewRelay() *Relay { return &Relay{} }

func (r *Relay) attach(to eventReceiver) {
	r.mu.Lock()
	r.to = to
	r.mu.Unlock()
}

// route is where an event goes: held (true: f was kept under the
// relay's lock, so a hand-over sees it), or the target (nil: dropped).
func (r *Relay) route(f func(eventReceiver)) (eventReceiver, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.held != nil {
		if f != nil {
			r.held.add(f)
		}
		return nil, true
	}
	return r.to, false
}

var (
	_ environment.Events      = (*Relay)(nil)
	_ environment.DropCounter = (*Relay)(nil)
	_ environment.NetRecorder = (*Relay)(nil)
)

// Output implements environment.Events.
func (r *Relay) Output(stream observe.Stream, data []byte, dropped int64) {
	r.mu.RLock()
	if h := r.held; h != nil {
		h.output(stream, data, dropped)
		r.mu.RUnlock()
		return
	}
	t := r.to
	r.mu.RUnlock()
	if t != nil {
		t.Output(stream, data, dropped)
	}
}

// Exited implements environment.Events.
func (r *Relay) Exited(e observe.Exit) {
	r.mu.RLock()
	if h := r.held; h != nil {
		h.add(func(to eventReceiver) { to.Exited(e) })
		h.once.Do(func() { close(h.exited) })
		r.mu.RUnlock()
		return
	}
	t := r.to
	r.mu.RUnlock()
	if t != nil {
		t.Exited(e)
	}
}

// Window implements environment.Events.
func (r *Relay) Window(kind string, w observe.Window) {
	if t, _ := r.route(func(to eventReceiver) { to.Window(kind, w) }); t != nil {
		t.Window(kind, w)
	}
}

// Dropped implements environment.DropCounter.
func (r *Relay) Dropped(kind string, n int64) {
	if t, _ := r.route(func(to eventReceiver) { to.Dropped(kind, n) }); t != nil {
		t.Dropped(kind, n)
	}
}

// Network implements environment.NetRecorder: a sandbox created ahead
// with a network (Config.Network) tells its connections to the session
// that took it over.
func (r *Relay) Network(ev observe.NetEvent) {
	t, _ := r.route(func(to eventReceiver) {
		if nr, ok := to.(environment.NetRecorder); ok {
			nr.Network(ev)
		}
	})
	if t, ok := t.(environment.NetRecorder); ok {
		t.Network(ev)
	}
}
