package agent

import (
	"context"
	"sync/atomic"
	"time"
)

// Waits counts how long a decision waited in a queue for model calls
// shared with other episodes (eval --model-concurrency), apart from the
// model's own time. The session puts one in each Decide's context; the
// queue adds to it (AddWait).
type Waits struct{ ns atomic.Int64 }

// Total is the time waited so far.
func (w *Waits) Total() time.Duration { return time.Duration(w.ns.Load()) }

type waitsKey struct{}

// WithWaits gives ctx a fresh Waits.
func WithWaits(ctx context.Context) (context.Context, *Waits) {
	w := &Waits{}
	return context.WithValue(ctx, waitsKey{}, w), w
}

// AddWait adds d to ctx's Waits, if it has one.
func AddWait(ctx context.Context, d time.Duration) {
	if w, ok := ctx.Value(waitsKey{}).(*Waits); ok {
		w.ns.Add(int64(d))
	}
}
