package llm

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codegirl-games/agentbox/agent"
)

// Queue is one limit on the model requests of every episode that shares
// it (eval --model-concurrency N): at most N attempts in flight at once,
// the others waiting their turn in order, and one back-off for all — a
// 429 whose server says when to come back (Retry-After) holds every
// request of the queue until then, not only the one that got it. The time
// a request waited is added to its decision's agent.Waits, so a step
// records its queue time apart from its model time.
type Queue struct {
	slots chan struct{}

	mu    sync.Mutex
	until time.Time // no attempt starts before this (a shared back-off)

	waited atomic.Int64 // ns, over all requests
	served atomic.Int64
}

// NewQueue makes a queue of n slots (n ≥ 1).
func NewQueue(n int) *Queue {
	if n < 1 {
		n = 1
	}
	return &Queue{slots: make(chan struct{}, n)}
}

// Stats are the queue's totals: requests served and the time they waited.
func (q *Queue) Stats() (served int64, waited time.Duration) {
	return q.served.Load(), time.Duration(q.waited.Load())
}

// Middleware takes a slot for one attempt (after any shared back-off)
// and gives it back when the attempt's answer is in. It goes inside the
// retrier (each attempt queues again) and outside the attempt's timeout
// (waiting is not the model's time).
func (q *Queue) Middleware(req *http.Request, next Next) (*http.Response, error) {
	ctx := req.Context()
	t := time.Now()
	if err := q.acquire(ctx); err != nil {
		agent.AddWait(ctx, time.Since(t))
		return nil, fmt.Errorf("waiting for a turn at the model: %w", err)
	}
	wait := time.Since(t)
	agent.AddWait(ctx, wait)
	q.waited.Add(int64(wait))
	q.served.Add(1)
	resp, err := next(req)
	<-q.slots
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		if d, ok := retryAfter(resp.Header); ok {
			q.backOff(min(d, MaxRetryAfter))
		}
	}
	return resp, err
}

func (q *Queue) acquire(ctx context.Context) error {
	for {
		q.mu.Lock()
		d := time.Until(q.until)
		q.mu.Unlock()
		if d <= 0 {
			break
		}
		tm := time.NewTimer(d)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		}
	}
	select {
	case q.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// backOff holds every attempt of the queue for d from now.
func (q *Queue) backOff(d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if u := time.Now().Add(d); u.After(q.until) {
		q.until = u
	}
}

// QueueSlot is where a model adapter keeps the queue it was given
// (SetQueue): its Middleware is the queue's, or passes straight through
// without one.
type QueueSlot struct{ q atomic.Pointer[Queue] }

// SetQueue makes the adapter's model requests wait their turn in q.
func (s *QueueSlot) SetQueue(q *Queue) { s.q.Store(q) }

// Middleware is the queue's middleware, or nothing without a queue.
func (s *QueueSlot) Middleware(req *http.Request, next Next) (*http.Response, error) {
	if q := s.q.Load(); q != nil {
		return q.Middleware(req, next)
	}
	return next(req)
}

// Queued is implemented by model agents whose requests can share a Queue.
type Queued interface {
	SetQueue(*Queue)
}
