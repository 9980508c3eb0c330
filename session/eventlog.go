package session

import (
	"context"

	"github.com/codegirl-games/agentbox/internal/lockrank"
)

// The event log: what a server or a page keeps of a session's events
// (Config.Listener), numbered, for readers at their own pace.

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
	mu     lockrank.Mutex[eventLogLk]
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
