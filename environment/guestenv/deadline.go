package guestenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/wire"
)

// A guest that stops answering — stopped, frozen from outside, hung — is
// the environment's fault, not the agent's: the run must end as an
// environment error within seconds, not at the run's deadline as the
// agent's timeout. Two bounds see to it, both on the host:
//
//   - Liveness. While an answer is owed, the host pings the guest whenever
//     it has heard nothing for PingEvery; the guest answers pings from its
//     read loop at once, even while it works on a long request (a 2-minute
//     wait). Silence for StallAfter ends the connection: every pending
//     call fails with ErrStalled, and the stream is closed.
//   - Every request's own deadline: what the request may legitimately take
//     (its waits, the start and window timeouts it carries, typing delays)
//     plus Slack. It catches a guest that is alive but never answers.
//
// The figures are generous for a loaded machine: a healthy guest answers a
// ping in well under a millisecond, and in the red-team runs with every
// core busy the longest silence seen while a request was pending was far
// below StallAfter (see SECURITY.md).
const (
	// PingEvery is how long the host lets the guest be silent, while an
	// answer is owed, before it pings.
	PingEvery = time.Second
	// StallAfter is how long the guest may be silent, while an answer is
	// owed and despite pings, before the host gives up on it.
	StallAfter = 15 * time.Second
	// Slack is added to what a request may legitimately take.
	Slack = 30 * time.Second
)

// ErrStalled marks calls that failed because the guest stopped answering.
var ErrStalled = errors.New("the guest stopped answering")

// noAnswerError is a request that outlived its own deadline.
type noAnswerError struct {
	method string
	limit  time.Duration
}

func (e *noAnswerError) Error() string {
	return fmt.Sprintf("the guest did not answer %s within %v", e.method, e.limit)
}

// timing holds a Client's bounds (tests shorten them).
type timing struct {
	pingEvery, stallAfter, slack time.Duration
}

var defaultTiming = timing{pingEvery: PingEvery, stallAfter: StallAfter, slack: Slack}

// call is conn.Call with the request's deadline: bound (what the request
// may take) plus the slack. A request that misses it fails with an error
// of environment.ErrGuest (through wrap).
func (c *Client) call(ctx context.Context, method string, bound time.Duration, in, out any, payload []byte) ([]byte, error) {
	if c.calls.Add(1) == 1 {
		c.busySince.Store(time.Now().UnixNano())
	}
	defer c.calls.Add(-1)
	limit := bound + c.timing.slack
	cctx, cancel := context.WithTimeoutCause(ctx, limit, &noAnswerError{method, limit})
	defer cancel()
	p, err := c.conn.Call(cctx, method, in, out, payload)
	if err != nil && ctx.Err() == nil {
		var na *noAnswerError
		if errors.As(context.Cause(cctx), &na) {
			return nil, na
		}
	}
	return p, err
}

// sent is a request whose answer is owed (send): its wait has the
// request's deadline, counted from the send.
type sent struct {
	p      *wire.Pending
	method string
	limit  time.Duration
	at     time.Time
}

// send writes a request without waiting for its answer: the guest answers
// requests in turn, so several can be on their way (a file's chunks, the
// app's files behind the display's start). bound is what the request may
// take once the guest comes to it, with everything sent before it. Every
// sent must be waited for (wait).
func (c *Client) send(method string, bound time.Duration, in any, payload []byte) (*sent, error) {
	if c.calls.Add(1) == 1 {
		c.busySince.Store(time.Now().UnixNano())
	}
	p, err := c.conn.Send(method, in, payload)
	if err != nil {
		c.calls.Add(-1)
		return nil, err
	}
	return &sent{p: p, method: method, limit: bound + c.timing.slack, at: time.Now()}, nil
}

// wait waits for s's answer, as call does.
func (c *Client) wait(ctx context.Context, s *sent, out any) ([]byte, error) {
	defer c.calls.Add(-1)
	cctx, cancel := context.WithDeadlineCause(ctx, s.at.Add(s.limit), &noAnswerError{s.method, s.limit})
	defer cancel()
	p, err := s.p.Wait(cctx, out)
	if err != nil && ctx.Err() == nil {
		var na *noAnswerError
		if errors.As(context.Cause(cctx), &na) {
			return nil, na
		}
	}
	return p, err
}

// watch is the liveness check (see PingEvery); it runs until the stream
// ends. closer, if not nil, is closed when the guest stalls, so a write
// blocked on a guest that no longer reads returns too.
func (c *Client) watch(closer io.Closer) {
	tick := time.NewTicker(c.timing.pingEvery / 2)
	defer tick.Stop()
	var pinging atomic.Bool
	for {
		select {
		case <-c.conn.Done():
			return
		case <-tick.C:
		}
		// Only requests count: a ping left unanswered when the last request
		// returned (say, the sandbox was frozen while the agent thinks)
		// owes nothing.
		if c.calls.Load() == 0 {
			continue
		}
		since := c.conn.LastRead()
		if busy := time.Unix(0, c.busySince.Load()); busy.After(since) {
			since = busy
		}
		silent := time.Since(since)
		switch {
		case silent >= c.timing.stallAfter:
			why := fmt.Errorf("%w: nothing from it for %v while a request was outstanding (stopped, frozen or hung)",
				ErrStalled, silent.Round(time.Millisecond))
			c.stalled.Store(&why)
			c.conn.Abort(why)
			if closer != nil {
				_ = closer.Close()
			}
			return
		case silent >= c.timing.pingEvery && pinging.CompareAndSwap(false, true):
			go func() {
				defer pinging.Store(false)
				ctx, cancel := context.WithTimeout(context.Background(), c.timing.stallAfter)
				defer cancel()
				_, _ = c.conn.Call(ctx, wire.MethodPing, nil, nil, nil)
			}()
		}
	}
}

// Bounds of what each request may take in the guest; they mirror the
// guest's own bounds (guest/display.go, guest/act.go), which answer with
// an error first.
const (
	xCall      = 5 * time.Second  // the guest's bound on one X call
	maxRequest = 10 * time.Minute // the guest's bound on any request
)

// actBound is what an action may take in the guest: its waits, or its
// input with the guest's per-character, per-repeat and per-point
// allowances, plus the X calls around it.
func actBound(a action.Action) time.Duration {
	d := 2 * xCall
	switch {
	case a.Kind == action.Wait && a.Until != "":
		ms := a.MS
		if ms <= 0 {
			ms = 10_000 // the guest's default
		}
		d += time.Duration(ms) * time.Millisecond
	case a.Kind == action.Wait:
		d += time.Duration(a.MS) * time.Millisecond
	default:
		d += time.Duration(utf8.RuneCountInString(a.Text))*(time.Duration(a.DelayMS)*time.Millisecond+5*time.Millisecond) +
			time.Duration(max(a.Repeat, 1))*10*time.Millisecond + time.Duration(len(a.Path))*50*time.Millisecond
	}
	return d
}

// stallError returns, for an error caused by a stalled guest, one of
// environment.ErrGuest that says so.
func (c *Client) stallError(what string, err error) error {
	why := c.stalled.Load()
	if why == nil || !errors.Is(err, ErrStalled) {
		return nil
	}
	return fmt.Errorf("%w: %s: %w", environment.ErrGuest, what, *why)
}
