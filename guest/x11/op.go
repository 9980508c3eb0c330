package x11

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A lane serialises the operations of one kind. The token is taken by the
// caller when an operation begins and normally given back when it ends; if one
// of the operation's X requests outlives the caller's deadline, the token
// passes to the goroutine waiting for that request and is given back only
// when the server answers (or the connection dies). Later operations of the
// same kind therefore queue behind a stalled request instead of interleaving
// with it, and every caller still returns by its own deadline.
type lane struct{ ch chan struct{} }

func newLane() lane { return lane{ch: make(chan struct{}, 1)} }

// op is one operation holding a lane.
type op struct {
	c        *Conn
	ctx      context.Context
	l        *lane
	name     string
	orphaned bool // the lane token now belongs to a stalled request
}

// begin takes l's token, waiting at most until ctx is done.
func (c *Conn) begin(ctx context.Context, l *lane, name string) (*op, error) {
	if c.isClosed() {
		return nil, fmt.Errorf("x11: %s: %w", name, ErrClosed)
	}
	if ctx.Err() != nil {
		return nil, ctxError(ctx, name)
	}
	select {
	case l.ch <- struct{}{}:
	case <-ctx.Done():
		return nil, ctxError(ctx, name)
	case <-c.closed:
		return nil, fmt.Errorf("x11: %s: %w", name, ErrClosed)
	}
	return &op{c: c, ctx: ctx, l: l, name: name}, nil
}

// beginClosing takes l's token during Close (the Conn is already closed).
func (c *Conn) beginClosing(ctx context.Context, l *lane) (*op, error) {
	select {
	case l.ch <- struct{}{}:
		return &op{c: c, ctx: ctx, l: l, name: "close"}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// end gives the lane token back unless a stalled request owns it.
func (o *op) end() {
	if !o.orphaned {
		<-o.l.ch
	}
}

// do runs f, which sends X requests and waits for their replies, and returns
// its error, or a context error if o's context ends first. In that case f
// keeps running and the lane stays taken until it returns. f must not touch
// memory the caller uses after do returns.
func (o *op) do(f func() error) error {
	if o.orphaned {
		return ctxError(o.ctx, o.name)
	}
	if o.ctx.Err() != nil {
		return ctxError(o.ctx, o.name)
	}
	if o.c.isClosed() {
		return ErrClosed
	}
	if o.ctx.Done() == nil {
		return f() // no deadline, no cancellation: nothing to race against
	}
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-o.ctx.Done():
		select {
		case err := <-done: // both ready: prefer the answer
			return err
		default:
		}
		o.orphaned = true
		go func() {
			<-done
			<-o.l.ch
		}()
		return ctxError(o.ctx, o.name)
	}
}

// wrap turns an error from do (or from code run under the op) into the
// package's error for the operation: context and package errors pass through
// with the operation's name, xgb's io.EOF becomes ErrClosed.
func (o *op) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	var te timeoutError
	if errors.As(err, &te) || errors.Is(err, context.Canceled) {
		return err // ctxError already names the operation
	}
	return xError(what, err)
}

// sleep waits d or until o's context is done.
func (o *op) sleep(d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-o.ctx.Done():
		return ctxError(o.ctx, o.name)
	}
}
