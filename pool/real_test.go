package pool_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/docker"
	"github.com/codegirl-games/agentbox/environment/local"
	"github.com/codegirl-games/agentbox/internal/lockrank"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/pool"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

func TestMain(m *testing.M) {
	lockrank.Enable() // session's lock order is checked under the pool's use too
	code := m.Run()
	testenv.CleanupBuilds()
	os.Exit(code)
}

// realBackend is a backend of this machine with what its test needs, and
// how to kill one of its sandboxes from outside (as a crash or an OOM
// kill would).
type realBackend struct {
	name    string
	require func(t *testing.T)
	backend environment.Backend
	image   string
	kill    func(t *testing.T, info environment.Info)
}

func realBackends() []realBackend {
	return []realBackend{
		{
			name: "docker",
			require: func(t *testing.T) {
				testenv.Require(t, testenv.Docker(), testenv.Image(testenv.RuntimeImage), testenv.Programs("docker"))
			},
			backend: &docker.Backend{},
			image:   testenv.RuntimeImage,
			kill: func(t *testing.T, info environment.Info) {
				if out, err := exec.Command("docker", "kill", info.ID).CombinedOutput(); err != nil {
					t.Fatalf("docker kill %s: %v: %s", info.ID, err, out)
				}
			},
		},
		{
			name: "local",
			require: func(t *testing.T) {
				testenv.Require(t, testenv.Probe("the local backend (see `agentbox doctor`)", (&local.Backend{}).Probe),
					testenv.Programs("Xvfb", "openbox"))
			},
			backend: &local.Backend{},
			kill: func(t *testing.T, info environment.Info) {
				pid, err := strconv.Atoi(info.Extra["pid"])
				if err != nil {
					t.Fatalf("no pid in %v", info.Extra)
				}
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Fatalf("kill %d: %v", pid, err)
				}
			},
		},
	}
}

func moverBundle(t *testing.T) *app.Bundle {
	t.Helper()
	mover := testenv.Build(t, "./examples/mover")
	dir := t.TempDir()
	data, err := os.ReadFile(mover)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "mover"), data, 0o755)
	os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command":"mover","window_title":"mover","ready_output":"mover: ready","ready_timeout":"30s"}`), 0o644)
	b, err := app.Load(dir, app.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// mine lists the sandboxes this process owns on the backend.
func mine(t *testing.T, b environment.Backend) []environment.Reaped {
	t.Helper()
	r, ok := b.(environment.Reaper)
	if !ok {
		t.Fatalf("the %s backend cannot list its sandboxes", b.Name())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := r.Reap(ctx, environment.ReapOptions{Mine: true, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// warmRealPool checks that none of this process's sandboxes exist, makes
// a pool with o on rb for the mover (closed when t ends, unless
// closeRealPool closed it), warms it and waits until it is full; it
// returns the pool and the configuration its episodes take.
func warmRealPool(ctx context.Context, t *testing.T, rb realBackend, o pool.Options) (*pool.Pool, session.Config) {
	t.Helper()
	rb.require(t)
	testenv.Require(t, testenv.Slow("creates real sandboxes"))
	if n := len(mine(t, rb.backend)); n != 0 {
		t.Fatalf("%d sandboxes of this process before the test", n)
	}
	guest := testenv.Build(t, "./cmd/agentbox")
	p, err := pool.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) }) // a second Close does nothing
	base := session.Config{Backend: rb.backend, App: moverBundle(t), Env: environment.Config{Image: rb.image, GuestBinary: guest}}
	if err := p.Warm(base); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	return p, base
}

// closeRealPool closes p and checks that none of this process's
// sandboxes are left.
func closeRealPool(ctx context.Context, t *testing.T, rb realBackend, p *pool.Pool) {
	t.Helper()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if left := mine(t, rb.backend); len(left) != 0 {
		t.Errorf("after Close: %d sandboxes of this process left: %+v", len(left), left)
	}
}

// TestRealPool, on each real backend: a pool of two mover sandboxes;
// episodes claimed from it work (the app launched into the pooled
// sandbox, a key press moves the square, the output reaches the trace)
// and each runs in a sandbox no other episode had; a pooled sandbox
// killed from outside while idle is replaced and never handed out;
// Close leaves none of this process's sandboxes behind.
func TestRealPool(t *testing.T) {
	for _, rb := range realBackends() {
		t.Run(rb.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			p, base := warmRealPool(ctx, t, rb, pool.Options{Size: 2, RunID: "pool-real-" + strconv.Itoa(os.Getpid()), CheckEvery: time.Second})

			// A sandbox killed while idle is replaced, never handed out.
			idle := p.Idle()
			killed := idle[0].ID
			rb.kill(t, idle[0])
			deadline := time.Now().Add(2 * time.Minute)
			for p.Stats().Replaced == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the killed sandbox %s was not replaced: %+v", killed, p.Stats())
				}
				time.Sleep(20 * time.Millisecond)
			}

			seen := map[string]int{}
			for ep := 1; ep <= 4; ep++ {
				if err := p.Wait(ctx); err != nil {
					t.Fatal(err)
				}
				cfg := base
				cfg.RunID = "pool-real-episode-" + strconv.Itoa(ep)
				cfg.TraceDir = filepath.Join(t.TempDir(), "trace")
				cfg.Actor = trace.ActorRemote
				if !p.Take(&cfg) {
					t.Fatalf("episode %d: no warm sandbox: %+v", ep, p.Stats())
				}
				id := cfg.Prepared.Env.Info().ID
				if id == killed {
					t.Fatalf("episode %d got the sandbox killed while idle", ep)
				}
				if prev, ok := seen[id]; ok {
					t.Fatalf("episode %d got sandbox %s, which episode %d had", ep, id, prev)
				}
				seen[id] = ep
				s, err := session.Open(ctx, cfg)
				if err != nil {
					t.Fatalf("episode %d: %v", ep, err)
				}
				first, err := s.Observe(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.Act(ctx, session.Step{Actor: trace.ActorRemote, Action: action.Action{Kind: action.KeyDown, Key: "Right"}}); err != nil {
					t.Fatal(err)
				}
				moved := false
				for i := 0; i < 200 && !moved; i++ {
					if _, err := s.Act(ctx, session.Step{Actor: trace.ActorRemote, Action: action.Action{Kind: action.Wait, MS: 50}}); err != nil {
						t.Fatal(err)
					}
					obs, err := s.Observe(ctx)
					if err != nil {
						t.Fatal(err)
					}
					moved = obs.Screen != nil && first.Screen != nil && obs.Screen.Hash != first.Screen.Hash
				}
				res := s.Close(ctx, session.End{Outcome: trace.Success, Reason: trace.ReasonDone, Message: "test"})
				if !moved {
					t.Errorf("episode %d: the square did not move", ep)
				}
				tr, err := trace.Open(res.TraceDir)
				if err != nil {
					t.Fatal(err)
				}
				if tr.Run.Env.ID != id {
					t.Errorf("episode %d: the trace names sandbox %s, the pool handed %s", ep, tr.Run.Env.ID, id)
				}
				if _, ok := tr.Run.Timings["create_ahead"]; !ok {
					t.Errorf("episode %d: no create_ahead timing: %v", ep, tr.Run.Timings)
				}
				if data, _ := os.ReadFile(filepath.Join(res.TraceDir, "stdout.log")); len(data) == 0 {
					t.Errorf("episode %d: the app's output did not reach the trace", ep)
				}
			}
			closeRealPool(ctx, t, rb, p)
		})
	}
}

// TestRealPoolLaunchAhead, on each real backend: a pool that launches
// the mover ahead hands out a sandbox with the app running: the episode
// launches nothing, its first observation is the mover's window, a key
// press moves the square, the output the app printed while idle reaches
// the trace, and run.json says how long the app ran idle. Close leaves
// none of this process's sandboxes behind.
func TestRealPoolLaunchAhead(t *testing.T) {
	for _, rb := range realBackends() {
		t.Run(rb.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			p, base := warmRealPool(ctx, t, rb, pool.Options{Size: 1, RunID: "pool-launch-" + strconv.Itoa(os.Getpid()), Launch: true})
			cfg := base
			cfg.RunID = "pool-launch-episode"
			cfg.TraceDir = filepath.Join(t.TempDir(), "trace")
			cfg.Actor = trace.ActorRemote
			if !p.Take(&cfg) {
				t.Fatalf("no warm sandbox: %+v", p.Stats())
			}
			if cfg.Prepared.Launched == nil {
				t.Fatalf("the sandbox was handed out without the app launched ahead: %q", cfg.NotLaunchedAhead)
			}
			// Held while idle: the app's processes take no CPU, the guest
			// answers. (The hold is asked again to read the CPU time: a
			// second hold does nothing but report.)
			if cfg.Prepared.Launched.Held.IsZero() {
				t.Fatalf("the app launched ahead was not held while idle")
			}
			h := cfg.Prepared.Env.(environment.AppHolder)
			before, err := h.HoldApp(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			if before.Processes == 0 {
				t.Fatalf("no process of the app found to hold: %+v", before)
			}
			time.Sleep(time.Second)
			if err := cfg.Prepared.Env.(environment.Liveness).Ping(ctx); err != nil {
				t.Fatalf("the guest does not answer while the app is held: %v", err)
			}
			after, err := h.HoldApp(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			if after.CPU != before.CPU {
				t.Errorf("the held app used CPU while idle: %v, then %v a second later", before.CPU, after.CPU)
			}
			s, err := session.Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			first, err := s.Observe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if first.Screen == nil || first.Ended != nil {
				t.Fatalf("the first observation: screen %v, ended %v", first.Screen != nil, first.Ended)
			}
			if _, err := s.Act(ctx, session.Step{Actor: trace.ActorRemote, Action: action.Action{Kind: action.KeyDown, Key: "Right"}}); err != nil {
				t.Fatal(err)
			}
			moved := false
			for i := 0; i < 200 && !moved; i++ {
				if _, err := s.Act(ctx, session.Step{Actor: trace.ActorRemote, Action: action.Action{Kind: action.Wait, MS: 50}}); err != nil {
					t.Fatal(err)
				}
				obs, err := s.Observe(ctx)
				if err != nil {
					t.Fatal(err)
				}
				moved = obs.Screen != nil && obs.Screen.Hash != first.Screen.Hash
			}
			res := s.Close(ctx, session.End{Outcome: trace.Success, Reason: trace.ReasonDone, Message: "test"})
			if !moved {
				t.Errorf("the square did not move: the app launched ahead does not take input")
			}
			tr, err := trace.Open(res.TraceDir)
			if err != nil {
				t.Fatal(err)
			}
			la := tr.Run.App.LaunchedAhead
			if la == nil || !la.Launched || la.Started.IsZero() || la.ReadyMS <= 0 {
				t.Errorf("run.json's launched_ahead: %+v, want the launch ahead with its start and time", la)
			}
			if la != nil && la.HeldMS < 1000 {
				t.Errorf("run.json's launched_ahead.held_ms: %v, want the second or more it was held", la.HeldMS)
			}
			if _, ok := tr.Run.Timings["app_held"]; !ok {
				t.Errorf("no app_held timing: %v", tr.Run.Timings)
			}
			if _, ok := tr.Run.Timings["launch"]; ok {
				t.Errorf("the episode launched the app itself: %v", tr.Run.Timings)
			}
			if _, ok := tr.Run.Timings["app_idle"]; !ok {
				t.Errorf("no app_idle timing: %v", tr.Run.Timings)
			}
			if tr.Run.App.PID == 0 {
				t.Errorf("run.json names no PID for the app launched ahead")
			}
			if data, _ := os.ReadFile(filepath.Join(res.TraceDir, "stdout.log")); !strings.Contains(string(data), "mover: ready") {
				t.Errorf("the output the app printed while idle did not reach the trace: %q", data)
			}
			closeRealPool(ctx, t, rb, p)
		})
	}
}
