package session

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRateLimiter: 0 is no bound; a bucket starts full (a second's worth,
// at least one action) and an action beyond it waits until the context
// ends, then gives its reservation back.
func TestRateLimiter(t *testing.T) {
	ctx := t.Context()
	free := newRateLimiter(0)
	for range 10_000 {
		if d, err := free.wait(ctx); d != 0 || err != nil {
			t.Fatalf("no bound: waited %v, %v", d, err)
		}
	}

	burst := newRateLimiter(50)
	for i := range 50 {
		if d, err := burst.wait(ctx); d != 0 || err != nil {
			t.Fatalf("action %d of a full bucket of 50: waited %v, %v", i+1, d, err)
		}
	}

	slow := newRateLimiter(0.001) // one action, then one per 1000 s
	if d, err := slow.wait(ctx); d != 0 || err != nil {
		t.Fatalf("first action: waited %v, %v", d, err)
	}
	for range 2 { // a cancelled wait gives its place back: the next waits as long
		cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		d, err := slow.wait(cctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || d != 0 {
			t.Fatalf("second action: waited %v, %v; want the context's end", d, err)
		}
	}
	if r := slow.l.Reserve(); r.Delay() < 900*time.Second || r.Delay() > 1100*time.Second {
		t.Errorf("after two cancelled waits the next action waits %v, want about 1000 s", r.Delay())
	}
}
