package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/bench"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
)

func newBenchCmd() *cobra.Command {
	var (
		o       bench.Options
		f       sandboxFlags
		screens string
		jsonOut string
		concur  string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure cold start, step latency and a full run on the real stack",
		Long: `bench measures, with the mover demo in real sandboxes: cold start (create →
app window up → first screenshot) against the runtime's own (the same
sandbox running true), the observe+act step as the agent sees it
(one mouse move, then the next screenshot) at each --screens size, held
against the floor of its primitives timed alone in the same sandbox (an
empty round trip over the backend's channel, one XTEST motion with its
sync, one screen capture, a hash, a PNG encode; a floor sample before each
step, the ratio the step's median over the floor's), a full run
with its trace, the same step in-process and through agentbox serve (over its
WebSocket and over plain HTTP, side by side), the warm pool's figures (reset →
first observation from serve's pool against a cold create, back to back,
relaunched in place, from the Go client and again from Python with the
repository's Python client, the relaunch held against its floor timed in a
sandbox of the bench's own — the app killed and started again by the
guest until its window is listed, one capture; eval's episodes
per minute with and without --pool; with --pool-capacity, how many idle
pooled environments one server holds and the memory each takes), the fork of
a 50-step episode into 4 through serve's API (until all are ready), and — for
comparison — the seed-style step that ran docker exec scrot, docker exec cat
and docker exec xdotool per step.
It reports figures, the machine and its load before and after, and what it
skipped (a count of 0 skips a measurement); it passes or fails nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, s := range strings.Split(screens, ",") {
				sc, err := observe.ParseScreen(strings.TrimSpace(s))
				if err != nil {
					return usageErrorf("--screens %v", err)
				}
				o.Screens = append(o.Screens, sc)
			}
			var err error
			if o.Concurrency, err = parseConcurrency(concur); err != nil {
				return usageErrorf("--concurrency %v", err)
			}
			if o.App == "" {
				// The default is the demo of the source tree bench runs in.
				o.App = filepath.Join("examples", "mover")
				if _, err := os.Stat(filepath.Join(o.App, "mover")); err != nil {
					return usageErrorf("--app: no built mover demo at %s (run bench from the source tree after make build, or name an app directory)", o.App)
				}
			}
			switch {
			case o.PoolResets <= 0:
				o.PythonClient = ""
			case o.PythonClient == "none":
				o.PythonClient, o.PythonSkip = "", "--python-client none"
			default:
				if _, err := os.Stat(filepath.Join(o.PythonClient, "benchmarks", "reset.py")); err != nil {
					if cmd.Flags().Changed("python-client") {
						return usageErrorf("--python-client: %s has no benchmarks/reset.py (the repository's python/ directory, or none)", o.PythonClient)
					}
					o.PythonClient, o.PythonSkip = "", fmt.Sprintf("no Python client at %s: run bench from the source tree or name it with --python-client", o.PythonClient)
				} else if _, err := exec.LookPath(o.Python); err != nil {
					if cmd.Flags().Changed("python") {
						return usageErrorf("--python: %v", err)
					}
					o.PythonClient, o.PythonSkip = "", fmt.Sprintf("no %s: apt-get install python3", o.Python)
				}
			}
			o.Progress = cmd.ErrOrStderr()
			var runs []benchRun
			for _, name := range strings.Split(f.backend, ",") {
				name = strings.TrimSpace(name)
				bo := o
				bo.Image, bo.Runtime = f.image, f.ociRuntime
				image := ""
				if cmd.Flags().Changed("image") {
					image = f.image
				}
				b, note, err := resolveBackend(cmd.Context(), chooseBackend(cmd, name), image, f.ociRuntime)
				if err != nil {
					return err
				}
				fmt.Fprint(cmd.ErrOrStderr(), note)
				bo.Backend = b
				if !environment.CapabilitiesOf(b).Images {
					if cmd.Flags().Changed("image") {
						return usageErrorf("--image: the %s backend has no images", b.Name())
					}
					bo.Image = ""
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "== backend %s\n", b.Name())
				rep, err := bench.Run(cmd.Context(), bo)
				if err != nil {
					return failErr(fmt.Errorf("%s: %w", b.Name(), err))
				}
				rep.Print(cmd.OutOrStdout(), bo)
				runs = append(runs, benchRun{Backend: b.Name(), Image: bo.Image, Report: rep})
			}
			if len(runs) > 1 {
				printSideBySide(cmd.OutOrStdout(), runs)
			}
			if jsonOut != "" {
				var v any = runs
				if len(runs) == 1 {
					v = runs[0].Report
				}
				data, _ := json.MarshalIndent(v, "", "  ")
				if err := os.WriteFile(jsonOut, append(data, '\n'), 0o644); err != nil {
					return failErr(err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "figures written to %s\n", jsonOut)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	f.register(fl, "bench")
	fl.StringVar(&o.App, "app", "", "the mover app directory (default examples/mover)")
	fl.IntVar(&o.ColdRuns, "cold", 8, "cold starts to measure")
	fl.IntVar(&o.Samples, "samples", 300, "steps per latency measurement")
	fl.IntVar(&o.FloorSamples, "floor-samples", 200, "samples of each primitive of a step timed alone in the step's sandbox, one before each step, for the floor the step is held against (0 skips)")
	fl.IntVar(&o.RunSteps, "steps", 200, "steps of the full run")
	fl.IntVar(&o.SeedSteps, "seed-steps", 20, "seed-style steps to measure (0 skips)")
	fl.IntVar(&o.RemoteSamples, "remote-samples", 300, "steps measured in-process, over agentbox serve's WebSocket and over its HTTP (0 skips)")
	fl.IntVar(&o.PoolResets, "pool-resets", 30, "resets measured from agentbox serve's warm pool and cold, in turn (0 skips)")
	fl.IntVar(&o.PoolEvalEpisodes, "pool-eval", 12, "mover play-test episodes run with agentbox eval without a pool, with --pool, and with --pool --reset relaunch, to compare episodes per minute (0 skips)")
	fl.IntVar(&o.PoolEvalParallel, "pool-eval-parallel", 2, "the --parallel (and --pool) of those eval runs")
	fl.StringVar(&o.PythonClient, "python-client", "python", "the Python client's directory, whose benchmarks/reset.py measures the pool's resets again from Python on the same servers (none skips)")
	fl.StringVar(&o.Python, "python", "python3", "the Python interpreter that runs --python-client's benchmarks/reset.py")
	fl.BoolVar(&o.PoolLaunch, "pool-launch", false, "the warm pool's server launches the mover ahead in its pooled sandboxes (agentbox serve --pool-launch)")
	fl.IntVar(&o.Forks, "forks", 5, "times a mover episode is forked through agentbox serve, each timed until all forks are ready (0 skips)")
	fl.IntVar(&o.ForkSteps, "fork-steps", 50, "steps of the episode each fork replays")
	fl.IntVar(&o.ForkCount, "fork-count", 4, "forks made each time")
	fl.IntVar(&o.PoolCapacity, "pool-capacity", 0, "fill a warm pool of this many idle environments in one server and measure the memory each takes (0 skips)")
	fl.StringVar(&screens, "screens", "640x480,1920x1080", "screen sizes for the step latency")
	fl.StringVar(&jsonOut, "json", "", "also write the figures as JSON to this file (agentbox bench plot draws it)")
	fl.StringVar(&concur, "concurrency", "none", "numbers of environments measured stepping at once at 640x480, e.g. 1,8,32,64 (none skips)")
	fl.IntVar(&o.ScaleSteps, "scale-steps", 50, "steps each environment takes in a --concurrency measurement")
	cmd.AddCommand(newBenchPlotCmd())
	return cmd
}

// maxConcurrency bounds --concurrency: each environment is a sandbox
// with its X server and app.
const maxConcurrency = 256

// parseConcurrency reads --concurrency: "none" or a list of counts.
func parseConcurrency(v string) ([]int, error) {
	v = strings.TrimSpace(v)
	if v == "none" || v == "" {
		return nil, nil
	}
	var ns []int
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > maxConcurrency {
			return nil, fmt.Errorf("%q: want none or a list of counts from 1 to %d, e.g. 1,8,32,64", f, maxConcurrency)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// benchRun is one backend's figures.
type benchRun struct {
	Backend string
	Image   string `json:",omitempty"`
	Report  *bench.Report
}

// printSideBySide puts the backends' main figures next to each other.
func printSideBySide(w io.Writer, runs []benchRun) {
	fmt.Fprintf(w, "\nside by side (p50 / p95):\n\n%-44s", "")
	for _, r := range runs {
		fmt.Fprintf(w, "  %-22s", r.Backend)
	}
	fmt.Fprintln(w)
	row := func(label string, f func(*bench.Report) string) {
		fmt.Fprintf(w, "%-44s", label)
		for _, r := range runs {
			fmt.Fprintf(w, "  %-22s", f(r.Report))
		}
		fmt.Fprintln(w)
	}
	pp := func(s bench.Stats) string {
		if s.N == 0 {
			return "skipped"
		}
		return bench.FormatMS(s.P50) + " / " + bench.FormatMS(s.P95)
	}
	atFloor := func(s bench.Stats, floor float64) string {
		switch {
		case s.N == 0:
			return "skipped"
		case floor <= 0:
			return "-"
		}
		return fmt.Sprintf("%.1f× %s", s.P50/floor, bench.FormatMS(floor))
	}
	row("machine: CPUs, load before → after", func(r *bench.Report) string {
		m := r.Machine
		return fmt.Sprintf("%d, %.2f → %.2f", m.CPUs, m.LoadBefore[0], m.LoadAfter[0])
	})
	row("cold start (create → window → screenshot)", func(r *bench.Report) string { return pp(r.ColdStart) })
	row("  its floor (the sandbox running true)", func(r *bench.Report) string { return atFloor(r.ColdStart, r.ColdFloor.P50) })
	row("  its floor with the X server (running Xvfb)", func(r *bench.Report) string { return atFloor(r.ColdStart, r.ColdDisplayFloor.P50) })
	for i, s := range runs[0].Report.Steps {
		size := fmt.Sprintf("%dx%d", s.Screen.Width, s.Screen.Height)
		step := func(f func(bench.StepStats) bench.Stats) func(r *bench.Report) string {
			return func(r *bench.Report) string {
				if i >= len(r.Steps) {
					return "-"
				}
				return pp(f(r.Steps[i]))
			}
		}
		row("step "+size+", screen unchanged", step(func(s bench.StepStats) bench.Stats { return s.Unchanged }))
		row("step "+size+", full frame", step(func(s bench.StepStats) bench.Stats { return s.Full }))
		row("step "+size+", click", step(func(s bench.StepStats) bench.Stats { return s.Click }))
		floor := func(f func(bench.StepStats) string) func(r *bench.Report) string {
			return func(r *bench.Report) string {
				if i >= len(r.Steps) || r.Steps[i].Floor == nil {
					return "-"
				}
				return f(r.Steps[i])
			}
		}
		row("  unchanged against its floor (medians)", floor(func(s bench.StepStats) string { return atFloor(s.Unchanged, s.Floor.Unchanged) }))
		row("    of which the damage check (p50)", floor(func(s bench.StepStats) string {
			if s.Floor.Damage.N == 0 {
				return "no DAMAGE: capture + hash"
			}
			return bench.FormatMS(s.Floor.Damage.P50)
		}))
		row("  full frame against its floor (medians)", floor(func(s bench.StepStats) string { return atFloor(s.Full, s.Floor.Full) }))
	}
	for i, pt := range runs[0].Report.Scale {
		row(fmt.Sprintf("%d environments stepping at once, step", pt.Envs), func(r *bench.Report) string {
			if i >= len(r.Scale) {
				return "-"
			}
			return pp(r.Scale[i].Step)
		})
		row("  steps per second, all of them", func(r *bench.Report) string {
			if i >= len(r.Scale) {
				return "-"
			}
			return fmt.Sprintf("%.0f", r.Scale[i].StepsPerSecond)
		})
	}
	row("full run, per step (trace included)", func(r *bench.Report) string {
		if r.RunSteps == 0 {
			return "skipped"
		}
		return bench.FormatMS(r.RunPerStep)
	})
	remote := func(f func(*bench.RemoteStats) bench.Stats) func(r *bench.Report) string {
		return func(r *bench.Report) string {
			if r.Remote == nil {
				return "skipped"
			}
			return pp(f(r.Remote))
		}
	}
	row("step in-process (session API)", remote(func(s *bench.RemoteStats) bench.Stats { return s.InProcess }))
	row("step over serve's WebSocket", remote(func(s *bench.RemoteStats) bench.Stats { return s.WebSocket }))
	row("step over serve's HTTP", remote(func(s *bench.RemoteStats) bench.Stats { return s.HTTP }))
	pooled := func(f func(*bench.PoolStats) string) func(r *bench.Report) string {
		return func(r *bench.Report) string {
			if r.Pool == nil {
				return "skipped"
			}
			return f(r.Pool)
		}
	}
	row("reset → observation, warm pool", pooled(func(p *bench.PoolStats) string { return pp(p.ResetWarm) }))
	row("reset → observation, cold create", pooled(func(p *bench.PoolStats) string { return pp(p.ResetCold) }))
	row("reset back to back (no wait for the pool)", pooled(func(p *bench.PoolStats) string { return pp(p.ResetLoop) }))
	row("  its hit rate, refill p50 / p95", pooled(func(p *bench.PoolStats) string {
		if p.Loop == nil {
			return "skipped"
		}
		return fmt.Sprintf("%.0f %%, %s / %s", 100*p.Loop.HitRate, bench.FormatMS(p.Loop.RefillP50), bench.FormatMS(p.Loop.RefillP95))
	}))
	row("reset back to back, pool deeper than the loop", pooled(func(p *bench.PoolStats) string { return pp(p.ResetDeep) }))
	row("relaunch back to back", pooled(func(p *bench.PoolStats) string { return pp(p.ResetRelaunch) }))
	row("from Python: relaunch back to back", pooled(func(p *bench.PoolStats) string { return pp(p.PyRelaunch) }))
	row("from Python: back to back, deeper pool", pooled(func(p *bench.PoolStats) string { return pp(p.PyDeep) }))
	row("fork (--fork-steps into --fork-count), ready", pooled(func(p *bench.PoolStats) string {
		if p.Fork == nil {
			return "-"
		}
		return pp(p.Fork.Ready)
	}))
	row("eval episodes/min, without / with --pool", pooled(func(p *bench.PoolStats) string {
		if p.Eval == nil {
			return "skipped"
		}
		return fmt.Sprintf("%.1f / %.1f", p.Eval.PerMinute, p.Eval.PooledPerMinute)
	}))
	row("idle pooled environments, MiB each", pooled(func(p *bench.PoolStats) string {
		if p.Capacity == nil {
			return "skipped"
		}
		return fmt.Sprintf("%d, %.0f MiB", p.Capacity.Filled, p.Capacity.SandboxMiB.P50)
	}))
}
