package serve

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/serve/api"
	"github.com/codegirl-games/agentbox/trace"
)

// pooledEpisodes waits for h's pool to fill, creates an environment and
// resets it n times (query added to the reset's path), each reset's
// answer checked by check (if not nil) and the pool waited for after it;
// it returns the traces of the 1+n episodes.
func pooledEpisodes(ctx context.Context, t *testing.T, h *harness, n int, query string, check func(answer, api.ResetResponse)) []string {
	t.Helper()
	if err := h.srv.pool.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	e := h.create("", "")
	traces := []string{e.Trace}
	for range n {
		a := h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/reset" + query})
		if a.status != 200 {
			t.Fatalf("reset: %d %s", a.status, a.body)
		}
		var r api.ResetResponse
		json.Unmarshal(a.body, &r)
		if check != nil {
			check(a, r)
		}
		traces = append(traces, r.Environment.Trace)
		if err := h.srv.pool.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return traces
}

// TestPooledEpisodes: with --pool, the registered app's key is warmed at
// start; a create and each reset start their episode in a pooled sandbox
// (the trace records create_ahead) and the pool refills behind them; GET
// /v1/server shows the pool as the document says; a key the pool does not
// hold yet (another screen) is a cold start, counted; the shutdown removes
// every sandbox, pooled or in use.
func TestPooledEpisodes(t *testing.T) {
	h := newHarness(t, nil, func(o *Options) { o.Pool = 2 })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	traces := pooledEpisodes(ctx, t, h, 3, "", nil)
	a := h.do(req{method: "GET", path: "/v1/server"})
	var info api.Server
	json.Unmarshal(a.body, &info)
	// Idle: 2 or more — four takes in a row are a loop, refilled at once
	// to the key's demand target, which may be above its size.
	if p := info.Pool; p == nil || p.Size != 2 || p.Warm != 4 || p.Cold != 0 || p.Idle+p.Creating < 2 {
		t.Errorf("GET /v1/server: pool %+v, want size 2, 4 warm, 0 cold, 2 or more idle or being made", p)
	}
	cold := h.create("", `, "screen": {"width": 800, "height": 600}`)
	if st := h.srv.PoolStats(); st.Cold != 1 {
		t.Errorf("cold starts %d, want 1", st.Cold)
	}
	if err := h.srv.pool.Wait(ctx); err != nil { // the new key is warmed too
		t.Fatal(err)
	}
	if err := h.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for i, dir := range traces {
		tr, err := trace.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := tr.Run.Timings["create_ahead"]; !ok {
			t.Errorf("episode %d did not start in a pooled sandbox: timings %v", i+1, tr.Run.Timings)
		}
	}
	tr, err := trace.Open(cold.Trace)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tr.Run.Timings["create_ahead"]; ok {
		t.Errorf("an 800x600 episode started in a pooled 640x480 sandbox")
	}
	errs, closed := h.backend.GuestErrors()
	if len(errs) != closed {
		t.Errorf("%d sandboxes created, %d removed after the shutdown", len(errs), closed)
	}
	// 4 episodes + 1 cold, and 2 idle for each key — or more: four
	// takes in a row are a loop, refilled at once, and the key's demand
	// target may keep more than its size (on a busy machine the creates
	// are slow, so the target is higher); every one created is removed
	// (above).
	if want := 4 + 1 + 4; closed < want {
		t.Errorf("%d sandboxes removed, want %d or more", closed, want)
	}
}

// TestPooledEpisodesLaunchedAhead: with --pool-launch, the pooled
// sandboxes have the app running; a create and each reset take one over
// without launching (run.json's launched_ahead says so, with how long
// the app ran idle), the first observation comes back, GET /v1/server
// counts them launched, and the shutdown removes every sandbox.
func TestPooledEpisodesLaunchedAhead(t *testing.T) {
	h := newHarness(t, nil, func(o *Options) { o.Pool = 2; o.PoolLaunch = true })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	traces := pooledEpisodes(ctx, t, h, 2, "?observe=png", func(a answer, r api.ResetResponse) {
		if r.Observation == nil || r.Observation.Screenshot == "" || !r.Observation.Running {
			t.Fatalf("reset: no first observation: %s", a.body)
		}
	})
	a := h.do(req{method: "GET", path: "/v1/server"})
	var info api.Server
	json.Unmarshal(a.body, &info)
	if p := info.Pool; p == nil || p.Warm != 3 || p.Launched != 3 || p.Cold != 0 {
		t.Errorf("GET /v1/server: pool %+v, want 3 warm, all launched ahead", p)
	}
	if err := h.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for i, dir := range traces {
		tr, err := trace.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if la := tr.Run.App.LaunchedAhead; la == nil || !la.Launched || la.Started.IsZero() {
			t.Errorf("episode %d: launched_ahead %+v, want the app launched ahead", i+1, la)
		}
		if _, ok := tr.Run.Timings["launch"]; ok {
			t.Errorf("episode %d launched its app itself: %v", i+1, tr.Run.Timings)
		}
	}
	errs, closed := h.backend.GuestErrors()
	if len(errs) != closed {
		t.Errorf("%d sandboxes created, %d removed after the shutdown", len(errs), closed)
	}
}
