// Package session is the referee: it creates an environment, starts the app,
// runs observe → decide → validate → record → act until the run ends, writes
// the trace, and always tears the environment down. It owns deadlines,
// outcomes and the trace; it connects the environment and the agent without
// either knowing the other.
package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/trace"
)

// ErrInterrupted is the cancellation cause callers set when the user asked
// the run to stop (SIGINT/SIGTERM): context.WithCancelCause(ctx) and
// cancel(session.ErrInterrupted).
var ErrInterrupted = errors.New("interrupted")

// Config is one run.
type Config struct {
	RunID   string
	Backend environment.Backend
	Env     environment.Config
	App     *app.Bundle

	Agent     agent.Agent
	AgentInfo trace.AgentInfo
	Task      string

	MaxSteps int           // default 100
	Timeout  time.Duration // the loop's deadline, from launch; default 5m
	// StartTimeout bounds creating the sandbox and launching the app
	// (default 60s); ReadyTimeout, the app's window (default: manifest's).
	StartTimeout time.Duration
	ReadyTimeout time.Duration
	// TeardownTimeout bounds Close (default 30s).
	TeardownTimeout time.Duration
	// MaxRate bounds the actions performed per second (a runaway agent
	// cannot flood the app or the trace faster); 0 means no bound. The time
	// an action waited is recorded with its result.
	MaxRate float64
	// FreezeWhileThinking freezes the app's processes while the agent
	// decides (when the backend can), so a game does not run on while a
	// model thinks; the frozen time is recorded apart.
	FreezeWhileThinking bool

	// Tree reads the accessibility tree with every observation (the
	// sandbox needs Env.A11y) and records it in the trace; Marks also
	// numbers the interactive elements on the agent's copy of each
	// screenshot (set-of-marks), so a model can answer with a mark.
	// Without either the tree is read only when the agent asks: an
	// accessibility_tree action, or an agent.TreeWanter.
	Tree  bool
	Marks bool
	// TreeLimits bound each read (zero: action.DefaultTreeLimits).
	TreeLimits action.TreeLimits

	// Settle says how to let the screen settle before each screenshot
	// after an action (default: take it at once; input is synchronous, so
	// the X server has already processed it).
	Settle Settle
	// FirstSettle is the same for the first screenshot, after the app's
	// window is up (default: at once). A replay waits for a still screen
	// here, so an app that has mapped its window but not drawn it yet does
	// not differ from its recording at step 1.
	FirstSettle Settle

	TraceDir string
	LogCap   int64 // per stream; default trace.DefaultLogCap
	// Progress receives human-readable lines; nil discards.
	Progress io.Writer
	Verbose  bool
}

func (c *Config) defaults() {
	if c.MaxSteps <= 0 {
		c.MaxSteps = 100
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Minute
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = 60 * time.Second
	}
	if c.TeardownTimeout <= 0 {
		c.TeardownTimeout = 30 * time.Second
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = time.Duration(c.App.Manifest.ReadyTimeout)
		if c.ReadyTimeout <= 0 {
			c.ReadyTimeout = app.DefaultReadyTimeout
		}
	}
	if c.LogCap <= 0 {
		c.LogCap = trace.DefaultLogCap
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	c.Env.Screen = c.Env.Screen.OrDefault()
	c.Env.RunID = c.RunID
	// The app's manifest, the tree or marks at every step ask for the
	// accessibility bus too.
	c.Env.A11y = c.Env.A11y || c.App.Manifest.A11y || c.Tree || c.Marks
}

// Settle modes.
const (
	SettleNone   = "none"   // screenshot at once
	SettleFixed  = "fixed"  // sleep Duration
	SettleStable = "stable" // until the screen is unchanged for Duration (at most Timeout)
)

// DefaultStable is how long the screen must stay unchanged for "stable"
// without a duration; StableCap is how long a stable settle waits at most
// (a screen that never stops changing: a clock, an animation), after which
// the screenshot is taken anyway and the observation says the cap was hit
// (settle_capped).
const (
	DefaultStable = 200 * time.Millisecond
	StableCap     = 2 * time.Second
)

// Settle is the settle-before-screenshot behaviour.
type Settle struct {
	Mode     string
	Duration time.Duration
	Timeout  time.Duration // stable only; default StableCap
}

// ParseSettle reads "none", "fixed:200ms" or "stable:150ms" (stable alone
// means stable:200ms, DefaultStable).
func ParseSettle(s string) (Settle, error) {
	mode, arg, _ := strings.Cut(s, ":")
	st := Settle{Mode: mode}
	switch mode {
	case "", SettleNone:
		return Settle{Mode: SettleNone}, nil
	case SettleFixed, SettleStable:
	default:
		return st, fmt.Errorf("settle %q: want none, fixed:DURATION or stable[:DURATION]", s)
	}
	st.Duration = DefaultStable
	if arg != "" {
		d, err := time.ParseDuration(arg)
		if err != nil || d < 0 || d > time.Minute {
			return st, fmt.Errorf("settle %q: bad duration %q", s, arg)
		}
		st.Duration = d
	} else if mode == SettleFixed {
		return st, fmt.Errorf("settle %q: fixed needs a duration, e.g. fixed:200ms", s)
	}
	return st, nil
}

// String is the form ParseSettle reads: "none", "fixed:200ms", "stable:150ms".
func (s Settle) String() string {
	switch s.Mode {
	case "", SettleNone:
		return SettleNone
	}
	return s.Mode + ":" + s.Duration.String()
}

// Result is how a run ended.
type Result struct {
	Outcome trace.Outcome
	Reason  string
	Message string

	TraceDir string
	Steps    int
	Duration time.Duration
	AppExit  *action.Exit
}

// ExitCode is the process exit code for the outcome.
func (r Result) ExitCode() int { return r.Outcome.ExitCode() }

// ending is how the loop ended, before it is recorded.
type ending struct {
	outcome trace.Outcome
	reason  string
	msg     string
}

func (e *ending) String() string { return fmt.Sprintf("%s (%s): %s", e.outcome, e.reason, e.msg) }

// Run performs one run. The returned error is non-nil only when no trace
// could be written at all; every other failure is an outcome in Result.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg.defaults()
	if err := cfg.Env.Screen.Validate(); err != nil {
		return Result{}, fmt.Errorf("session: screen %v: %w", cfg.Env.Screen, err)
	}
	r := &run{cfg: cfg, started: time.Now()}
	tw, err := trace.Create(cfg.TraceDir, r.initialRecord(), trace.Options{LogCap: cfg.LogCap})
	if err != nil {
		return Result{}, err
	}
	r.tw = tw
	r.events = newSink(tw, r.started, r.cfg.App.Manifest.ReadyOutput)
	r.cfg.Env.Events = r.events

	end := r.execute(ctx)

	res := Result{Outcome: end.outcome, Reason: end.reason, Message: end.msg, TraceDir: cfg.TraceDir, Steps: r.steps}
	res.AppExit = r.events.exit()
	tf := time.Now()
	ferr := tw.Finish(func(run *trace.Run) {
		r.timing("trace_finish", time.Since(tf)) // waits for queued screenshots
		run.Outcome, run.Reason, run.Message = end.outcome, end.reason, end.msg
		run.AppExit = res.AppExit
		run.Ended = time.Now()
		if run.Timings == nil {
			run.Timings = map[string]float64{}
		}
		for k, v := range r.timings {
			run.Timings[k] = v
		}
	})
	res.Duration = time.Since(r.started)
	if ferr != nil {
		fmt.Fprintf(cfg.Progress, "agentbox: trace: %s\n", termsafe.Text(ferr.Error()))
	}
	return res, nil
}

type run struct {
	cfg     Config
	started time.Time
	tw      *trace.Writer
	events  *sink
	env     environment.Environment
	steps   int
	timings map[string]float64
	// traceTime is the time the loop spent writing the trace.
	traceTime time.Duration
	// frozen is the total time the app was frozen while the agent decided.
	frozen time.Duration
}

func (r *run) timing(name string, d time.Duration) {
	if r.timings == nil {
		r.timings = map[string]float64{}
	}
	r.timings[name] = float64(d.Microseconds()) / 1000
}

func (r *run) initialRecord() trace.Run {
	b := r.cfg.App
	return trace.Run{
		ID:       r.cfg.RunID,
		Agentbox: versionString(),
		Task:     r.cfg.Task,
		Agent:    r.cfg.AgentInfo,
		App: trace.AppInfo{
			Target: b.Target, TargetPath: b.Path, Command: b.Manifest.Command, Args: b.Manifest.Args,
			InImage: b.InImage, WindowTitle: b.Manifest.WindowTitle,
			Files: len(b.Files), Bytes: b.TotalBytes, EnvKeys: sortedKeys(b.Manifest.Env),
		},
		Env: trace.EnvInfo{
			Backend: r.cfg.Backend.Name(),
			Image:   r.cfg.Env.Image,
			Runtime: r.cfg.Env.Runtime,
			Screen:  r.cfg.Env.Screen,
			Limits:  limitsMap(r.cfg.Env.Resources.WithDefaults()),
		},
		Settings: &trace.Settings{
			Settle:              r.cfg.Settle.String(),
			MaxSteps:            r.cfg.MaxSteps,
			TimeoutMS:           msOf(r.cfg.Timeout),
			ReadyTimeoutMS:      msOf(r.cfg.ReadyTimeout),
			LogCap:              r.cfg.LogCap,
			NoWM:                r.cfg.Env.NoWM,
			FreezeWhileThinking: r.cfg.FreezeWhileThinking,
			MaxRate:             &r.cfg.MaxRate,
			A11y:                r.cfg.Env.A11y,
			Tree:                r.cfg.Tree,
			Marks:               r.cfg.Marks,
		},
		Network: networkInfo(r.cfg.Env.Network),
		Started: r.started,
	}
}

func limitsMap(l environment.Resources) map[string]any {
	return map[string]any{"cpus": l.CPUs, "memory_mb": l.MemoryMB, "pids": l.PIDs, "tmpfs_mb": l.TmpfsMB, "shm_mb": l.ShmMB}
}

// execute runs everything after the trace exists and returns how it ended.
// Teardown always happens here.
func (r *run) execute(ctx context.Context) (end *ending) {
	cfg := r.cfg
	defer func() {
		// A panic anywhere below still tears down (the deferred teardown
		// has run by now) and is recorded as an error with its stack.
		if p := recover(); p != nil {
			fmt.Fprintf(r.cfg.Progress, "agentbox: panic: %s\n%s", termsafe.Line(fmt.Sprint(p)), debug.Stack())
			end = &ending{trace.Error, trace.ReasonEnvironment, fmt.Sprintf("agentbox panicked: %v", p)}
		}
	}()
	defer r.teardown(ctx)

	startCtx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()

	t0 := time.Now()
	env, err := cfg.Backend.Create(startCtx, cfg.Env)
	if err != nil {
		return r.startFailure(ctx, "create the sandbox", err)
	}
	r.env = env
	r.timing("create", time.Since(t0))
	info := env.Info()
	_ = r.tw.Update(func(run *trace.Run) {
		run.Env.ID, run.Env.ImageID, run.Env.Display = info.ID, info.ImageID, info.Display
		run.Env.WM, run.Env.SHM, run.Env.Timings = info.WM, info.SHM, info.Timings
		run.Env.Extra = info.Extra
		if info.Image != "" {
			run.Env.Image = info.Image
		}
	})

	t1 := time.Now()
	lr, err := env.Launch(startCtx, environment.LaunchSpec{App: cfg.App, ReadyTimeout: cfg.ReadyTimeout, LogCap: cfg.LogCap})
	if err != nil {
		return r.startFailure(ctx, "launch the app", err)
	}
	r.timing("launch", time.Since(t1))
	r.timing("app_ready", lr.Ready)
	_ = r.tw.Update(func(run *trace.Run) {
		run.App.PID = lr.PID
		run.App.FileHashes, run.App.Digest = lr.Files, appDigest(lr.Files)
		run.Env.Timings = r.env.Info().Timings
	})
	if lr.Window != nil {
		fmt.Fprintf(cfg.Progress, "agentbox: app window %q is up after %v\n", lr.Window.Title, lr.Ready.Round(time.Millisecond))
	}
	if text := cfg.App.Manifest.ReadyOutput; text != "" {
		t2 := time.Now()
		if end := r.waitReadyOutput(ctx, startCtx, t1, text); end != nil {
			return end
		}
		waited := time.Since(t2)
		r.timing("ready_output", waited)
		r.timing("app_ready", lr.Ready+waited)
		fmt.Fprintf(cfg.Progress, "agentbox: the app printed %q after %v\n", text, (lr.Ready + waited).Round(time.Millisecond))
	}

	return r.loop(ctx)
}

// waitReadyOutput waits, until launchStart+ReadyTimeout, for the app to
// print the manifest's ready_output.
func (r *run) waitReadyOutput(ctx, startCtx context.Context, launchStart time.Time, text string) *ending {
	wctx, cancel := context.WithDeadline(startCtx, launchStart.Add(r.cfg.ReadyTimeout))
	defer cancel()
	err := r.events.waitReady(wctx)
	if err == nil {
		return nil
	}
	if e := interrupted(ctx); e != nil {
		return e
	}
	var nr *errNotReady
	switch {
	case errors.As(err, &nr):
		return &ending{trace.Error, trace.ReasonAppStart, fmt.Sprintf("%v before printing a line containing %q (ready_output)%s", err, text, r.events.tail(5))}
	case startCtx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return &ending{trace.Error, trace.ReasonAppStart, fmt.Sprintf("the app did not print a line containing %q (ready_output) within %v%s", text, r.cfg.ReadyTimeout, r.events.tail(5))}
	}
	return r.startFailure(ctx, "wait for the app's ready output", err)
}

// startFailure classifies an error before the loop began.
func (r *run) startFailure(ctx context.Context, what string, err error) *ending {
	if e := interrupted(ctx); e != nil {
		return e
	}
	msg := fmt.Sprintf("could not %s: %v", what, err)
	switch {
	case errors.Is(err, environment.ErrNoWindow):
		return &ending{trace.Error, trace.ReasonNoWindow, msg + r.events.tail(5)}
	case errors.Is(err, environment.ErrAppStart), errors.Is(err, environment.ErrAppExited), errors.Is(err, app.ErrInvalid):
		return &ending{trace.Error, trace.ReasonAppStart, msg + r.events.tail(5)}
	case errors.Is(err, context.DeadlineExceeded):
		return &ending{trace.Error, trace.ReasonEnvironment, msg + fmt.Sprintf(" (start timeout %v)", r.cfg.StartTimeout)}
	}
	return &ending{trace.Error, trace.ReasonEnvironment, msg}
}

func interrupted(ctx context.Context) *ending {
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrInterrupted) {
		return &ending{trace.Interrupted, trace.ReasonSignal, "interrupted by a signal"}
	}
	return nil
}

func (r *run) teardown(ctx context.Context) {
	defer r.closeAgent()()
	if r.env == nil {
		return
	}
	env := r.env
	r.env = nil
	r.events.teardown() // the app's exit from here on is agentbox's doing
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.TeardownTimeout)
	defer cancel()
	t := time.Now()
	if err := env.Close(tctx); err != nil {
		fmt.Fprintf(r.cfg.Progress, "agentbox: teardown: %s\n", termsafe.Text(err.Error()))
		r.tw.Record(trace.Record{Type: trace.TypeEvent, Event: "teardown_error", Data: map[string]any{"error": err.Error()}})
	}
	r.timing("teardown", time.Since(t))
}

// closeAgent starts closing the agent, so that an agent program stops
// while the sandbox is torn down and within the run's time; the function
// it returns waits for that and records it (timing agent_close).
func (r *run) closeAgent() (wait func()) {
	c, ok := r.cfg.Agent.(agent.Closer)
	if !ok {
		return func() {}
	}
	done := make(chan time.Duration, 1)
	go func() {
		t := time.Now()
		if err := c.Close(); err != nil {
			fmt.Fprintf(r.cfg.Progress, "agentbox: closing the agent: %s\n", termsafe.Text(err.Error()))
		}
		done <- time.Since(t)
	}()
	return func() { r.timing("agent_close", <-done) }
}

// appDigest is the SHA-256 over the sorted "sha256  path" lines of the
// staged files (the format of sha256sum).
func appDigest(files map[string]string) string {
	if len(files) == 0 {
		return ""
	}
	h := sha256.New()
	for _, p := range sortedKeys(files) {
		fmt.Fprintf(h, "%s  %s\n", files[p], p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
