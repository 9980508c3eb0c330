package guestenv

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/wire"
)

// screenWatch holds the subscribers of the guest's screen events
// (wire.EventScreen).
type screenWatch struct {
	// calls serialises the watch requests, so that an "off" for the last
	// subscriber never overtakes an "on" for the next.
	calls chan struct{}
	mu    sync.Mutex // guards what follows (never held across a call)
	subs  map[chan struct{}]struct{}
	done  bool // the stream ended: the channels are closed
}

// WatchScreen implements environment.ScreenWatcher: it turns the guest's
// screen events on (wire.MethodWatch) while anyone subscribes.
func (c *Client) WatchScreen(ctx context.Context) (<-chan struct{}, func(), error) {
	w := &c.sw
	select {
	case w.calls <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	defer func() { <-w.calls }()
	var resp wire.WatchResponse
	if _, err := c.call(ctx, wire.MethodWatch, 0, wire.WatchRequest{On: true}, &resp, nil); err != nil {
		return nil, nil, c.wrap("watch", err)
	}
	if !resp.Damage {
		return nil, nil, fmt.Errorf("watch: %w: the guest's X server has no DAMAGE", environment.ErrNoScreenEvents)
	}
	ch := make(chan struct{}, 1)
	c.sw.mu.Lock()
	if w.done {
		c.sw.mu.Unlock()
		return nil, nil, fmt.Errorf("watch: %w", environment.ErrClosed)
	}
	w.subs[ch] = struct{}{}
	c.sw.mu.Unlock()
	return ch, func() { c.unwatch(ch) }, nil
}

// unwatch removes ch and turns the events off after the last subscriber.
func (c *Client) unwatch(ch chan struct{}) {
	w := &c.sw
	w.calls <- struct{}{}
	defer func() { <-w.calls }()
	c.sw.mu.Lock()
	_, ok := w.subs[ch]
	delete(w.subs, ch)
	last := ok && len(w.subs) == 0 && !w.done
	c.sw.mu.Unlock()
	if !last {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = c.call(ctx, wire.MethodWatch, 0, wire.WatchRequest{On: false}, nil, nil)
}

// screenChanged wakes every subscriber without blocking (EventScreen).
func (c *Client) screenChanged() {
	c.sw.mu.Lock()
	defer c.sw.mu.Unlock()
	for ch := range c.sw.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// closeWatch closes the subscribers' channels once the stream has ended.
func (c *Client) closeWatch() {
	c.sw.mu.Lock()
	defer c.sw.mu.Unlock()
	if c.sw.done {
		return
	}
	c.sw.done = true
	for ch := range c.sw.subs {
		close(ch)
	}
	c.sw.subs = nil
}
