package guest

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/codegirl-games/agentbox/observe"
)

// readyWatch notices the app's ready output (LaunchRequest.ReadyOutput)
// in what the guest forwards, so that the launch's screenshot waits
// for it. The host's own wait decides whether the app was ready; this
// only times the screenshot.
type readyWatch struct {
	text []byte
	done chan struct{}

	mu   sync.Mutex
	tail map[observe.Stream][]byte // the end of each stream, for a text split across reads
}

func newReadyWatch(text string) *readyWatch {
	return &readyWatch{text: []byte(text), done: make(chan struct{}), tail: map[observe.Stream][]byte{}}
}

// feed looks for the text in what a stream gave (nil: nothing watched).
func (r *readyWatch) feed(stream observe.Stream, b []byte) {
	if r == nil || len(b) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.done:
		return
	default:
	}
	t := append(r.tail[stream], b...)
	if bytes.Contains(t, r.text) {
		close(r.done)
		r.tail = nil
		return
	}
	if keep := len(r.text) - 1; len(t) > keep {
		t = t[len(t)-keep:]
	}
	r.tail[stream] = bytes.Clone(t)
}

// wait waits for the text until started+readyMS (no bound when 0), the
// app's exit or ctx's end; it reports whether the text came.
func (r *readyWatch) wait(ctx context.Context, started time.Time, readyMS int, exited <-chan struct{}) bool {
	var deadline <-chan time.Time
	if readyMS > 0 {
		t := time.NewTimer(time.Until(started.Add(time.Duration(readyMS) * time.Millisecond)))
		defer t.Stop()
		deadline = t.C
	}
	select {
	case <-r.done:
		return true
	case <-exited:
		select {
		case <-r.done:
			return true
		default:
			return false
		}
	case <-deadline:
	case <-ctx.Done():
	}
	return false
}
