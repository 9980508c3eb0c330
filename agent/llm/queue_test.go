package llm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/agent"
)

// TestQueueBounds: a queue of 2 never lets more than two attempts reach
// the server at once, however many episodes ask; each request's wait is
// added to its decision's Waits.
func TestQueueBounds(t *testing.T) {
	var inFlight, most atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		inFlight.Add(-1)
	}))
	defer srv.Close()
	q := NewQueue(2)
	var wg sync.WaitGroup
	var waited atomic.Int64
	for range 8 {
		wg.Go(func() {
			ctx, w := agent.WithWaits(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
			resp, err := q.Middleware(req, http.DefaultClient.Do)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			waited.Add(int64(w.Total()))
		})
	}
	wg.Wait()
	if most.Load() > 2 {
		t.Errorf("%d attempts at once through a queue of 2", most.Load())
	}
	served, total := q.Stats()
	if served != 8 || total <= 0 || time.Duration(waited.Load()) != total {
		t.Errorf("served %d, waited %v in all, %v in the decisions' Waits", served, total, time.Duration(waited.Load()))
	}
}

// TestQueueSharedBackOff: a 429 with Retry-After holds every request of
// the queue, not only the one that got it.
func TestQueueSharedBackOff(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	q := NewQueue(4)
	do := func() time.Duration {
		ctx, w := agent.WithWaits(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
		resp, err := q.Middleware(req, http.DefaultClient.Do)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return w.Total()
	}
	do() // the 429
	if w := do(); w < 900*time.Millisecond {
		t.Errorf("another episode's request waited %v after a 429 asking for 1 s", w)
	}
}

// TestQueueGivesUpWithItsContext: a request whose decision ends while it
// waits for a turn returns at once with the context's error.
func TestQueueGivesUpWithItsContext(t *testing.T) {
	q := NewQueue(1)
	q.slots <- struct{}{} // the one slot taken
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1:1", nil)
	if _, err := q.Middleware(req, http.DefaultClient.Do); err == nil {
		t.Fatal("no error waiting past the decision's deadline")
	}
}
