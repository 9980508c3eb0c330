package serve

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/serve/api"
	"github.com/codegirl-games/agentbox/wire"
)

// TestRelaunchReset: an environment created with reset_mode relaunch
// starts its next episodes in the same sandbox, reset in place — after
// a reset of a running episode and after one that ended (done) — each a
// new episode with its own trace; a reset with mode fresh goes back to a
// new sandbox and removes the kept one.
func TestRelaunchReset(t *testing.T) {
	var resets atomic.Int32
	h := newHarness(t, func() *guestenvtest.Guest {
		return &guestenvtest.Guest{OnReset: func(*guestenvtest.Writer) { resets.Add(1) }}
	}, canRelaunchHere)
	e := h.create(testToken, `, "reset_mode": "relaunch"`)
	if e.ResetMode != api.ResetRelaunch || e.Relaunched {
		t.Fatalf("created: reset_mode %q, relaunched %v", e.ResetMode, e.Relaunched)
	}
	created := func() int {
		_, closed := h.backend.GuestErrors()
		return closed
	}
	reset := func(body string) api.Environment {
		t.Helper()
		var b []byte
		if body != "" {
			b = []byte(body)
		}
		a := h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/reset", body: b})
		if a.status != 200 {
			t.Fatalf("reset %s: %d %s", body, a.status, a.body)
		}
		var rr api.ResetResponse
		a.decode(t, &rr)
		return rr.Environment
	}
	h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/act", body: []byte(`{"action":"key","keys":"Return"}`)})
	e2 := reset("")
	if !e2.Relaunched || e2.Episode != 2 || e2.Trace == e.Trace || e2.State != api.StateRunning {
		t.Fatalf("after a relaunch of a running episode: %+v", e2)
	}
	if n := resets.Load(); n != 1 || created() != 0 {
		t.Fatalf("%d resets, %d sandboxes removed; want 1 and 0", n, created())
	}

	// An episode that ends keeps its sandbox for the next.
	a := h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/act", body: []byte(`{"action":"done","message":"ok"}`)})
	if a.status != 200 {
		t.Fatalf("done: %d %s", a.status, a.body)
	}
	e3 := reset("")
	if !e3.Relaunched || e3.Episode != 3 {
		t.Fatalf("after a relaunch of an ended episode: %+v", e3)
	}
	if n := resets.Load(); n != 2 || created() != 0 {
		t.Fatalf("%d resets, %d sandboxes removed; want 2 and 0", n, created())
	}

	// Fresh: a new sandbox; the relaunched one is closed behind it.
	e4 := reset(`{"mode": "fresh"}`)
	if e4.Relaunched || e4.ResetMode != api.ResetFresh || e4.Episode != 4 {
		t.Fatalf("after a fresh reset: %+v", e4)
	}
	deadline := time.Now().Add(30 * time.Second)
	for created() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if created() != 1 {
		t.Fatalf("%d sandboxes removed after a fresh reset, want 1", created())
	}
	h.do(req{method: "DELETE", path: "/v1/envs/" + e.ID})
	if created() != 2 {
		t.Fatalf("%d sandboxes removed after the close, want 2", created())
	}
}

// TestRelaunchRefused: relaunch on a backend that cannot, an unknown
// mode, and a relaunch while a step is in flight are each refused with
// their status, and change nothing.
func TestRelaunchRefused(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	var blockOnce sync.Once
	h := newHarness(t, nil, nil)

	a := h.do(req{method: "POST", path: "/v1/envs", body: []byte(`{"app": "game", "reset_mode": "relaunch"}`)})
	if a.status != 422 || a.errorCode() != api.CodeInvalidRequest {
		t.Fatalf("relaunch on a backend without it: %d %s", a.status, a.body)
	}
	e := h.create(testToken, "")
	a = h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/reset", body: []byte(`{"mode": "relaunch"}`)})
	if a.status != 422 || a.errorCode() != api.CodeInvalidRequest {
		t.Fatalf("reset mode relaunch on a backend without it: %d %s", a.status, a.body)
	}
	a = h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/reset", body: []byte(`{"mode": "again"}`), invalid: true})
	if a.status != 422 || a.errorCode() != api.CodeInvalidRequest {
		t.Fatalf("reset mode again: %d %s", a.status, a.body)
	}
	a = h.do(req{method: "POST", path: "/v1/envs", body: []byte(`{"app": "game", "reset_mode": "again"}`), invalid: true})
	if a.status != 422 {
		t.Fatalf("reset_mode again: %d %s", a.status, a.body)
	}

	h = newHarness(t, func() *guestenvtest.Guest {
		return &guestenvtest.Guest{OnAct: func(*guestenvtest.Writer) {
			blockOnce.Do(func() {
				entered <- struct{}{}
				<-release
			})
		}}
	}, canRelaunchHere)
	e = h.create(testToken, "")
	done := make(chan answer, 1)
	go func() {
		done <- h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/act", body: []byte(`{"action":"key","keys":"Return"}`)})
	}()
	<-entered
	a = h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/reset", body: []byte(`{"mode": "relaunch"}`)})
	close(release)
	if a.status != 409 || a.errorCode() != api.CodeBusy {
		t.Fatalf("relaunch during a step: %d %s", a.status, a.body)
	}
	if st := <-done; st.status != 200 {
		t.Fatalf("the step a refused relaunch met: %d %s", st.status, st.body)
	}
	var got api.Environment
	h.do(req{method: "GET", path: "/v1/envs/" + e.ID}).decode(t, &got)
	if got.Episode != 1 || got.State != api.StateRunning || got.ResetMode != api.ResetFresh {
		t.Fatalf("after a refused relaunch: %+v", got)
	}
	a = h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/reset", body: []byte(`{"mode": "relaunch"}`)})
	if a.status != 200 {
		t.Fatalf("relaunch once the step answered: %d %s", a.status, a.body)
	}
}

// stallStops is a guest's OnStop that counts the stops and holds each
// until release is closed (a removal under way).
func stallStops(stops *atomic.Int32, release <-chan struct{}) func(*guestenvtest.Writer, *wire.Message) bool {
	return func(*guestenvtest.Writer, *wire.Message) bool {
		stops.Add(1)
		<-release
		return false
	}
}

// canRelaunchHere gives the harness's backend the capability relaunch.
func canRelaunchHere(o *Options) {
	o.Backends[0].(*guestenvtest.Backend).Relaunch = true
}

// TestFreshResetsCloseBehind: a fresh reset from a warm pool with idle
// sandboxes does not wait for the episode before it to be removed while
// fewer than maxBehind removals are under way; the next reset waits for
// the oldest, and closing the environment waits for them all. The guest
// cannot stop its app here, so the pool removes each at once (see
// TestFreshResetsDeferRemovals for a guest that can).
func TestFreshResetsCloseBehind(t *testing.T) {
	release := make(chan struct{})
	var stops atomic.Int32
	h := newHarness(t, func() *guestenvtest.Guest {
		return &guestenvtest.Guest{
			OnStop: stallStops(&stops, release),
			OnHold: func(w *guestenvtest.Writer, m *wire.Message) bool {
				w.Frame(&wire.Header{Type: wire.Response, ID: m.ID, Method: m.Method,
					Error: &wire.RemoteError{Code: wire.CodeInternal, Message: "no hold here"}}, nil)
				return true
			},
		}
	}, func(o *Options) { o.Pool = maxBehind + 4 })
	wctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := h.srv.WaitPool(wctx); err != nil {
		t.Fatal(err)
	}
	e := h.create(testToken, "")
	reset := func() <-chan int {
		ch := make(chan int, 1)
		go func() {
			ch <- h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/reset"}).status
		}()
		return ch
	}
	for i := range maxBehind {
		select {
		case st := <-reset():
			if st != 200 {
				t.Fatalf("reset %d: status %d", i+1, st)
			}
		case <-time.After(time.Minute):
			t.Fatalf("reset %d waited a minute with %d removals under way", i+1, i)
		}
	}
	waitFor(t, func() bool { return stops.Load() == maxBehind })
	next := reset()
	select {
	case st := <-next:
		t.Fatalf("reset %d answered (%d) with %d removals under way", maxBehind+1, st, maxBehind)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if st := <-next; st != 200 {
		t.Fatalf("reset %d: status %d", maxBehind+1, st)
	}
	if a := h.do(req{method: "DELETE", path: "/v1/envs/" + e.ID}); a.status != 200 {
		t.Fatalf("delete: %d %s", a.status, a.body)
	}
	if _, closed := h.backend.GuestErrors(); closed != maxBehind+2 {
		t.Fatalf("%d sandboxes removed after the close, want %d", closed, maxBehind+2)
	}
	if st := h.srv.pool.Stats(); st.Deferred != 0 {
		t.Errorf("%d removals deferred by a guest that cannot stop its app", st.Deferred)
	}
}

// TestFreshResetsDeferRemovals: in a loop of fresh resets from a warm
// pool with idle sandboxes, the ended episodes' apps are stopped and
// their sandboxes' removals wait for the loop to pause: the resets meet
// no removal (a removal here never ends until the test lets it), their
// traces say so, and closing the server removes them all.
func TestFreshResetsDeferRemovals(t *testing.T) {
	const resets = maxBehind + 3 // more than the resets that could go by with removals under way
	release := make(chan struct{})
	var stops, holds atomic.Int32
	h := newHarness(t, func() *guestenvtest.Guest {
		return &guestenvtest.Guest{
			OnStop: stallStops(&stops, release),
			OnHold: func(w *guestenvtest.Writer, m *wire.Message) bool {
				holds.Add(1)
				return false
			},
		}
	}, func(o *Options) {
		o.Pool = resets + 2
		o.PoolRefillDelay = time.Minute // the loop pauses when the test says
	})
	wctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := h.srv.WaitPool(wctx); err != nil {
		t.Fatal(err)
	}
	e := h.create(testToken, "")
	for i := range resets {
		ch := make(chan answer, 1)
		go func() { ch <- h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/reset"}) }()
		select {
		case a := <-ch:
			if a.status != 200 {
				t.Fatalf("reset %d: %d %s", i+1, a.status, a.body)
			}
		case <-time.After(time.Minute):
			t.Fatalf("reset %d waited a minute (%d removals under way, %d deferred)", i+1, stops.Load(), h.srv.pool.Stats().Deferred)
		}
	}
	// Each episode is ended behind the reset that ended it: wait until
	// all have been, deferred or (which would fail below) not.
	waitFor(t, func() bool { return h.srv.pool.Stats().Deferred+int64(stops.Load()) >= resets })
	st := h.srv.pool.Stats()
	// The environment's create took from the pool too: the first reset
	// is the loop's second take.
	if st.Deferred != resets || st.Released != resets {
		t.Errorf("deferred %d, waiting %d; want %d each", st.Deferred, st.Released, resets)
	}
	if n := stops.Load(); n != 0 {
		t.Errorf("%d removals started during the loop", n)
	}
	if n := holds.Load(); n < resets {
		t.Errorf("%d apps stopped for %d deferred removals", n, resets)
	}
	close(release)
	if a := h.do(req{method: "DELETE", path: "/v1/envs/" + e.ID}); a.status != 200 {
		t.Fatalf("delete: %d %s", a.status, a.body)
	}
	// The loop never pauses within the test (an hour): closing the server
	// closes the pool, which removes what waits.
	ctx, cancel2 := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
	defer cancel2()
	if err := h.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.srv.pool.Stats().Released; got != 0 {
		t.Errorf("%d released sandboxes left after the shutdown", got)
	}
	if _, closed := h.backend.GuestErrors(); closed < resets+1 {
		t.Errorf("%d sandboxes removed after the shutdown, want at least the %d episodes'", closed, resets+1)
	}
	said := 0
	filepath.WalkDir(h.out, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(path)
			said += strings.Count(string(b), `"teardown_deferred"`)
		}
		return nil
	})
	if said != resets+1 { // the closed environment's last episode too
		t.Errorf("the traces record %d deferred teardowns, want %d", said, resets+1)
	}
}
