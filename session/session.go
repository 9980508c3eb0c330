// Package session is the referee: one environment, its app and its trace,
// driven step by step by whoever controls it. Open creates the trace and
// the sandbox (or takes over one created ahead), launches the app and
// waits until it is ready; Observe and Act are the steps, each validated,
// rate-limited and recorded before it runs, with who chose it (its actor);
// Close tears the environment down and finalises the trace with the
// outcome. Run is the agent loop on top — observe → decide → validate →
// record → act until the run ends — used by run, eval, replay and bench;
// a server, an MCP server or a live page drive the same Session with
// their own actor. The package owns deadlines, outcomes and the trace; it
// connects the environment and the controller without either knowing the
// other.
package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/vault"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/trace"
)

// ErrInterrupted is the cancellation cause callers set when the user asked
// the run to stop (SIGINT/SIGTERM): context.WithCancelCause(ctx) and
// cancel(session.ErrInterrupted).
var ErrInterrupted = errors.New("interrupted")

// Config is one episode: the sandbox, the app, the task and its files,
// the limits and the trace. Whoever decides the steps is not in it: Run's
// agent is a Loop; Open's caller (a server, an MCP server, a test) acts
// itself.
type Config struct {
	RunID   string
	Backend environment.Backend
	Env     environment.Config
	App     *app.Bundle

	// AgentInfo names who decides the steps (run.json's agent); Task is
	// the episode's instruction, given to the agent and recorded.
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
	// Clock is the app's clock: the wall clock, or a virtual one that
	// moves only with the steps (see Clock). On a virtual clock a settle
	// of none becomes stable (DefaultStable): the app needs a moment to
	// show the time it was moved to.
	Clock Clock

	// Tree reads the accessibility tree with every observation (the
	// sandbox needs Env.A11y) and records it in the trace; Marks also
	// numbers the interactive elements on the agent's copy of each
	// screenshot (set-of-marks), so a model can answer with a mark.
	// Without either the tree is read only when the agent asks: an
	// accessibility_tree action, or an agent.TreeWanter.
	Tree  bool
	Marks bool
	// TreeLimits bound each read (zero: observe.DefaultTreeLimits).
	TreeLimits observe.TreeLimits

	// Settle says how to let the screen settle before each screenshot
	// after an action (default: take it at once; input is synchronous, so
	// the X server has already processed it).
	Settle Settle
	// FirstSettle is the same for the first screenshot, after the app's
	// window is up (default: at once). A replay waits for a still screen
	// here, so an app that has mapped its window but not drawn it yet does
	// not differ from its recording at step 1.
	FirstSettle Settle
	// LookAtLaunch takes the first observation's screenshot with the
	// launch, in the same request to the sandbox, once the window is up,
	// when FirstSettle is none (a settle waits after the launch). For a
	// caller that looks at once after Open (serve's reset and create
	// that answer with an observation): the first look then finds the
	// screen as the launch left it rather than asking again. A caller
	// that may look much later leaves it off.
	LookAtLaunch bool

	// Policy, when set, gates every step's action before it runs, whoever
	// chose it (agent, script, API, MCP; a person's own steps at the live
	// page are not gated): a denied action is not performed and its
	// result names the rule. Approver answers its asks (nil: every ask is
	// denied); AskTimeout bounds one ask (default DefaultAskTimeout), and
	// an ask not answered by then is denied. While an ask waits the app is
	// frozen where the backend can freeze it, and the wait does not count
	// against Timeout.
	Policy     *policy.Policy
	Approver   policy.Approver
	AskTimeout time.Duration

	// Actor is recorded with every step that names none: each step Run's
	// agent takes (trace.ActorAgent, trace.ActorScript, …) and a
	// controller's Act without one. It is set by the caller: the core does
	// not pick behaviour by an agent's name (default: agent).
	Actor string

	// Keep, when set, makes Run keep the sandbox at the run's end: it is
	// reset in place (as Relaunch does) and handed to Keep, to be the
	// next episode's Prepared (eval --reset relaunch); a sandbox that
	// cannot be reset is removed and Keep not called.
	Keep func(*Prepared)

	// Prepared, when set, is an environment created ahead (a warm pool's):
	// Open takes it over instead of creating one with Backend, and only
	// launches the app. It must match Env (image, screen, limits).
	Prepared *Prepared
	// NotLaunchedAhead, when set, says why a pool that launches apps
	// ahead did not hand this episode a sandbox with its app running
	// (recorded in run.json's launched_ahead; the episode launches it).
	NotLaunchedAhead string

	// ForkedFrom, when set, names the episode this one is forked from
	// (recorded in run.json): the caller replays the parent's steps into
	// it (agentbox serve's fork).
	ForkedFrom *trace.ForkOrigin

	// Inputs, when set, are the task's files, staged below the sandbox's
	// home before the app starts (app.LoadInputs checked them before
	// anything was created; the caller closes them). Collect says what is
	// copied out into the trace's files/ when the episode ends, whatever
	// its outcome, before the sandbox is torn down (docs/tasks.md).
	Inputs  *app.Inputs
	Collect app.Collect

	// ResumedFrom, for a resume (agentbox resume), is the crashed run it
	// continues; recorded in run.json.
	ResumedFrom *trace.ResumedFrom

	// Grader, when set, judges the episode's collected files after the
	// sandbox is torn down and before the trace is finalised (run.json's
	// grade; docs/tasks.md). It runs on the host; nothing of it reaches
	// the agent or the sandbox.
	Grader Grader
	// Vault, when set, holds the secrets type_secret actions type. Their
	// values are replaced with [secret:NAME] in everything the app
	// produces (output, window titles, the accessibility tree, results)
	// before it is recorded, told to the Listener or given to the agent;
	// the screen's pixels are not masked (SECURITY.md).
	Vault *vault.Vault

	// Listener, when set, is told every event as it happens: the app's
	// output, windows and exit, each step and result, the end. It is
	// called from the environment's and the controller's goroutines and
	// must not block (an EventLog's Add does not).
	Listener func(Event)

	TraceDir string
	LogCap   int64 // per stream; default trace.DefaultLogCap
	// Indexer, when set, is told what the trace writer wrote as it is
	// written (the store's live index; trace.Options.Indexer).
	Indexer trace.Indexer
	// Progress receives human-readable lines; nil discards.
	Progress io.Writer
	Verbose  bool
}

// The defaults of Config: also those of the CLI's flags that set them
// (run's and eval's --max-steps, --timeout, --start-timeout).
const (
	DefaultMaxSteps        = 100
	DefaultTimeout         = 5 * time.Minute
	DefaultStartTimeout    = 60 * time.Second
	DefaultTeardownTimeout = 30 * time.Second
)

// DefaultMaxRate is the bound on actions per second that agentbox's
// commands and its server give an episode unless told otherwise (a
// Config's zero MaxRate means no bound).
const DefaultMaxRate float64 = 1000

func (c *Config) defaults() {
	if c.MaxSteps <= 0 {
		c.MaxSteps = DefaultMaxSteps
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.TeardownTimeout <= 0 {
		c.TeardownTimeout = DefaultTeardownTimeout
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
	// An app that draws without OpenGL starts its X server without GLX.
	c.Env.NoGLX = c.Env.NoGLX || c.App.Manifest.NoGLX()
	if c.Actor == "" {
		c.Actor = trace.ActorAgent
	}
	c.Clock = c.Clock.withDefaults()
	if c.Clock.Virtual {
		if c.Settle.Mode == "" || c.Settle.Mode == SettleNone {
			c.Settle = Settle{Mode: SettleStable, Duration: DefaultStable}
		}
		if c.FirstSettle.Mode == "" || c.FirstSettle.Mode == SettleNone {
			c.FirstSettle = Settle{Mode: SettleStable, Duration: DefaultStable}
		}
	}
}

// Grader judges an episode's collected files (package grade implements
// it). filesDir is the trace's files directory (it may be empty or
// missing: nothing was collected); traceDir the trace. It must not fail:
// a grader that cannot judge says so with the outcome infrastructure.
type Grader interface {
	Grade(ctx context.Context, filesDir, traceDir string) trace.Grade
}

// EnvConfig is the sandbox configuration Open creates (or expects of a
// Prepared environment) for c: its Env with the defaults Open applies (the
// screen, the run ID, the accessibility bus the app's manifest, Tree or
// Marks ask for). A warm pool keys its sandboxes by it.
func EnvConfig(c Config) environment.Config {
	if c.App == nil {
		c.App = &app.Bundle{}
	}
	c.defaults()
	return c.Env
}

// Prepared is an environment handed to Open already created: its sandbox,
// display and window manager are up and no app has been launched. Its
// environment.Config.Events must have been Events, so that the session
// taking it over receives the app's events. Open owns it from then on,
// also when Open fails.
type Prepared struct {
	Env    environment.Environment
	Events *Relay
	// Created is how long creating it took (recorded as the create timing
	// of the pool, create_ahead; the run's own create is the hand-over).
	Created time.Duration
	// Launched, when set, is the app launched ahead in Env (a pool's
	// --pool-launch), its events held by Events (Relay.Hold): Open
	// launches nothing, and the episode's first observation is its first
	// look at the running app. Open refuses it for a config that would
	// launch otherwise (SameLaunch).
	Launched *Launched
	// Release, when set, ends Env at the episode's end in place of its
	// Close (a warm pool's: pool.Pool.release). It may stop the app and
	// leave the removal to its owner for later, and reports whether it
	// did (the trace's teardown_deferred); it removes the sandbox before
	// it returns otherwise. Either way the session is done with Env.
	Release func(ctx context.Context, env environment.Environment) (deferred bool, err error)
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
	AppExit  *observe.Exit
	// Files are the task's collected files (below the trace's files/),
	// FilesRefused what collection left out; Grade the grader's verdict
	// (docs/tasks.md). Empty without collect or a grader.
	Files        []trace.FileInfo
	FilesRefused []trace.RefusedFile
	Grade        *trace.Grade
}

// ExitCode is the process exit code for the outcome.
func (r Result) ExitCode() int { return r.Outcome.ExitCode() }

// End is how an episode ends: an outcome, the reason that refines it and
// a message for people.
type End struct {
	Outcome trace.Outcome `json:"outcome"`
	Reason  string        `json:"reason"`
	Message string        `json:"message"`
}

func (e *End) String() string { return fmt.Sprintf("%s (%s): %s", e.Outcome, e.Reason, e.Message) }

// Terminated reports whether the episode ended of itself — the controller
// finished (done), a check failed, the app exited — rather than being cut
// short (steps, deadline, a signal, a close) or failing: gymnasium's
// terminated, as against truncated.
func (e *End) Terminated() bool {
	switch e.Reason {
	case trace.ReasonDone, trace.ReasonGaveUp, trace.ReasonCheckFailed, trace.ReasonDiverged, trace.ReasonAppExited:
		return true
	}
	return false
}

// ending is the loop's name for End.
type ending = End

// Loop is what Run adds to an episode: who decides its steps and how
// they are watched.
type Loop struct {
	// Agent decides each step. Without one the run is a person's
	// (agentbox run --agent human): the person has control from the start
	// (TakeOver is done, HandBack refused) and drives the app with steps of
	// the actor human, from the live page; the run ends with their done,
	// the app's exit, the deadline or an interrupt.
	Agent agent.Agent
	// FreezeWhileThinking freezes the app's processes while the agent
	// decides (when the backend can), so a game does not run on while a
	// model thinks; the frozen time is recorded apart (run.json's
	// settings record it).
	FreezeWhileThinking bool
	// Opened, when set, is given the session once Open has succeeded,
	// before the loop starts: a live page takes it to watch the run and to
	// let a person take control.
	Opened func(*Session)
}

// Run performs one run: Open, the agent loop over the session, Close. The
// returned error is non-nil only when no trace could be written at all;
// every other failure is an outcome in Result.
func Run(ctx context.Context, cfg Config, loop Loop) (Result, error) {
	s, err := open(ctx, cfg, loop)
	var se *StartError
	switch {
	case errors.As(err, &se):
		return se.Result, nil
	case err != nil:
		return Result{}, err
	}
	if loop.Agent == nil {
		s.personHasControl()
	}
	if loop.Opened != nil {
		loop.Opened(s)
	}
	end := s.agentLoop(ctx)
	if cfg.Keep != nil {
		// The sandbox is reset in place for the next episode (relaunch).
		s.relaunching.Store(true)
		r := s.close(ctx, end)
		if s.kept != nil {
			cfg.Keep(s.kept)
		}
		return r, nil
	}
	return s.close(ctx, end), nil
}

func limitsMap(l environment.Resources) map[string]any {
	return map[string]any{"cpus": l.CPUs, "memory_mb": l.MemoryMB, "pids": l.PIDs, "tmpfs_mb": l.TmpfsMB, "shm_mb": l.ShmMB}
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
