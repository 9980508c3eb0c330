package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/client"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/serve/api"
)

// forkServe starts agentbox serve on a backend of clockBackends with
// app registered as NAME=DIR and room for a parent and four forks.
func forkServe(t *testing.T, backendArgs []string, app string, extra ...string) (*served, *client.Client) {
	t.Helper()
	args := append(append([]string{}, backendArgs...), "--app", app, "--out", t.TempDir(), "--max-envs", "5")
	s := startServe(t, append(args, extra...)...)
	c, err := client.New(s.url, s.token)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// moverForkBackends are the backends TestForkFifty runs on: the mover
// needs the runtime image on docker.
func moverForkBackends(t *testing.T) []struct {
	name  string
	args  []string
	check func(*testing.T)
} {
	return []struct {
		name  string
		args  []string
		check func(*testing.T)
	}{
		{"docker", []string{"--backend", "docker"}, func(t *testing.T) { testenv.Require(t, testenv.Docker(), testenv.Image(testenv.RuntimeImage)) }},
		{"local", []string{"--backend", "local"}, requireLocal},
	}
}

// moverStepManifest runs the mover with --step: each arrow key press
// moves the square 7 px, whatever the time.
const moverStepManifest = `{"command": "mover", "args": ["--step", "7"], "window_title": "mover", "ready_output": "mover: ready", "ready_timeout": "20s"}`

// TestForkFifty: a 50-step mover episode forked into 4 (pooled
// sandboxes): each fork's first screen is the parent's, and a different
// action in each then gives four different screens. The time until all
// four are ready is logged.
//
// The mover is a Go program, which libfaketime cannot fake (the virtual
// clock refuses it), and by default it moves by elapsed time × speed:
// on the wall clock a fork of it diverges (this test's first version
// diverged at step 34, then at 19). So it runs with --step, its picture
// a function of the key presses alone, on the wall clock; TestForkClock
// forks a time-driven app on the virtual clock.
func TestForkFifty(t *testing.T) {
	for _, b := range moverForkBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			b.check(t)
			s, c := forkServe(t, b.args, "mover="+moverApp(t, moverStepManifest), "--pool", "4")
			ctx := t.Context()
			env, err := c.Create(ctx, api.CreateRequest{App: "mover"})
			if err != nil {
				t.Fatalf("%v\n%s", err, s.log())
			}
			defer env.Close(ctx)
			if _, _, err := env.Reset(ctx); err != nil {
				t.Fatal(err)
			}
			keys := []string{"Right", "Right", "Down", "Right", "Down"}
			for i := range 50 {
				if _, _, _, _, _, err := env.Step(ctx, action.Action{Kind: action.Key, Keys: keys[i%len(keys)]}); err != nil {
					t.Fatalf("step %d: %v", i+1, err)
				}
			}
			t0 := time.Now()
			forks, err := env.Fork(ctx, 4)
			ready := time.Since(t0)
			if err != nil {
				t.Fatalf("fork: %v\n%s", err, s.log())
			}
			t.Logf("%s: a 50-step episode forked into 4: all ready in %v", b.name, ready.Round(time.Millisecond))
			for _, f := range forks {
				defer f.Close(ctx)
			}
			parent, err := env.Observe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]int{}
			for i, f := range forks {
				obs, info, err := f.Reset(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if obs.Frame.Hash != parent.Frame.Hash {
					t.Errorf("fork %d's first screen (frame %s) is not the parent's (%s)", i, obs.Frame.Hash, parent.Frame.Hash)
				}
				d, _ := f.Info(ctx)
				if info.Episode != 1 || d.ForkedFrom == nil || d.ForkedFrom.Step != 50 || d.Steps != 50 {
					t.Fatalf("fork %d: %+v", i, d)
				}
				key := []string{"Left", "Right", "Up", "Down"}[i]
				for range 3 {
					if obs, _, _, _, _, err = f.Step(ctx, action.Action{Kind: action.Key, Keys: key}); err != nil {
						t.Fatal(err)
					}
				}
				if j, dup := seen[obs.Frame.Hash]; dup {
					t.Errorf("forks %d and %d show the same screen after different keys", j, i)
				}
				seen[obs.Frame.Hash] = i
				tr := openTrace(t, d.Trace)
				if tr.Run.ForkedFrom == nil || tr.Run.ForkedFrom.Step != 50 || tr.Run.ForkedFrom.Env != env.ID() {
					t.Errorf("fork %d's run.json forked_from: %+v", i, tr.Run.ForkedFrom)
				}
			}
		})
	}
}

// clockForkActions are the parent's steps on the clock app: waits and
// keys, the clock moving by each.
var clockForkActions = []action.Action{
	{Kind: action.Wait, MS: 250}, {Kind: action.Key, Keys: "a"}, {Kind: action.Wait, MS: 730},
	{Kind: action.Key, Keys: "b"}, {Kind: action.Wait, MS: 1100}, {Kind: action.Key, Keys: "c"},
}

// TestForkClock: the clock example (its picture the time it reads) on
// the virtual clock forks exactly: the forks' first screens are the
// parent's, the same virtual time drawn.
func TestForkClock(t *testing.T) {
	for _, b := range clockBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			b.check(t)
			s, c := forkServe(t, b.args, "clock="+exampleClock())
			ctx := t.Context()
			env, err := c.Create(ctx, api.CreateRequest{App: "clock", Clock: "virtual"})
			if err != nil {
				t.Fatalf("%v\n%s", err, s.log())
			}
			defer env.Close(ctx)
			if _, _, err := env.Reset(ctx); err != nil {
				t.Fatal(err)
			}
			for _, a := range clockForkActions {
				if _, err := env.Act(ctx, a); err != nil {
					t.Fatal(err)
				}
			}
			forks, err := env.Fork(ctx, 2)
			if err != nil {
				t.Fatalf("fork on the virtual clock: %v\n%s", err, s.log())
			}
			// The parent's screen as the fork took it: once it rested (a
			// look right after the last action may come before the app
			// has drawn it).
			parent, err := env.Observe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for i, f := range forks {
				defer f.Close(ctx)
				obs, _, err := f.Reset(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if obs.Frame.Hash != parent.Frame.Hash {
					t.Errorf("fork %d's first screen (frame %s) is not the parent's (%s)", i, obs.Frame.Hash, parent.Frame.Hash)
				}
			}
		})
	}
}

// TestForkWallClockDiverges: a time-driven app on the wall clock
// (testdata/timenoise: a pattern per 100 ms of the time it reads) draws
// another moment in the fork: the fork is refused (422 fork_diverged, a
// step named), and nothing of it is left — no environment, no sandbox,
// its trace finalised.
func TestForkWallClockDiverges(t *testing.T) {
	for _, b := range clockBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			b.check(t)
			// Not the clock demo: its picture at two moments can differ
			// in a few digits alone, near the rules' tolerance, and the
			// fork's look for a match then found one by chance (1 in 4).
			s, c := forkServe(t, b.args, "noise="+filepath.Join(testenv.RepoRoot(), "e2e", "testdata", "timenoise"))
			ctx := t.Context()
			env, err := c.Create(ctx, api.CreateRequest{App: "noise"})
			if err != nil {
				t.Fatalf("%v\n%s", err, s.log())
			}
			defer env.Close(ctx)
			for _, a := range clockForkActions {
				if _, err := env.Act(ctx, a); err != nil {
					t.Fatal(err)
				}
			}
			forks, err := env.Fork(ctx, 2)
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Code != api.CodeForkDiverged || ae.Status != 422 || ae.Step < 1 || ae.Step > len(clockForkActions)+1 {
				t.Fatalf("a wall-clock fork of a time-driven app: %v, %d forks", err, len(forks))
			}
			t.Logf("refused: %s", ae.Message)
			list, err := c.Environments(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 1 || list[0].ID != env.ID() {
				t.Fatalf("environments after the refused fork: %+v", list)
			}
			tr := openTrace(t, ae.Trace)
			if tr.Incomplete || tr.Run.ForkedFrom == nil {
				t.Fatalf("the diverged fork's trace: incomplete %v, forked_from %+v", tr.Incomplete, tr.Run.ForkedFrom)
			}
			if b.name == "docker" {
				assertNoContainers(t, filepath.Base(ae.Trace))
			}
			if _, err := env.Act(ctx, action.Action{Kind: action.Key, Keys: "z"}); err != nil {
				t.Fatalf("the parent after a refused fork: %v", err)
			}
		})
	}
}

// inputMoverManifest runs the mover (--step) with its background read
// from the task input ~/bg.txt: a sandbox without the input has no app,
// one with other bytes another picture.
const inputMoverManifest = `{"command": "sh", "args": ["-c", "exec ./mover --step 7 --bg \"$(cat \"$HOME/bg.txt\")\""], "window_title": "mover", "ready_output": "mover: ready", "ready_timeout": "20s", "inputs": [{"from": "bg.txt", "to": "~/bg.txt"}], "collect": ["~/bg.txt"]}`

// TestForkInputs: an environment with a task input (the mover's
// background colour, staged into the home) forks: each fork is staged
// with the parent's input, its first screen is the parent's (the
// colour drawn), and the file its episode collects is the input's bytes.
func TestForkInputs(t *testing.T) {
	const bg = "#336699\n"
	for _, b := range moverForkBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			b.check(t)
			dir := moverApp(t, inputMoverManifest)
			if err := os.WriteFile(filepath.Join(dir, "bg.txt"), []byte(bg), 0o644); err != nil {
				t.Fatal(err)
			}
			s, c := forkServe(t, b.args, "mover="+dir, "--pool", "2")
			ctx := t.Context()
			env, err := c.Create(ctx, api.CreateRequest{App: "mover"})
			if err != nil {
				t.Fatalf("%v\n%s", err, s.log())
			}
			defer env.Close(context.WithoutCancel(ctx))
			if _, _, err := env.Reset(ctx); err != nil {
				t.Fatalf("%v\n%s", err, s.log())
			}
			for _, k := range []string{"Right", "Down", "Right", "Right", "Down"} {
				if _, _, _, _, _, err := env.Step(ctx, action.Action{Kind: action.Key, Keys: k}); err != nil {
					t.Fatal(err)
				}
			}
			forks, err := env.Fork(ctx, 2)
			if err != nil {
				t.Fatalf("fork of an environment with inputs: %v\n%s", err, s.log())
			}
			for _, f := range forks {
				defer f.Close(context.WithoutCancel(ctx))
			}
			// The parent's screen as the fork took it, once it rested: a
			// look right after the last key may come before the mover has
			// drawn it (the fresh-clone CI saw that under load).
			parent, err := env.Observe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := bgAt(parent); got != [3]byte{0x33, 0x66, 0x99} {
				t.Fatalf("the parent's background %x, want the input's #336699", got)
			}
			for i, f := range forks {
				obs, _, err := f.Reset(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if obs.Frame.Hash != parent.Frame.Hash {
					t.Errorf("fork %d's first screen (frame %s) is not the parent's (%s)", i, obs.Frame.Hash, parent.Frame.Hash)
				}
				_, _, terminated, _, info, err := f.Step(ctx, action.Action{Kind: action.Done})
				if err != nil || !terminated {
					t.Fatalf("fork %d: done: %v, %v", i, terminated, err)
				}
				if len(info.Files) != 1 || info.Files[0].Path != "bg.txt" {
					t.Fatalf("fork %d collected %+v, want bg.txt", i, info.Files)
				}
				data, err := f.File(ctx, "bg.txt", 0)
				if err != nil || string(data) != bg {
					t.Fatalf("fork %d's staged input: %q, %v; want %q", i, data, err, bg)
				}
				tr := openTrace(t, info.Trace)
				if len(tr.Run.Inputs) != 1 || tr.Run.Inputs[0].Path != "bg.txt" || tr.Run.ForkedFrom == nil {
					t.Errorf("fork %d's run.json: inputs %+v, forked_from %+v", i, tr.Run.Inputs, tr.Run.ForkedFrom)
				}
			}
		})
	}
}

// bgAt is the colour near the bottom-right corner of the observation's
// first window (the mover's background: its square starts top-left).
func bgAt(o *client.Observation) [3]byte {
	if o.Screen == nil || len(o.Windows) == 0 {
		return [3]byte{}
	}
	w := o.Windows[0]
	x, y := min(w.X+w.Width, o.Screen.Width)-3, min(w.Y+w.Height, o.Screen.Height)-3
	i := 4 * (y*o.Screen.Width + x)
	p := o.Screen.Pix
	return [3]byte{p[i], p[i+1], p[i+2]}
}
