package guestenv

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/version"
	"github.com/codegirl-games/agentbox/wire"
)

// fakeGuest speaks the guest's side of the protocol over pipes. Hello is
// answered; every other request goes to handle, on the guest's read loop
// (so a handle that blocks stops the guest from reading, as a stopped
// process would).
type fakeGuest struct {
	conn   *wire.Conn
	handle func(c *wire.Conn, m *wire.Message)
}

// startFake connects a client to a fake guest with the given timing.
func startFake(t *testing.T, tm timing, handle func(c *wire.Conn, m *wire.Message)) *Client {
	t.Helper()
	hostR, guestW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	guestR, hostW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, f := range []*os.File{hostR, guestW, guestR, hostW} {
			f.Close()
		}
	})
	g := &fakeGuest{conn: wire.NewConn(guestR, guestW), handle: handle}
	go func() {
		_ = g.conn.Notify(wire.EventHello, wire.Hello{Magic: wire.Magic, Protocol: wire.Protocol, Version: version.Version}, nil)
		_ = g.conn.Serve(func(m *wire.Message) {
			if m.Type != wire.Request || m.Method == wire.MethodCancel {
				return
			}
			if m.Method == wire.MethodHello {
				_ = g.conn.Reply(m.ID, m.Method, wire.Hello{Magic: wire.Magic, Protocol: wire.Protocol}, nil, nil)
				return
			}
			g.handle(g.conn, m)
		})
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := dial(ctx, hostR, hostW, nil, nil, tm)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The guest stops answering in the middle of the run (SIGSTOPped, frozen,
// hung): the run learns it within the liveness bound as a guest failure,
// not at the end of the request's own (long) deadline.
func TestStalledGuest(t *testing.T) {
	never := make(chan struct{})
	t.Cleanup(func() { close(never) })
	// Pings are answered until the act arrives; then the guest stops.
	c := startFake(t, timing{pingEvery: 20 * time.Millisecond, stallAfter: 300 * time.Millisecond, slack: time.Hour},
		func(conn *wire.Conn, m *wire.Message) {
			switch m.Method {
			case wire.MethodPing:
				_ = conn.Reply(m.ID, m.Method, nil, nil, nil)
			default:
				<-never
			}
		})
	if err := c.Ping(t.Context()); err != nil {
		t.Fatalf("control: a live guest answers: %v", err)
	}
	_, err := c.Act(t.Context(), action.Action{Kind: action.Wait, MS: 120_000})
	if !errors.Is(err, environment.ErrGuest) || !errors.Is(err, ErrStalled) {
		t.Fatalf("act on a stopped guest: %v, want a guest failure saying it stopped answering", err)
	}
	t.Logf("error: %v", err)
	// Everything after fails at once, with the same reason.
	if _, _, err := c.Observe(t.Context()); !errors.Is(err, ErrStalled) {
		t.Errorf("observe after the stall: %v", err)
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Error("the connection did not end")
	}
}

// A guest that is alive (it answers pings) but never answers a request
// fails that request at the request's own deadline.
func TestRequestDeadline(t *testing.T) {
	c := startFake(t, timing{pingEvery: 20 * time.Millisecond, stallAfter: time.Hour, slack: 200 * time.Millisecond},
		func(conn *wire.Conn, m *wire.Message) {
			if m.Method == wire.MethodPing {
				_ = conn.Reply(m.ID, m.Method, nil, nil, nil)
			} // anything else is dropped
		})
	_, err := c.Stage(t.Context(), script(t, 100))
	var na *noAnswerError
	if !errors.Is(err, environment.ErrGuest) || !errors.As(err, &na) || na.method != wire.MethodWriteFile {
		t.Fatalf("observe on a guest that never answers: %v, want a guest failure naming the request", err)
	}
	t.Logf("error: %v", err)
	if errors.Is(err, ErrStalled) {
		t.Error("a guest that answers pings was called stalled")
	}
}

// Positive control: a request that legitimately takes several times the
// liveness bound (a long wait) succeeds, because the guest keeps answering
// pings meanwhile.
func TestLongRequestOnLiveGuest(t *testing.T) {
	const stall = time.Second // generous: a loaded machine may delay the fake's answers
	c := startFake(t, timing{pingEvery: 20 * time.Millisecond, stallAfter: stall, slack: time.Minute},
		func(conn *wire.Conn, m *wire.Message) {
			if m.Method == wire.MethodPing {
				_ = conn.Reply(m.ID, m.Method, nil, nil, nil)
				return
			}
			go func() { // a worker, as the real guest has
				time.Sleep(3 * stall)
				_ = conn.Reply(m.ID, m.Method, action.Result{OK: true}, nil, nil)
			}()
		})
	res, err := c.Act(t.Context(), action.Action{Kind: action.Wait, MS: int(3 * stall / time.Millisecond)})
	if err != nil || !res.OK {
		t.Fatalf("a long wait on a live guest: %+v, %v", res, err)
	}
}

// A guest that stops reading while the host writes (a stopped guest whose
// stdin pipe is full) cannot block the host either: the stall closes the
// stream and the blocked write returns.
func TestStalledGuestBlockedWrite(t *testing.T) {
	never := make(chan struct{})
	t.Cleanup(func() { close(never) })
	c := startFake(t, timing{pingEvery: 20 * time.Millisecond, stallAfter: 300 * time.Millisecond, slack: time.Hour},
		func(conn *wire.Conn, m *wire.Message) { <-never })
	// The guest stops on the ping, before the file's first frame: it reads
	// nothing more.
	go c.Ping(t.Context())
	waitPending(t, c)
	b := script(t, 8<<20) // far beyond a pipe's buffer
	done := make(chan error, 1)
	go func() {
		_, err := c.Stage(context.Background(), b)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, environment.ErrGuest) || !errors.Is(err, ErrStalled) {
			t.Errorf("staging into a stopped guest: %v, want a guest failure", err)
		}
		t.Logf("error: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("staging into a stopped guest hangs")
	}
}

// script is an app of one shell script of n bytes.
func script(t *testing.T, n int) *app.Bundle {
	t.Helper()
	p := t.TempDir() + "/app"
	data := append([]byte("#!/bin/sh\n"), make([]byte, n)...)
	if err := os.WriteFile(p, data, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := app.Load(p, app.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// waitPending waits until the client has a call outstanding.
func waitPending(t *testing.T, c *Client) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c.calls.Load() > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no call became pending")
		}
		time.Sleep(time.Millisecond)
	}
}

// A ping left unanswered when the request it watched over has returned
// (the sandbox frozen while the agent thinks, with --freeze-while-thinking)
// owes nothing: only requests arm the liveness check.
func TestUnansweredPingBetweenRequests(t *testing.T) {
	const stall = time.Second
	c := startFake(t, timing{pingEvery: 20 * time.Millisecond, stallAfter: stall, slack: time.Minute},
		func(conn *wire.Conn, m *wire.Message) {
			if m.Method == wire.MethodPing {
				return // the frozen guest: pings stay unanswered
			}
			_ = conn.Reply(m.ID, m.Method, action.Result{OK: true}, nil, nil)
		})
	// A ping outstanding between requests, as the check's own would be.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go c.conn.Call(ctx, wire.MethodPing, nil, nil, nil)
	time.Sleep(3 * stall)
	select {
	case <-c.Done():
		t.Fatalf("the connection ended between requests: %v", c.Err())
	default:
	}
	if _, err := c.Act(t.Context(), action.Action{Kind: action.Wait, MS: 10}); err != nil {
		t.Errorf("the next request: %v", err)
	}
}
