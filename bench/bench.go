// Package bench measures agentbox on the real stack: cold start, the
// observe+act step as the agent sees it, a full run with its trace, and the
// seed-style docker-exec step it replaced. `agentbox bench` prints the
// figures; nothing here passes or fails.
package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/owner"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

// Options select what to measure.
type Options struct {
	Backend  environment.Backend
	Image    string
	Runtime  string // an OCI runtime registered with Docker (--runtime); "" the daemon's default
	App      string // the mover's app directory
	ColdRuns int
	Samples  int // steps per latency measurement
	// FloorSamples is the number of samples of each primitive of a step
	// timed alone, in the step's sandbox at each screen size (0 skips).
	FloorSamples int
	RunSteps     int // steps of the full run
	SeedSteps    int // seed-style steps (0 skips)
	// RemoteSamples is the number of steps measured in-process, over
	// serve's WebSocket and over its HTTP, side by side (0 skips).
	RemoteSamples int
	// PoolResets is the number of resets measured from serve's warm pool
	// and cold, in turn (0 skips the pool's figures); PoolCapacity, when
	// positive, fills a pool of that many idle environments in one server
	// and measures their memory; PoolEvalEpisodes, when positive, runs
	// that many mover play-tests with eval, with eval --pool and with
	// eval --pool --reset relaunch (where the backend can), at
	// PoolEvalParallel.
	PoolResets, PoolCapacity int
	// PoolLaunch has the warm server launch the mover ahead in its
	// pooled sandboxes (serve --pool-launch).
	PoolLaunch                         bool
	PoolEvalEpisodes, PoolEvalParallel int
	// Forks is how many times a ForkSteps-step mover episode is forked
	// into ForkCount through serve's API, the Go client timing each
	// until all are ready (0 skips).
	Forks, ForkSteps, ForkCount int
	Screens                     []observe.Screen
	// Concurrency lists the numbers of environments measured stepping at
	// once (the step's scale with the machine's load), ScaleSteps steps
	// each (none skips).
	Concurrency []int
	ScaleSteps  int
	// PythonClient is the directory of agentbox's Python client (the
	// repository's python/): its benchmarks/reset.py measures the pool's
	// resets again from Python, run by Python (an interpreter, default
	// python3), on the same servers as the Go client's. "" skips.
	PythonClient, Python string
	PythonSkip           string // why PythonClient is "", for the report's skipped list
	// GuestBinary is the agentbox binary the pool's figures run inside
	// their sandboxes (default: this executable).
	GuestBinary string
	Progress    io.Writer
}

// Stats summarises samples in milliseconds.
type Stats struct {
	N             int
	Min, P50, P95 float64
	Max, Mean     float64
}

func summarize(d []time.Duration) Stats {
	if len(d) == 0 {
		return Stats{}
	}
	ms := make([]float64, len(d))
	var sum float64
	for i, v := range d {
		ms[i] = float64(v.Microseconds()) / 1000
		sum += ms[i]
	}
	sort.Float64s(ms)
	q := func(p float64) float64 { return ms[int(math.Ceil(p*float64(len(ms))))-1] }
	return Stats{N: len(ms), Min: ms[0], P50: q(0.5), P95: q(0.95), Max: ms[len(ms)-1], Mean: sum / float64(len(ms))}
}

func (s Stats) String() string {
	if s.N == 0 {
		return "skipped"
	}
	return fmt.Sprintf("p50 %s  p95 %s  (min %s, max %s, n=%d)", FormatMS(s.P50), FormatMS(s.P95), FormatMS(s.Min), FormatMS(s.Max), s.N)
}

// FormatMS renders milliseconds as "1.25 ms", "343 ms" or "1.04 s".
func FormatMS(v float64) string {
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 1000:
		return fmt.Sprintf("%.0f ms", v)
	}
	return fmt.Sprintf("%.2f s", v/1000)
}

// StepStats are the step latencies at one screen size.
type StepStats struct {
	Screen    observe.Screen
	Unchanged Stats // mouse_move, then a screenshot of an unchanged screen
	Full      Stats // the same with the whole frame transferred every time
	Click     Stats // a left click into the app's window, then a screenshot
	// Floor is what the step's primitives cost alone in the same sandbox.
	Floor *StepFloor `json:",omitempty"`
}

// Report holds every figure.
type Report struct {
	// Machine is what it ran on, and its load before and after.
	Machine   Machine
	ColdStart Stats
	// ColdFloor is the runtime's own cold start: the same sandbox
	// running `true` (environment.ColdFloorer), measured in turn with
	// ColdStart; ColdRatio is ColdStart's p50 over its p50.
	ColdFloor Stats
	ColdRatio float64 `json:",omitempty"`
	// ColdDisplayFloor is the same sandbox running the X server the
	// guest starts, until it is ready (environment.DisplayFloorer), in
	// turn with the others; ColdDisplayRatio is ColdStart's p50 over its
	// p50. Skipped where the backend has none.
	ColdDisplayFloor Stats
	ColdDisplayRatio float64     `json:",omitempty"`
	Steps            []StepStats `json:",omitempty"`
	RunPerStep       float64     `json:",omitempty"` // ms per step of the full run, trace included
	RunSteps         int         `json:",omitempty"`
	TraceShare       float64     `json:",omitempty"` // trace writing as a fraction of the loop
	TraceFinish      float64     `json:",omitempty"` // ms waiting for queued PNGs at the end
	Seed             Stats
	Ratio            float64 `json:",omitempty"` // seed-style step / full-run step
	// Skipped names the measurements asked away (a count of 0) or that
	// the backend cannot take, and why.
	Skipped []string `json:",omitempty"`
	// Remote is the step through agentbox serve against in-process.
	Remote *RemoteStats `json:",omitempty"`
	// Pool is the warm pool's figures.
	Pool *PoolStats `json:",omitempty"`
	// Scale is the step with several environments stepping at once.
	Scale []ScalePoint `json:",omitempty"`
}

// Run measures everything.
func Run(ctx context.Context, o Options) (*Report, error) {
	bundle, err := app.Load(o.App, app.DefaultLimits)
	if err != nil {
		return nil, err
	}
	defer bundle.Close()
	rep := &Report{Machine: machine()}
	logf := func(format string, args ...any) { fmt.Fprintf(o.Progress, format+"\n", args...) }
	skip := func(what string) {
		rep.Skipped = append(rep.Skipped, what)
		logf("%s: skipped", what)
	}

	floorer, _ := o.Backend.(environment.ColdFloorer)
	if o.ColdRuns <= 0 {
		skip("cold start (--cold 0)")
	} else {
		logf("cold start: %d runs of create → app window → first screenshot, each followed by the runtime's own (a sandbox running true) …", o.ColdRuns)
		if floorer == nil {
			skip("the runtime's cold-start floor (the " + o.Backend.Name() + " backend has none)")
		}
		xfloorer, _ := o.Backend.(environment.DisplayFloorer)
		if xfloorer == nil {
			skip("the cold-start floor with the X server (the " + o.Backend.Name() + " backend has none)")
		}
		var cold, floor, xfloor []time.Duration
		for i := 0; i < o.ColdRuns; i++ {
			d, err := coldStart(ctx, o, bundle)
			if err != nil {
				return nil, fmt.Errorf("cold start: %w", err)
			}
			cold = append(cold, d)
			if floorer != nil {
				d, err := floorer.ColdFloor(ctx, environment.Config{RunID: runID(), Image: o.Image, Runtime: o.Runtime, GuestBinary: o.GuestBinary})
				if err != nil {
					return nil, fmt.Errorf("the runtime's cold-start floor: %w", err)
				}
				floor = append(floor, d)
			}
			if xfloorer != nil {
				// The X server as the app's runs start it (appEnv: without
				// GLX when its manifest says "opengl": false).
				cfg := appEnv(o, bundle, observe.Screen{})
				cfg.GuestBinary = o.GuestBinary
				d, err := xfloorer.DisplayFloor(ctx, cfg)
				if err != nil {
					return nil, fmt.Errorf("the cold-start floor with the X server: %w", err)
				}
				xfloor = append(xfloor, d)
			}
		}
		rep.ColdStart, rep.ColdFloor = summarize(cold), summarize(floor)
		rep.ColdRatio = ratio(rep.ColdStart, rep.ColdFloor.P50)
		rep.ColdDisplayFloor = summarize(xfloor)
		rep.ColdDisplayRatio = ratio(rep.ColdStart, rep.ColdDisplayFloor.P50)
	}

	if o.Samples <= 0 {
		skip("step latency (--samples 0)")
	}
	if o.FloorSamples <= 0 {
		skip("the floor of a step's primitives (--floor-samples 0)")
	}
	if o.Samples > 0 || o.FloorSamples > 0 {
		for _, s := range o.Screens {
			logf("step latency at %s: %d samples each, the floor of its primitives: %d …", screenName(s), o.Samples, o.FloorSamples)
			st, err := stepLatency(ctx, o, bundle, s)
			if err != nil {
				return nil, fmt.Errorf("step latency %s: %w", screenName(s), err)
			}
			rep.Steps = append(rep.Steps, st)
		}
	}

	switch {
	case len(o.Concurrency) == 0:
		skip("the step with environments stepping at once (--concurrency none)")
	case o.ScaleSteps <= 0:
		skip("the step with environments stepping at once (--scale-steps 0)")
	default:
		for _, n := range o.Concurrency {
			logf("the step with %d environments stepping at once: %d steps each …", n, o.ScaleSteps)
			pt, err := scaleStep(ctx, o, bundle, n)
			if err != nil {
				return nil, fmt.Errorf("the step with %d environments at once: %w", n, err)
			}
			rep.Scale = append(rep.Scale, pt)
		}
	}

	if o.RunSteps <= 0 {
		skip("the full run (--steps 0)")
	} else {
		logf("a %d-step run with its full trace …", o.RunSteps)
		if err := fullRun(ctx, o, bundle, rep); err != nil {
			return nil, fmt.Errorf("full run: %w", err)
		}
	}

	if o.RemoteSamples <= 0 {
		skip("the step through agentbox serve (--remote-samples 0)")
	} else {
		logf("the step in-process, over agentbox serve's WebSocket and over its HTTP: %d samples each …", o.RemoteSamples)
		rs, err := remoteStep(ctx, o, bundle)
		if err != nil {
			return nil, fmt.Errorf("the step through agentbox serve: %w", err)
		}
		rep.Remote = rs
	}

	if o.PoolResets <= 0 {
		skip("the warm pool's resets (--pool-resets 0)")
	} else if o.PythonClient == "" {
		why := o.PythonSkip
		if why == "" {
			why = "no Python client given"
		}
		skip(fmt.Sprintf("the warm pool's resets from the Python client (%s)", why))
	}
	if o.PoolEvalEpisodes <= 0 {
		skip("eval with and without the pool (--pool-eval 0)")
	}
	if o.PoolCapacity <= 0 {
		skip("the warm pool's capacity (--pool-capacity 0)")
	}
	if o.Forks <= 0 {
		skip("the fork of an episode through serve (--forks 0)")
	}
	if o.PoolResets > 0 || o.PoolCapacity > 0 || o.PoolEvalEpisodes > 0 || o.Forks > 0 {
		rep.Pool = &PoolStats{}
	}
	if o.PoolResets > 0 {
		logf("reset → first observation from serve's warm pool and cold, in turn: %d samples each …", o.PoolResets)
		if err := poolReset(ctx, o, rep.Pool); err != nil {
			return nil, fmt.Errorf("the warm pool's reset: %w", err)
		}
	}
	if o.Forks > 0 {
		logf("fork of a %d-step mover episode into %d through agentbox serve, %d times …", o.ForkSteps, o.ForkCount, o.Forks)
		fs, err := forkBench(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("the fork: %w", err)
		}
		rep.Pool.Fork = fs
	}
	if o.PoolEvalEpisodes > 0 {
		logf("agentbox eval of %d mover play-tests at --parallel %d, without --pool, with it, and with --reset relaunch …", o.PoolEvalEpisodes, max(o.PoolEvalParallel, 1))
		es, err := poolEval(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("eval with and without the pool: %w", err)
		}
		rep.Pool.Eval = es
	}
	if o.PoolCapacity > 0 {
		logf("filling a warm pool of %d idle environments in one server …", o.PoolCapacity)
		c, err := poolCapacity(ctx, o, o.PoolCapacity)
		if err != nil {
			return nil, fmt.Errorf("the warm pool's capacity: %w", err)
		}
		rep.Pool.Capacity = c
	}

	if o.SeedSteps <= 0 {
		skip("the seed-style step (--seed-steps 0)")
	} else if !environment.CapabilitiesOf(o.Backend).SeedStep {
		skip("the seed-style step (the " + o.Backend.Name() + " backend has none)")
	} else {
		logf("seed-style steps (docker exec scrot + cat + xdotool): %d samples …", o.SeedSteps)
		s, err := seedStyle(ctx, o, bundle)
		if err != nil {
			return nil, fmt.Errorf("seed-style step: %w", err)
		}
		rep.Seed = s
		if rep.RunPerStep > 0 {
			rep.Ratio = s.P50 / rep.RunPerStep
		}
	}
	rep.Machine.LoadAfter = loadAvg()
	return rep, nil
}

// runID is a run ID of this bench's own ("bench-PID-NANOS"), so that
// two benches at once never share a container or Pod name, and each one's
// sandboxes carry its own run label (what the reaper and a run's forced
// teardown select by).
func runID() string { return benchID("bench") }

// benchID is prefix made unique to this process and moment.
func benchID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), time.Now().UnixNano())
}

func newEnv(ctx context.Context, o Options, b *app.Bundle, s observe.Screen, full bool) (environment.Environment, error) {
	// The sandbox a run of the app gets (appEnv); its files go in while
	// the display comes up, as a run's cold start sends them
	// (environment.Config.Stage).
	cfg := appEnv(o, b, s)
	cfg.FullFrames, cfg.Stage = full, b
	env, err := o.Backend.Create(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := env.Launch(ctx, environment.LaunchSpec{App: b, ReadyTimeout: 30 * time.Second}); err != nil {
		env.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return env, nil
}

// appEnv is the sandbox a run of b at screen s is created with, the
// manifest's settings applied as a session applies them
// (session.EnvConfig: the accessibility bus, GLX), for the bench's own
// sandboxes, which it creates without a session.
func appEnv(o Options, b *app.Bundle, s observe.Screen) environment.Config {
	return session.EnvConfig(session.Config{App: b, RunID: runID(), Env: environment.Config{Image: o.Image, Runtime: o.Runtime, Screen: s}})
}

func closeEnv(ctx context.Context, env environment.Environment) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	env.Close(cctx)
}

func coldStart(ctx context.Context, o Options, b *app.Bundle) (time.Duration, error) {
	t := time.Now()
	env, err := newEnv(ctx, o, b, observe.DefaultScreen, false)
	if err != nil {
		return 0, err
	}
	defer closeEnv(ctx, env)
	if _, _, err := env.Observe(ctx); err != nil {
		return 0, err
	}
	return time.Since(t), nil
}

// stepLatency measures one mouse move and the next screenshot, as the
// agent sees it, and the floor of its primitives in the same sandbox, a
// floor sample in turn with each step (pairedRun): in one sandbox for
// the unchanged screen, in another for the full frame.
func stepLatency(ctx context.Context, o Options, b *app.Bundle, s observe.Screen) (StepStats, error) {
	st := StepStats{Screen: s}
	var floors [2]*StepFloor
	for k, full := range []bool{false, true} {
		if full && o.Samples <= 0 {
			break
		}
		env, err := newEnv(ctx, o, b, s, full)
		if err != nil {
			return st, err
		}
		// With a full-frame sandbox to come, this one times only the
		// unchanged step's primitives, and the full-frame one the rest.
		ds, fl, err := pairedRun(ctx, o, env, s, !full && o.Samples > 0)
		if err == nil && !full && o.Samples > 0 {
			// Clicks into the app's own (active) window: no window manager
			// involvement, one round trip to confirm.
			st.Click, err = clickLatency(ctx, o, env, s)
		}
		closeEnv(ctx, env)
		if err != nil {
			return st, err
		}
		if full {
			st.Full = summarize(ds)
		} else {
			st.Unchanged = summarize(ds)
		}
		if fl != nil {
			floors[k] = summarizeFloor(*fl)
			floors[k].Paired = o.Samples > 0
		}
	}
	if st.Floor = floors[0]; st.Floor != nil {
		if floors[1] != nil {
			st.Floor.withFullFrame(floors[1])
		}
		st.Floor.ratios(st)
	}
	return st, nil
}

// stepWarmup is the rounds of pairedRun before its samples.
const stepWarmup = 10

// pairedRun takes o.Samples steps (a mouse move, then the screenshot) in
// env and, where env can time them, o.FloorSamples samples of the step's
// primitives alone, one floor sample before each step, so that the floor
// and the step see the same machine and the same screen. A floor sample's
// motion goes to another point than the step's after it, so that the
// step's own motion moves the pointer. With unchanged, a floor sample is
// only what the floor of an unchanged screen's step is made of (no frame
// is carried, compressed or decompressed); without, it is every
// primitive, and the PNG encodes are timed after the run.
func pairedRun(ctx context.Context, o Options, env environment.Environment, s observe.Screen, unchanged bool) ([]time.Duration, *environment.Floor, error) {
	floorer, _ := env.(environment.Floorer)
	if o.FloorSamples <= 0 {
		floorer = nil
	}
	var (
		ds []time.Duration
		fl *environment.Floor
	)
	if floorer != nil {
		fl = &environment.Floor{}
	}
	for i := range max(o.Samples, o.FloorSamples) + stepWarmup {
		n := i - stepWarmup // the sample's index; negative while warming up
		if floorer != nil && n < o.FloorSamples {
			f, err := floorer.Floor(ctx, environment.FloorSpec{Samples: 1, From: i + 1, Unchanged: unchanged})
			if err != nil {
				return nil, nil, fmt.Errorf("the floor of its primitives: %w", err)
			}
			if n >= 0 {
				appendFloor(fl, f)
			}
		}
		if n < o.Samples {
			x, y := 10+(i*37)%(s.Width-20), 10+(i*53)%(s.Height-20)
			t := time.Now()
			if _, err := actObserve(ctx, env, action.Action{Kind: action.MouseMove, X: &x, Y: &y}); err != nil {
				return nil, nil, err
			}
			if n >= 0 {
				ds = append(ds, time.Since(t))
			}
		}
	}
	if floorer != nil && !unchanged {
		f, err := floorer.Floor(ctx, environment.FloorSpec{PNG: pngSamples(o.FloorSamples)})
		if err != nil {
			return nil, nil, fmt.Errorf("the floor of its primitives: %w", err)
		}
		fl.PNG = f.PNG
	}
	return ds, fl, nil
}

// appendFloor adds f's samples to dst's.
func appendFloor(dst *environment.Floor, f environment.Floor) {
	dst.SHM, dst.FrameBytes = f.SHM, f.FrameBytes
	dst.Ping = append(dst.Ping, f.Ping...)
	dst.FrameTrip = append(dst.FrameTrip, f.FrameTrip...)
	dst.Motion = append(dst.Motion, f.Motion...)
	dst.Capture = append(dst.Capture, f.Capture...)
	dst.Damage = append(dst.Damage, f.Damage...)
	dst.Hash = append(dst.Hash, f.Hash...)
	dst.Encode = append(dst.Encode, f.Encode...)
	dst.Decode = append(dst.Decode, f.Decode...)
	dst.PNG = append(dst.PNG, f.PNG...)
}

// pngSamples bounds the PNG encodes of the floor: each takes
// milliseconds to tens of them, and their spread is small.
func pngSamples(n int) int { return min(n, 50) }

// clickLatency measures a left click at the window's centre and the next
// screenshot.
func clickLatency(ctx context.Context, o Options, env environment.Environment, s observe.Screen) (Stats, error) {
	_, st, err := env.Observe(ctx)
	if err != nil {
		return Stats{}, err
	}
	x, y := s.Width/2, s.Height/2
	for _, w := range st.Windows {
		if w.Focused {
			x, y = w.X+w.Width/2, w.Y+w.Height/2
		}
	}
	var ds []time.Duration
	for i := 0; i < o.Samples+10; i++ {
		t := time.Now()
		res, err := actObserve(ctx, env, action.Action{Kind: action.Click, X: &x, Y: &y})
		if err != nil {
			return Stats{}, err
		}
		if !res.OK {
			return Stats{}, fmt.Errorf("click at (%d,%d): %s", x, y, res.Error)
		}
		if i >= 10 {
			ds = append(ds, time.Since(t))
		}
	}
	return summarize(ds), nil
}

// actObserve performs a and takes the observation after it as the
// session's loop does: in one exchange with the sandbox where the
// environment can (environment.Stepper, no settle), else an Act and an
// Observe.
func actObserve(ctx context.Context, env environment.Environment, a action.Action) (action.Result, error) {
	var (
		res action.Result
		err error
	)
	if sp, ok := env.(environment.Stepper); ok {
		var got *environment.Stepped
		if res, got, err = sp.Step(ctx, a, nil); err != nil || got != nil {
			return res, err
		}
	} else if res, err = env.Act(ctx, a); err != nil {
		return res, err
	}
	if res.OK {
		_, _, err = env.Observe(ctx)
	}
	return res, err
}

// moverAgent holds Right for a while, releases, moves the mouse, and
// repeats, so the screen keeps changing; it finishes after n steps.
type moverAgent struct{ n, step int }

func (a *moverAgent) Decide(_ context.Context, obs *observe.Observation) (agent.Decision, error) {
	a.step++
	var act action.Action
	switch {
	case a.step >= a.n:
		act = action.Action{Kind: action.Done}
	case a.step%40 == 1:
		act = action.Action{Kind: action.KeyDown, Key: "Right"}
	case a.step%40 == 20:
		act = action.Action{Kind: action.KeyUp, Key: "Right"}
	case a.step%40 == 21:
		act = action.Action{Kind: action.KeyDown, Key: "Left"}
	case a.step%40 == 39:
		act = action.Action{Kind: action.KeyUp, Key: "Left"}
	default:
		x, y := 10+(a.step*37)%600, 10+(a.step*53)%440
		act = action.Action{Kind: action.MouseMove, X: &x, Y: &y}
	}
	return agent.Decision{Action: act}, nil
}

func fullRun(ctx context.Context, o Options, b *app.Bundle, rep *Report) error {
	dir, err := owner.TempDir("bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	res, err := session.Run(ctx, session.Config{
		RunID: benchID("bench-run"), Backend: o.Backend, Env: environment.Config{Image: o.Image, Runtime: o.Runtime},
		App: b, AgentInfo: trace.AgentInfo{Name: "bench"},
		MaxSteps: o.RunSteps + 1, TraceDir: filepath.Join(dir, "trace"),
	}, session.Loop{Agent: &moverAgent{n: o.RunSteps}})
	if err != nil {
		return err
	}
	if res.Outcome != trace.Success {
		return fmt.Errorf("the run ended %s: %s", res.Outcome, res.Message)
	}
	tr, err := trace.Open(filepath.Join(dir, "trace"))
	if err != nil {
		return err
	}
	t := tr.Run.Timings
	// The loop plus the wait for the last PNGs: the whole cost of steps.
	perStep := (t["loop"] + t["trace_finish"]) / float64(res.Steps)
	rep.RunPerStep, rep.RunSteps = perStep, res.Steps
	rep.TraceShare = t["trace_write"] / t["loop"]
	rep.TraceFinish = t["trace_finish"]
	return nil
}

func seedStyle(ctx context.Context, o Options, b *app.Bundle) (Stats, error) {
	stepper, ok := o.Backend.(environment.SeedStepper)
	if !ok {
		return Stats{}, fmt.Errorf("the %s backend has no seed-style step", o.Backend.Name())
	}
	env, err := newEnv(ctx, o, b, observe.DefaultScreen, false)
	if err != nil {
		return Stats{}, err
	}
	defer closeEnv(ctx, env)
	var ds []time.Duration
	for i := 0; i < o.SeedSteps+2; i++ {
		t := time.Now()
		if _, err := stepper.SeedStep(ctx, env, 10+i*7, 10+i*5); err != nil {
			return Stats{}, err
		}
		if i >= 2 {
			ds = append(ds, time.Since(t))
		}
	}
	return summarize(ds), nil
}

// Print writes the report as a table. A measurement asked away is
// printed as skipped, with the reason.
func (r *Report) Print(w io.Writer, o Options) {
	image := o.Image
	if image == "" {
		image = "none (the host's system)"
	}
	if o.Runtime != "" {
		image += ", OCI runtime " + o.Runtime
	}
	fmt.Fprintf(w, "\nagentbox bench — backend %s, image %s\n", o.Backend.Name(), image)
	fmt.Fprintf(w, "machine: %s\n\n", r.Machine)
	if r.ColdStart.N == 0 {
		fmt.Fprintf(w, "cold start: skipped\n")
	} else {
		fmt.Fprintf(w, "cold start, create → app window up → first screenshot:\n  %s\n", r.ColdStart)
		if r.ColdFloor.N > 0 {
			fmt.Fprintf(w, "  the runtime alone, the same sandbox running true: %s\n", r.ColdFloor)
			fmt.Fprintf(w, "  cold start %s\n", AtFloor(r.ColdStart.P50, r.ColdFloor.P50))
		}
		if r.ColdDisplayFloor.N > 0 {
			fmt.Fprintf(w, "  the runtime and its X server alone, the same sandbox running Xvfb until ready: %s\n", r.ColdDisplayFloor)
			fmt.Fprintf(w, "  cold start %s (with the X server)\n", AtFloor(r.ColdStart.P50, r.ColdDisplayFloor.P50))
		}
	}
	for _, s := range r.Steps {
		fmt.Fprintf(w, "step at %dx%d, mouse_move → next screenshot (as the agent sees it):\n", s.Screen.Width, s.Screen.Height)
		if s.Unchanged.N > 0 {
			fmt.Fprintf(w, "  screen unchanged:          %s\n", s.Unchanged)
			fmt.Fprintf(w, "  full frame every step:     %s\n", s.Full)
			fmt.Fprintf(w, "  click, screen unchanged:   %s\n", s.Click)
		} else {
			fmt.Fprintf(w, "  agentbox's step: skipped\n")
		}
		if s.Floor != nil {
			s.Floor.print(w, s)
		}
	}
	printScale(w, r.Scale)
	if r.RunSteps > 0 {
		fmt.Fprintf(w, "%d-step run with its full trace (PNGs, JSONL, logs):\n  %s per step; trace writing %.1f%% of the loop; %s waiting for the last PNGs\n",
			r.RunSteps, FormatMS(r.RunPerStep), 100*r.TraceShare, FormatMS(r.TraceFinish))
	}
	if rs := r.Remote; rs != nil {
		fmt.Fprintf(w, "step at %dx%d through agentbox serve, mouse_move → next observation (the trace written in each):\n", rs.Screen.Width, rs.Screen.Height)
		fmt.Fprintf(w, "  in-process (session API):  %s\n", rs.InProcess)
		fmt.Fprintf(w, "  WebSocket:                 %s  (+%s p50)\n", rs.WebSocket, FormatMS(rs.WebSocket.P50-rs.InProcess.P50))
		fmt.Fprintf(w, "  HTTP:                      %s  (+%s p50)\n", rs.HTTP, FormatMS(rs.HTTP.P50-rs.InProcess.P50))
		fmt.Fprintf(w, "  WebSocket, every frame:    %s  (+%s p50; %d KiB of pixels a step)\n", rs.WebSocketFull, FormatMS(rs.WebSocketFull.P50-rs.InProcess.P50), 4*rs.Screen.Width*rs.Screen.Height>>10)
	}
	if r.Pool != nil {
		r.Pool.print(w)
	}
	if r.Seed.N > 0 {
		fmt.Fprintf(w, "seed-style step (docker exec scrot + docker exec cat + docker exec xdotool):\n  %s\n", r.Seed)
		if r.Ratio > 0 {
			fmt.Fprintf(w, "\nthe %d-step run is %.0f× faster per step than the seed-style step (p50 %s vs %s)\n",
				r.RunSteps, r.Ratio, FormatMS(r.Seed.P50), FormatMS(r.RunPerStep))
		}
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(w, "\nskipped: %s\n", strings.Join(r.Skipped, "; "))
	}
}
