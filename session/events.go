package session

import (
	"context"
	"sync"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
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
)

// EventKinds lists every event kind, in the order serve/openapi.json's
// Event schema gives them; a test holds it to the constants above and to
// every surface that shows events (serve/contract_test.go).
var EventKinds = []string{EventOutput, EventWindow, EventExit, EventDropped, EventStep, EventResult,
	EventEnd, EventTakeover, EventHandBack, EventNotApplied, EventEpisode}

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

	// takeover and hand_back: who; hand_back: why, and the steps taken.
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
	Steps  int    `json:"steps,omitempty"`

	// size is what the event holds in memory, roughly (EventLog's bound).
	size int
}

// sizeOf is an event's rough footprint.
func sizeOf(e *Event) int {
	n := 128 + len(e.Text) + len(e.Invalid) + len(e.By) + len(e.Reason)
	if e.Window != nil {
		n += len(e.Window.Title)
	}
	if e.Action != nil {
		n += len(e.Action.Text) + len(e.Action.Message) + 16*len(e.Action.Path)
	}
	if e.Result != nil {
		n += len(e.Result.Error)
	}
	if e.End != nil {
		n += len(e.End.Message)
	}
	return n
}

// EventLog keeps the latest events of a session (or of several in a row)
// within a byte budget, numbered, for readers that follow at their own
// pace: a reader that falls behind loses the oldest events (it sees the
// gap in Seq), and nothing ever waits for a reader. Its methods are safe
// for concurrent use.
type EventLog struct {
	mu     sync.Mutex
	events []Event
	bytes  int
	max    int
	next   int64
	closed bool
	wake   chan struct{} // closed and replaced on every Add
}

// NewEventLog keeps up to maxBytes of events (at least the latest one).
func NewEventLog(maxBytes int) *EventLog {
	return &EventLog{max: maxBytes, next: 1, wake: make(chan struct{})}
}

// Add appends an event, numbering it, and drops the oldest beyond the
// budget. Adding to a closed log does nothing.
func (l *EventLog) Add(e Event) {
	e.size = sizeOf(&e)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	e.Seq = l.next
	l.next++
	l.events = append(l.events, e)
	l.bytes += e.size
	drop := 0
	for l.bytes > l.max && drop < len(l.events)-1 {
		l.bytes -= l.events[drop].size
		drop++
	}
	if drop > 0 {
		l.events = append(l.events[:0], l.events[drop:]...)
	}
	close(l.wake)
	l.wake = make(chan struct{})
}

// Close ends the log: readers get what is left, then ok false.
func (l *EventLog) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.wake)
	}
}

// Read returns up to max events numbered above after, waiting until there
// is one, the log is closed (ok false once nothing is left) or ctx ends.
func (l *EventLog) Read(ctx context.Context, after int64, max int) (events []Event, ok bool, err error) {
	for {
		l.mu.Lock()
		for i := range l.events {
			if l.events[i].Seq > after {
				n := min(len(l.events)-i, max)
				events = append([]Event(nil), l.events[i:i+n]...)
				break
			}
		}
		closed, wake := l.closed, l.wake
		l.mu.Unlock()
		if len(events) > 0 {
			return events, true, nil
		}
		if closed {
			return nil, false, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, true, ctx.Err()
		}
	}
}

// Relay passes an environment's events on to the session that takes the
// environment over. An environment created before its session exists (a
// warm pool's) is created with a Relay as its Config.Events; Open attaches
// the session's receiver. Events before that (there is no app yet) are
// discarded.
type Relay struct {
	mu sync.RWMutex
	to eventReceiver
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

func (r *Relay) target() eventReceiver {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.to
}

var (
	_ environment.Events      = (*Relay)(nil)
	_ environment.DropCounter = (*Relay)(nil)
	_ environment.NetRecorder = (*Relay)(nil)
)

// Output implements environment.Events.
func (r *Relay) Output(stream observe.Stream, data []byte, dropped int64) {
	if t := r.target(); t != nil {
		t.Output(stream, data, dropped)
	}
}

// Exited implements environment.Events.
func (r *Relay) Exited(e observe.Exit) {
	if t := r.target(); t != nil {
		t.Exited(e)
	}
}

// Window implements environment.Events.
func (r *Relay) Window(kind string, w observe.Window) {
	if t := r.target(); t != nil {
		t.Window(kind, w)
	}
}

// Dropped implements environment.DropCounter.
func (r *Relay) Dropped(kind string, n int64) {
	if t := r.target(); t != nil {
		t.Dropped(kind, n)
	}
}

// Network implements environment.NetRecorder: a sandbox created ahead
// with a network (Config.Network) tells its connections to the session
// that took it over.
func (r *Relay) Network(ev observe.NetEvent) {
	if t, ok := r.target().(environment.NetRecorder); ok {
		t.Network(ev)
	}
}
