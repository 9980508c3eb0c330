package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/docker"
	"github.com/codegirl-games/agentbox/internal/lockrank"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
)

func TestMain(m *testing.M) {
	lockrank.Enable() // the lock order (lockorder.go) is checked in every test
	code := m.Run()
	testenv.CleanupBuilds()
	os.Exit(code)
}

// TestPreparedRealSandbox: a real Docker sandbox created ahead with a
// Relay — display and window manager up, no app — as a warm pool will
// hand it over: the session only stages and launches the mover, the
// app's output reaches the trace through the relay, the steps move the
// square, and Close removes the container.
func TestPreparedRealSandbox(t *testing.T) {
	testenv.Require(t, testenv.Docker(), testenv.Image(testenv.RuntimeImage))
	guest := testenv.Build(t, "./cmd/agentbox")
	mover := testenv.Build(t, "./examples/mover")
	dir := t.TempDir()
	data, _ := os.ReadFile(mover)
	os.WriteFile(filepath.Join(dir, "mover"), data, 0o755)
	os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command":"mover","window_title":"mover","ready_output":"mover: ready","ready_timeout":"30s"}`), 0o644)
	bundle, err := app.Load(dir, app.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer bundle.Close()
	b, err := environment.Lookup(docker.Name, environment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	cfg := environment.Config{RunID: "prepared-" + time.Now().Format("150405.000"), GuestBinary: guest}
	relay := NewRelay()
	pcfg := cfg
	pcfg.Events = relay
	t0 := time.Now()
	env, err := b.Create(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Since(t0)
	traceDir := filepath.Join(t.TempDir(), "trace")
	s, err := Open(ctx, Config{RunID: cfg.RunID, Env: cfg, App: bundle, TraceDir: traceDir, Actor: trace.ActorRemote,
		Prepared: &Prepared{Env: env, Events: relay, Created: created}})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := s.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	green := func(r, g, b uint8) bool { return g > 180 && r < 80 && b < 80 }
	x0, _, n := obs.Screen.Centroid(green)
	for _, a := range []action.Action{{Kind: action.KeyDown, Key: "Right"}, {Kind: action.Wait, MS: 600}, {Kind: action.KeyUp, Key: "Right"}} {
		if _, err := s.Act(ctx, Step{Action: a}); err != nil {
			t.Fatal(err)
		}
	}
	obs, err = s.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	x1, _, _ := obs.Screen.Centroid(green)
	if n == 0 || x1-x0 < 50 {
		t.Errorf("the square moved %.1f px (%d pixels seen), want ≥ 50", x1-x0, n)
	}
	r := s.Close(ctx, End{Outcome: trace.Success, Reason: trace.ReasonDone, Message: "moved"})
	tr, err := trace.Open(traceDir)
	if err != nil || r.Outcome != trace.Success || tr.Incomplete {
		t.Fatalf("%+v, %v", r, err)
	}
	stdout, _ := os.ReadFile(filepath.Join(traceDir, trace.StdoutFile))
	if !strings.Contains(string(stdout), "mover: key Right down") {
		t.Errorf("the app's output did not reach the trace through the relay: %q", stdout)
	}
	if tr.Run.Env.ID != env.Info().ID || tr.Run.Timings["create_ahead"] <= 0 || tr.Run.Env.Backend != docker.Name {
		t.Errorf("run.json: environment %+v, timings %v", tr.Run.Env, tr.Run.Timings)
	}
	t.Logf("created ahead in %v; launch %.0f ms, app ready %.0f ms", created.Round(time.Millisecond), tr.Run.Timings["launch"], tr.Run.Timings["app_ready"])
	if reaped, err := b.(environment.Reaper).Reap(ctx, environment.ReapOptions{RunID: cfg.RunID, DryRun: true}); err != nil || len(reaped) != 0 {
		t.Errorf("left behind: %+v, %v", reaped, err)
	}
}
