package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	_ "github.com/codegirl-games/agentbox/environment/docker"
	_ "github.com/codegirl-games/agentbox/environment/local"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

// clockBackends are the backends the virtual clock's tests run on, with
// what each needs: the test image (python3, for examples/clock) on
// docker, the host's programs and libfaketime on local.
func clockBackends(t *testing.T) []struct {
	name  string
	args  []string
	env   environment.Config
	check func(*testing.T)
} {
	return []struct {
		name  string
		args  []string
		env   environment.Config
		check func(*testing.T)
	}{
		{"docker", []string{"--backend", "docker", "--image", testenv.TestImage}, environment.Config{Image: testenv.TestImage},
			func(t *testing.T) { testenv.Require(t, testenv.Docker(), testenv.Image(testenv.TestImage)) }},
		{"local", []string{"--backend", "local"}, environment.Config{},
			func(t *testing.T) {
				requireLocal(t)
				testenv.Require(t, testenv.Programs("xterm", "python3"),
					testenv.Condition("libfaketime on this host (scripts/deps.sh test)", func() error {
						if !environment.CapabilitiesOf(mustLookup(t, "local")).VirtualClock {
							return errNoFaketime
						}
						return nil
					}()))
			}},
	}
}

var errNoFaketime = &clockError{"the local backend declares no virtual clock: install libfaketime"}

type clockError struct{ s string }

func (e *clockError) Error() string { return e.s }

func mustLookup(t *testing.T, name string) environment.Backend {
	t.Helper()
	b, err := environment.Lookup(name, environment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// exampleClock is examples/clock as shipped: xterm running a Python
// script that draws the time it reads, with its milliseconds, and a block
// that moves one column per 100 ms.
func exampleClock() string { return filepath.Join(testenv.RepoRoot(), "examples", "clock") }

// TestVirtualClockPause: on a virtual clock the app's time stands still
// while the agent thinks — two screenshots 1.5 s apart with no step
// between are the same frame — and moves with a step (a wait of 300 ms);
// on the wall clock the same two screenshots differ.
func TestVirtualClockPause(t *testing.T) {
	for _, b := range clockBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			b.check(t)
			bin := testenv.Build(t, "./cmd/agentbox")
			for _, virtual := range []bool{true, false} {
				bundle, err := app.Load(exampleClock(), app.DefaultLimits)
				if err != nil {
					t.Fatal(err)
				}
				defer bundle.Close()
				env := b.env
				env.GuestBinary = bin
				ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
				defer cancel()
				s, err := session.Open(ctx, session.Config{
					Backend: mustLookup(t, b.name), Env: env, App: bundle,
					AgentInfo: trace.AgentInfo{Name: "test"}, Actor: trace.ActorRemote,
					Clock: session.Clock{Virtual: virtual}, TraceDir: filepath.Join(t.TempDir(), "trace"),
					Timeout: 2 * time.Minute,
				})
				if err != nil {
					t.Fatalf("open (virtual %v): %v", virtual, err)
				}
				o1, err := s.Observe(ctx)
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(1500 * time.Millisecond) // the agent thinks
				o2, err := s.Observe(ctx)
				if err != nil {
					t.Fatal(err)
				}
				same := o1.Screen.Hash == o2.Screen.Hash
				if virtual && !same {
					t.Errorf("virtual clock: the screen changed while the agent thought (%s, %s)", o1.Screenshot, o2.Screenshot)
				}
				if !virtual && same {
					t.Errorf("wall clock: the screen did not change in 1.5 s; the demo app shows no time?")
				}
				if virtual {
					if _, err := s.Act(ctx, session.Step{Action: action.Action{Kind: action.Wait, MS: 300}}); err != nil {
						t.Fatal(err)
					}
					o3, err := s.Observe(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if o3.Screen.Hash == o2.Screen.Hash {
						t.Errorf("virtual clock: a wait of 300 ms did not move the app's time")
					}
				}
				res := s.Close(context.WithoutCancel(ctx), session.End{Outcome: trace.Success, Reason: trace.ReasonDone, Message: "test"})
				if res.Outcome != trace.Success {
					t.Errorf("close: %+v", res)
				}
				if virtual {
					tr := openTrace(t, res.TraceDir)
					if c := tr.Run.Settings.Clock; c == nil || c.Mode != "virtual" || c.Start != "2025-01-01T00:00:00Z" || c.StepMS != 100 {
						t.Errorf("run.json's clock: %+v", c)
					}
				}
			}
		})
	}
}

// TestVirtualClockReplay: a run of the clock demo recorded on a virtual
// clock replays frame for frame (every comparison 0 px); recorded on the
// wall clock, its replay diverges, since the app draws a different time.
func TestVirtualClockReplay(t *testing.T) {
	for _, b := range clockBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			b.check(t)
			play := filepath.Join(t.TempDir(), "play.yaml")
			writeFile(t, play, "task: Watch the clock.\nsteps:\n  - action: wait\n    ms: 300\n  - action: key\n    key: a\n  - action: wait\n    ms: 700\n")
			for _, clock := range []string{"virtual", "wall"} {
				args := append([]string{"run", exampleClock(), "--script", play, "--clock", clock, "--settle", "stable:300ms"}, b.args...)
				r := agentbox(t, args...)
				if r.code != 0 {
					t.Fatalf("run --clock %s: %s", clock, r)
				}
				out := filepath.Join(t.TempDir(), "replay")
				rp := run0(t, "replay", r.dir, "--out", out)
				s := readSummary(t, out)
				switch clock {
				case "virtual":
					if rp.code != 0 || s.Verdict != "matched" {
						t.Fatalf("replay of a virtual-clock run: %s\n%+v", rp, s)
					}
					for _, c := range s.Comparisons {
						if c.Pixels != 0 {
							t.Errorf("step %d: %d px differ, want none", c.Step, c.Pixels)
						}
					}
					tr := openTrace(t, out)
					if len(tr.Steps) == 0 || tr.Steps[len(tr.Steps)-1].Observation.Clock == "" || !strings.HasPrefix(tr.Steps[len(tr.Steps)-1].Observation.Clock, "2025-01-01T00:00:0") {
						t.Errorf("the replay's steps record no virtual time: %+v", tr.Steps)
					}
				case "wall":
					if rp.code != 1 || s.Verdict != "diverged" {
						t.Errorf("replay of a wall-clock run of a clock: want diverged (exit 1): %s", rp)
					}
				}
			}
		})
	}
}

// TestVirtualClockRefusals: a virtual clock asked of what cannot have
// one is a usage error (exit 2) naming why, before any sandbox starts.
func TestVirtualClockRefusals(t *testing.T) {
	static := testenv.Build(t, "./cmd/agentbox") // a static Go program
	// An eval suite whose task's app is that program: refused before the
	// first episode.
	appDir := filepath.Join(t.TempDir(), "static")
	if err := os.MkdirAll(appDir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(static)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(appDir, "prog"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(appDir, "agentbox.json"), `{"command":"prog","wait_for_window":false}`)
	suite := filepath.Join(t.TempDir(), "suite.yaml")
	writeFile(t, suite, "name: static\ntasks:\n  - name: t\n    target: "+appDir+"\n    task: nothing\n    agent: idle\n    timeout: 30s\n")
	evalWant := "statically linked"
	if !environment.CapabilitiesOf(mustLookup(t, "local")).VirtualClock {
		evalWant = "no virtual clock"
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"static binary", []string{"run", static, "--agent", "idle", "--clock", "virtual", "--backend", "local"}, "statically linked"},
		{"bad mode", []string{"run", "xterm", "--agent", "idle", "--clock", "fast"}, `clock "fast": want wall or virtual`},
		{"step without virtual", []string{"run", "xterm", "--agent", "idle", "--clock-step", "1s"}, "--clock-step applies to --clock virtual"},
		{"eval of a static binary", []string{"eval", suite, "--clock", "virtual", "--backend", "local", "--out", filepath.Join(t.TempDir(), "eval")}, evalWant},
		{"eval step without virtual", []string{"eval", suite, "--clock-step", "1s"}, "--clock-step applies to --clock virtual"},
		{"eval bad mode", []string{"eval", suite, "--clock", "fast"}, `clock "fast": want wall or virtual`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := cliMain(t, c.args...)
			if r.code != 2 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("want exit 2 naming %q: %s", c.want, r)
			}
		})
	}
}
