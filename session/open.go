package session

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/lockrank"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// Session is one environment with its app and its trace, ready to be
// driven step by step. Observe and Act may be called from any goroutine;
// they take turns (one step at a time, in the order they get the turn).
// Close may be called at any time, also while a step runs: it aborts the
// step and ends the episode.
//
// A life, as a controller sees it:
//
//	s, err := session.Open(ctx, cfg)        // trace, sandbox, app up and ready
//	if err != nil { … }                     // a *StartError carries the recorded Result
//	obs, err := s.Observe(ctx)              // the next step's observation
//	res, err := s.Act(ctx, session.Step{Actor: trace.ActorRemote, Action: a})
//	// … until obs.Ended or res.Ended, or the controller stops
//	result := s.Close(ctx, session.End{…})  // teardown, trace finalised
type Session struct {
	cfg     Config
	loop    Loop // Run's; zero for Open's callers
	started time.Time
	tw      *trace.Writer
	events  *sink

	tmu     lockrank.Mutex[timingsLock] // guards timings
	timings map[string]float64

	// closing is the End Close was called with, once it was; a step that
	// fails because Close tore the environment down ends with it.
	cmu     lockrank.Mutex[closingLock]
	closing *End
	closed  chan struct{} // closed when Close has finished
	result  Result        // set before closed is closed

	emu lockrank.Mutex[envLock]
	env environment.Environment // nil once torn down
	// relay passes the sandbox's events to this session (a relaunch
	// hands it on with the sandbox); relaunching is set by Relaunch, and
	// kept, keptErr are what its reset in place gave (relaunch.go).
	relay       *Relay
	relaunching atomic.Bool
	kept        *Prepared
	keptErr     error
	// keptReady, set by RelaunchBehind, is closed once the reset in place
	// is done (kept or keptErr set), before the rest of the close.
	keptReady chan struct{}

	// ctl is who drives (control.go); seen the screen of the controller's
	// last look (what a person's takeover is compared with).
	ctl  control
	seen atomic.Pointer[observe.Frame]
	// stop is closed when the episode ends or Close begins (endSeen then
	// says how, when it is known): whoever waits for control wakes.
	stop     chan struct{}
	stopOnce sync.Once
	endSeen  atomic.Pointer[End]

	// inFlight counts the controllers' calls (Observe, Act) in flight;
	// lastCall is when the last one ended (Unix ns): Activity.
	inFlight atomic.Int64
	lastCall atomic.Int64

	// fz guards freezing (--freeze-while-thinking) against watchers' looks
	// (Peek does not look at a frozen sandbox) and a person's takeover
	// (which thaws it); it guards the fields below.
	fz        lockrank.Mutex[freezeLock]
	frozenNow bool
	frozeAt   time.Time
	frozen    time.Duration // the app's time frozen while the agent decided

	// launchLook is the first screenshot, taken with the launch
	// (Config.LookAtLaunch), until the first look takes it; under the
	// step lock.
	launchLook *launchLook

	// The step lock; it guards everything below.
	mu        lockrank.Mutex[stepLock]
	readyAt   time.Time // the app became ready: the loop's time starts
	deadline  time.Time // readyAt + Timeout
	limits    action.Limits
	limiter   *rateLimiter
	freezer   environment.Freezer // nil unless the app is frozen while the agent decides
	clock     environment.Clocked // nil unless the app runs on a virtual clock (Config.Clock)
	clockNow  time.Time           // the app's virtual time
	steps     int                 // the last step recorded
	last      *action.Result      // the previous action's result, shown at the next observation
	viewReq   *action.Action      // the last screenshot action with options: the next observation's view
	treeReq   bool                // the controller asked for the tree (accessibility_tree): the next observation has it
	marks     []observe.Mark      // the marks of the pending observation, for an action on a mark
	appGone   bool                // one observation has shown the app gone
	pending   *trace.Record       // the observation of the next step, not yet recorded
	pendAt    time.Time           // when it was taken
	end       *End                // how the episode ended, once it has
	traceTime time.Duration       // the steps' time spent writing the trace
	pendFrame *observe.Frame      // the pending observation's screen (unmarked), for an ask's screenshot
	ahead     *lookAhead          // the observation taken with the loop's last action, for its next look
	gateSt    gateState           // the policy gate's asks and grants

	// paused is how far asks have moved the deadline on (ns): the time
	// they waited for an answer.
	paused atomic.Int64

	// The masker of screens handed out (mask.go); maskTree is the raw tree
	// the pending observation's paint read (the step's tree reuses it).
	maskHolder
	maskTree *observe.Tree
}

// StartError is Open's error when the episode ended before its first step
// (the sandbox or the app did not start, the start was interrupted): the
// trace is written and finalised, and Result says how it ended.
type StartError struct{ Result Result }

func (e *StartError) Error() string {
	return fmt.Sprintf("%s (%s): %s", e.Result.Outcome, e.Result.Reason, e.Result.Message)
}

// ErrEnded is wrapped by the errors of Observe and Act once the episode
// has ended; errors.As with *EndedError says how.
var ErrEnded = errors.New("the episode has ended")

// EndedError says a step was refused because the episode has ended.
type EndedError struct{ End End }

func (e *EndedError) Error() string { return "the episode has ended: " + e.End.String() }
func (e *EndedError) Unwrap() error { return ErrEnded }

// Open creates the trace and the sandbox (or takes over cfg.Prepared),
// launches the app and waits until it is ready (its window, its
// ready_output). Every failure after the trace exists is recorded: the
// sandbox is removed, the trace finalised, and the error is a *StartError
// with the Result. Any other error means no trace could be written.
func Open(ctx context.Context, cfg Config) (*Session, error) {
	return open(ctx, cfg, Loop{})
}

// open is Open for Run's loop too.
func open(ctx context.Context, cfg Config, loop Loop) (*Session, error) {
	if cfg.App == nil {
		closePrepared(ctx, cfg)
		return nil, errors.New("session: no app to run")
	}
	cfg.defaults()
	if err := cfg.Env.Screen.Validate(); err != nil {
		closePrepared(ctx, cfg)
		return nil, fmt.Errorf("session: screen %v: %w", cfg.Env.Screen, err)
	}
	s := &Session{cfg: cfg, loop: loop, started: time.Now(), closed: make(chan struct{}), stop: make(chan struct{})}
	tw, err := trace.Create(cfg.TraceDir, s.initialRecord(), trace.Options{LogCap: cfg.LogCap, Indexer: cfg.Indexer})
	if err != nil {
		closePrepared(ctx, cfg)
		return nil, err
	}
	s.tw = tw
	s.events = newSink(tw, s.started, cfg.App.Manifest.ReadyOutput)
	s.events.listen = cfg.Listener
	s.events.secrets = newRedaction(cfg.Vault)
	s.masker = newMasker(cfg.Policy, cfg.Vault)
	if note := s.maskNote(); note != "" {
		fmt.Fprintf(cfg.Progress, "agentbox: %s\n", note)
	}
	// The sandbox's events reach the session through a Relay, so that a
	// relaunch can hand the sandbox to the next episode's session.
	s.relay = NewRelay()
	s.relay.attach(s.events)
	s.cfg.Env.Events = s.relay

	if end := s.start(ctx); end != nil {
		return nil, &StartError{Result: s.close(ctx, end)}
	}
	return s, nil
}

// closePrepared closes a prepared environment Open will not use.
func closePrepared(ctx context.Context, cfg Config) {
	if cfg.Prepared == nil || cfg.Prepared.Env == nil {
		return
	}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = cfg.Prepared.Env.Close(tctx)
}

func (s *Session) timing(name string, d time.Duration) {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	if s.timings == nil {
		s.timings = map[string]float64{}
	}
	s.timings[name] = float64(d.Microseconds()) / 1000
}

// tell passes an event of the controller's side to the listener.
func (s *Session) tell(e Event) { s.events.tell(e) }

func (s *Session) initialRecord() trace.Run {
	b := s.cfg.App
	backend := ""
	if s.cfg.Backend != nil {
		backend = s.cfg.Backend.Name()
	}
	if s.cfg.Prepared != nil && s.cfg.Prepared.Env != nil {
		backend = s.cfg.Prepared.Env.Info().Backend
	}
	return trace.Run{
		ID:         s.cfg.RunID,
		Agentbox:   versionString(),
		Task:       s.cfg.Task,
		ForkedFrom: s.cfg.ForkedFrom,
		Agent:      s.cfg.AgentInfo,
		App: trace.AppInfo{
			Target: b.Target, TargetPath: b.Path, Command: b.Manifest.Command, Args: b.Manifest.Args,
			InImage: b.InImage, WindowTitle: b.Manifest.WindowTitle,
			Files: len(b.Files), Bytes: b.TotalBytes, EnvKeys: sortedKeys(b.Manifest.Env),
		},
		Env: trace.EnvInfo{
			Backend: backend,
			Image:   s.cfg.Env.Image,
			Runtime: s.cfg.Env.Runtime,
			Sandbox: s.cfg.Env.Name,
			Screen:  s.cfg.Env.Screen,
			Limits:  limitsMap(s.cfg.Env.Resources.WithDefaults()),
		},
		Settings: &trace.Settings{
			Settle:              s.cfg.Settle.String(),
			MaxSteps:            s.cfg.MaxSteps,
			TimeoutMS:           msOf(s.cfg.Timeout),
			ReadyTimeoutMS:      msOf(s.cfg.ReadyTimeout),
			LogCap:              s.cfg.LogCap,
			NoWM:                s.cfg.Env.NoWM,
			NoGLX:               s.cfg.Env.NoGLX,
			FreezeWhileThinking: s.loop.FreezeWhileThinking,
			MaxRate:             &s.cfg.MaxRate,
			A11y:                s.cfg.Env.A11y,
			Tree:                s.cfg.Tree,
			Marks:               s.cfg.Marks,
			Observe:             s.cfg.Env.Observe,
			Clock:               s.cfg.Clock.settings(),
		},
		Network:     networkInfo(s.cfg.Env.Network),
		Started:     s.started,
		ResumedFrom: s.cfg.ResumedFrom,
	}
}

// start brings the sandbox and the app up; nil means ready.
func (s *Session) start(ctx context.Context) (end *ending) {
	defer func() {
		// A panic here still tears down (Open's close does) and is
		// recorded as an error with its stack.
		if p := recover(); p != nil {
			end = s.panicked(p)
		}
	}()
	cfg := s.cfg
	startCtx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()

	t0 := time.Now()
	env, err := s.create(startCtx)
	if err != nil {
		return s.startFailure(ctx, "create the sandbox", err)
	}
	s.emu.Lock()
	s.env = env
	s.emu.Unlock()
	s.timing("create", time.Since(t0))
	info := env.Info()
	_ = s.tw.Update(func(run *trace.Run) {
		run.Env.ID, run.Env.ImageID, run.Env.Display = info.ID, info.ImageID, info.Display
		run.Env.WM, run.Env.SHM, run.Env.Damage, run.Env.Timings = info.WM, info.SHM, info.Damage, info.Timings
		run.Env.Extra = info.Extra
		if info.Image != "" {
			run.Env.Image = info.Image
		}
	})

	t1 := time.Now()
	var lr environment.LaunchResult
	if la := s.launchedAhead(); la != nil {
		// The app runs already (a pool's --pool-launch): the hand-over
		// is the launch, and the first look the first observation.
		lr, err = s.takeLaunched(ctx, env, la)
		if cfg.Inputs != nil && lr.Inputs != nil {
			_ = s.tw.Update(func(run *trace.Run) { run.Inputs = inputInfos(cfg.Inputs, lr.Inputs) })
		}
		if err != nil {
			return s.startFailure(ctx, "take over the app launched ahead", err)
		}
	} else {
		if cfg.NotLaunchedAhead != "" {
			_ = s.tw.Update(func(run *trace.Run) {
				run.App.LaunchedAhead = &trace.LaunchedAhead{Reason: cfg.NotLaunchedAhead}
			})
		}
		spec := environment.LaunchSpec{App: cfg.App, ReadyTimeout: cfg.ReadyTimeout, LogCap: cfg.LogCap, Inputs: cfg.Inputs}
		spec.Observe = s.looksAtLaunch()
		if cfg.Clock.Virtual {
			clocked, ok := env.(environment.Clocked)
			if !ok {
				return s.startFailure(ctx, "launch the app", fmt.Errorf("%w: the %s backend's environments have no virtual clock", environment.ErrAppStart, env.Info().Backend))
			}
			s.clock, s.clockNow = clocked, cfg.Clock.Start
			spec.Clock = cfg.Clock.Start
		}
		lr, err = env.Launch(startCtx, spec)
		if cfg.Inputs != nil && lr.Inputs != nil {
			_ = s.tw.Update(func(run *trace.Run) { run.Inputs = inputInfos(cfg.Inputs, lr.Inputs) })
		}
		if err != nil {
			return s.startFailure(ctx, "launch the app", err)
		}
		s.timing("launch", time.Since(t1))
		s.timing("app_ready", lr.Ready)
	}
	s.keepLaunchLook(lr)
	_ = s.tw.Update(func(run *trace.Run) {
		run.App.PID = lr.PID
		run.App.FileHashes, run.App.Digest = lr.Files, appDigest(lr.Files)
		run.Env.Timings = env.Info().Timings
	})
	if lr.Window != nil {
		fmt.Fprintf(cfg.Progress, "agentbox: app window %q is up after %v\n", lr.Window.Title, lr.Ready.Round(time.Millisecond))
	}
	if text := cfg.App.Manifest.ReadyOutput; text != "" {
		t2 := time.Now()
		if end := s.waitReadyOutput(ctx, startCtx, t1, text); end != nil {
			return end
		}
		waited := time.Since(t2)
		s.timing("ready_output", waited)
		s.timing("app_ready", lr.Ready+waited)
		fmt.Fprintf(cfg.Progress, "agentbox: the app printed %q after %v\n", text, (lr.Ready + waited).Round(time.Millisecond))
	}

	screen := cfg.Env.Screen
	s.readyAt = time.Now()
	s.deadline = s.readyAt.Add(cfg.Timeout)
	s.limits = action.DefaultLimits(screen.Width, screen.Height)
	s.limiter = newRateLimiter(cfg.MaxRate)
	if s.loop.FreezeWhileThinking || cfg.Policy != nil {
		s.freezer, _ = env.(environment.Freezer)
	}
	return nil
}

// create makes the sandbox, or takes over the prepared one.
func (s *Session) create(ctx context.Context) (environment.Environment, error) {
	p := s.cfg.Prepared
	if p == nil {
		if s.cfg.Backend == nil {
			return nil, errors.New("no backend and no prepared environment")
		}
		cfg := s.cfg.Env
		if a := s.cfg.App; a != nil && !a.InImage {
			// The app's files go into the sandbox while its display
			// comes up; the launch then sends nothing.
			cfg.Stage = a
		}
		return s.cfg.Backend.Create(ctx, cfg)
	}
	if p.Env == nil || p.Events == nil {
		if p.Env != nil {
			s.emu.Lock()
			s.env = p.Env // closed by the teardown
			s.emu.Unlock()
		}
		return nil, errors.New("a prepared environment needs its Env and the Relay it was created with")
	}
	p.Events.handOver(s.events) // what it held (an app launched ahead: its output) first
	s.relay = p.Events
	if p.Created > 0 {
		s.timing("create_ahead", p.Created)
	}
	return p.Env, nil
}

// launchedAhead is the app launched ahead in the prepared environment;
// nil when the episode launches it.
func (s *Session) launchedAhead() *Launched {
	if p := s.cfg.Prepared; p != nil {
		return p.Launched
	}
	return nil
}

// takeLaunched takes over the app launched ahead: it must have been
// launched as this episode would launch it, and still run (its exit,
// held while the sandbox was idle, has reached the sink by now).
func (s *Session) takeLaunched(ctx context.Context, env environment.Environment, la *Launched) (environment.LaunchResult, error) {
	own, err := LaunchAheadSpec(s.cfg)
	if err != nil {
		return la.Result, err
	}
	if why := LaunchMismatch(la.Spec, own); why != "" {
		return la.Result, fmt.Errorf("%w: it was launched for another episode: %s", ErrNoLaunchAhead, why)
	}
	var held, release time.Duration
	if !la.Held.IsZero() {
		// Stopped while its sandbox waited: let it go before the first
		// look. A release that fails leaves a stopped app: the episode
		// cannot run.
		h, ok := env.(environment.AppHolder)
		if !ok {
			return la.Result, fmt.Errorf("%w: the app launched ahead was held, and the environment cannot let it go", ErrNoLaunchAhead)
		}
		t := time.Now()
		held = t.Sub(la.Held)
		if _, err := h.HoldApp(ctx, false); err != nil {
			return la.Result, fmt.Errorf("let the app launched ahead go: %w", err)
		}
		release = time.Since(t)
	}
	readyAt := la.Started.Add(la.Took)
	idle := max(time.Since(readyAt), 0)
	_ = s.tw.Update(func(run *trace.Run) {
		run.App.LaunchedAhead = &trace.LaunchedAhead{Launched: true, Started: la.Started,
			ReadyMS: float64(la.Took.Microseconds()) / 1000, IdleMS: float64(idle.Microseconds()) / 1000,
			HeldMS: float64(held.Microseconds()) / 1000}
	})
	s.timing("launch_ahead", la.Took)
	s.timing("app_idle", idle)
	if !la.Held.IsZero() {
		s.timing("app_held", held)
		s.timing("app_release", release)
	}
	if e := s.events.exit(); e != nil {
		return la.Result, fmt.Errorf("%w: the app launched ahead ended while its sandbox waited (%s)", environment.ErrAppExited, e)
	}
	lr := la.Result
	lr.Frame, lr.State = nil, nil // a look from the launch is stale by now
	fmt.Fprintf(s.cfg.Progress, "agentbox: the app was launched ahead, %v before the episode\n", time.Since(la.Started).Round(time.Millisecond))
	return lr, nil
}

// waitReadyOutput waits, until launchStart+ReadyTimeout, for the app to
// print the manifest's ready_output.
func (s *Session) waitReadyOutput(ctx, startCtx context.Context, launchStart time.Time, text string) *ending {
	wctx, cancel := context.WithDeadline(startCtx, launchStart.Add(s.cfg.ReadyTimeout))
	defer cancel()
	err := s.events.waitReady(wctx)
	if err == nil {
		return nil
	}
	if e := interrupted(ctx); e != nil {
		return e
	}
	var nr *errNotReady
	switch {
	case errors.As(err, &nr):
		return &ending{trace.Error, trace.ReasonAppStart, fmt.Sprintf("%v before printing a line containing %q (ready_output)%s", err, text, s.events.tail(5))}
	case startCtx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return &ending{trace.Error, trace.ReasonAppStart, fmt.Sprintf("the app did not print a line containing %q (ready_output) within %v%s", text, s.cfg.ReadyTimeout, s.events.tail(5))}
	}
	return s.startFailure(ctx, "wait for the app's ready output", err)
}

// startFailure classifies an error before the first step.
func (s *Session) startFailure(ctx context.Context, what string, err error) *ending {
	if e := interrupted(ctx); e != nil {
		return e
	}
	msg := fmt.Sprintf("could not %s: %v", what, err)
	switch {
	case errors.Is(err, environment.ErrNoWindow):
		return &ending{trace.Error, trace.ReasonNoWindow, msg + s.events.tail(5)}
	case errors.Is(err, environment.ErrAppStart), errors.Is(err, environment.ErrAppExited), errors.Is(err, app.ErrInvalid):
		return &ending{trace.Error, trace.ReasonAppStart, msg + s.events.tail(5)}
	case errors.Is(err, context.DeadlineExceeded):
		return &ending{trace.Error, trace.ReasonEnvironment, msg + fmt.Sprintf(" (start timeout %v)", s.cfg.StartTimeout)}
	}
	return &ending{trace.Error, trace.ReasonEnvironment, msg}
}

// panicked records a panic of agentbox's own code (or an agent's) as the
// episode's error, with its stack on the progress writer.
func (s *Session) panicked(p any) *ending {
	fmt.Fprintf(s.cfg.Progress, "agentbox: panic: %s\n%s", termsafe.Line(fmt.Sprint(p)), debug.Stack())
	return &ending{trace.Error, trace.ReasonEnvironment, fmt.Sprintf("agentbox panicked: %v", p)}
}

func interrupted(ctx context.Context) *ending {
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrInterrupted) {
		return &ending{trace.Interrupted, trace.ReasonSignal, "interrupted by a signal"}
	}
	return nil
}

// Close ends the episode (unless it has ended already: then how it ended
// stands, and end is ignored), aborting a step that is running, records
// the observation nobody acted on as the last one, tears the environment
// down and finalises the trace. It returns how the episode ended. Close
// is safe to call more than once and concurrently: every call returns the
// first one's Result once it has finished.
func (s *Session) Close(ctx context.Context, end End) Result {
	return s.closeWith(ctx, &end, true)
}

// close is Close for the agent loop: the loop's ending, and no last
// record of an observation nobody acted on (the loop records those
// itself where it should).
func (s *Session) close(ctx context.Context, end *ending) Result {
	return s.closeWith(ctx, end, false)
}

// closingEnd is the End Close was called with, once it was.
func (s *Session) closingEnd() *End {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	return s.closing
}

// Done is closed once the session is closed and its trace finalised.
func (s *Session) Done() <-chan struct{} { return s.closed }

func (s *Session) closeWith(ctx context.Context, end *End, finalPending bool) Result {
	s.cmu.Lock()
	if s.closing != nil { // closing or closed already
		s.cmu.Unlock()
		<-s.closed
		return s.result
	}
	s.closing = end
	s.cmu.Unlock()
	defer close(s.closed)
	closeStart := time.Now()
	s.markStopped(nil) // whoever waits for control wakes, and meets the end

	// Abort a step in flight: the teardown makes its environment call
	// fail, and the step ends with the closing End. The agent (an agent
	// program) stops meanwhile, inside the run's time.
	waitAgent := s.closeAgent()
	collectFailed := s.collect(ctx) // before_collect and the task's files, before the teardown
	if s.relaunching.Load() {
		s.resetInPlace(ctx) // Relaunch: the sandbox is kept for the next episode
	} else {
		s.teardown(ctx)
	}
	s.cmu.Lock()
	ready := s.keptReady
	s.cmu.Unlock()
	if ready != nil {
		close(ready) // RelaunchBehind: the next episode may take the sandbox
	}
	waitAgent()
	// The observation nobody acted on is recorded before the grader runs,
	// so that what it saw (the observer's activity among it) is graded too:
	// a session closed from outside (serve's DELETE, a lease, a shutdown)
	// is graded on everything its trace will hold.
	if finalPending {
		s.mu.Lock()
		if s.end == nil && s.pending != nil {
			s.final(s.pending)
			s.pending = nil
		}
		s.mu.Unlock()
	}
	grade := s.grade(ctx)

	s.mu.Lock()
	if collectFailed != nil {
		// A before_collect check that did not hold: a success becomes its
		// failure; any other ending stands, and says it too.
		base := s.end
		if base == nil {
			base = end
		}
		failed := collectFailed
		if base.Outcome != trace.Success {
			failed = &End{Outcome: base.Outcome, Reason: base.Reason, Message: base.Message + "; and " + collectFailed.Message}
		}
		if s.end == nil {
			end = failed
		} else {
			s.end = failed
		}
	}
	if s.end == nil {
		s.end = end
		s.tell(Event{Kind: EventEnd, End: end})
	}
	e := *s.end
	s.endSeen.Store(&e)
	s.pending = nil
	final := *s.end
	steps := s.steps
	s.fz.Lock()
	frozen := s.frozen
	s.fz.Unlock()
	if !s.readyAt.IsZero() {
		loop := closeStart.Sub(s.readyAt)
		s.timing("loop", loop)
		s.timing("trace_write", s.traceTime)
		if frozen > 0 {
			s.timing("frozen", frozen)
			s.timing("app_running", loop-frozen)
		}
	}
	s.mu.Unlock()

	res := Result{Outcome: final.Outcome, Reason: final.Reason, Message: final.Message, TraceDir: s.cfg.TraceDir, Steps: steps}
	res.AppExit = s.events.exit()
	res.Files, res.FilesRefused = s.collected()
	res.Grade = grade
	// The timings are copied before Finish: its function runs under the
	// trace writer's lock, which comes after s.tmu (lockorder.go).
	s.tmu.Lock()
	timings := maps.Clone(s.timings)
	s.tmu.Unlock()
	tf := time.Now()
	var finishing time.Duration
	ferr := s.tw.Finish(func(run *trace.Run) {
		finishing = time.Since(tf) // waits for queued screenshots
		run.Outcome, run.Reason, run.Message = final.Outcome, final.Reason, final.Message
		run.AppExit = res.AppExit
		run.Ended = time.Now()
		if run.Timings == nil {
			run.Timings = map[string]float64{}
		}
		maps.Copy(run.Timings, timings)
		if grade != nil {
			run.Grade = grade
		}
		run.Timings["trace_finish"] = float64(finishing.Microseconds()) / 1000
	})
	s.timing("trace_finish", finishing)
	res.Duration = time.Since(s.started)
	if ferr != nil {
		fmt.Fprintf(s.cfg.Progress, "agentbox: trace: %s\n", termsafe.Text(ferr.Error()))
	}
	s.result = res
	return res
}

// environment is the session's environment, nil once torn down.
func (s *Session) environment() environment.Environment {
	s.emu.Lock()
	defer s.emu.Unlock()
	return s.env
}

// teardown removes the environment (once), under its own deadline.
func (s *Session) teardown(ctx context.Context) {
	s.emu.Lock()
	env := s.env
	s.env = nil
	s.emu.Unlock()
	if env == nil {
		return
	}
	s.events.teardown() // the app's exit from here on is agentbox's doing
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.TeardownTimeout)
	defer cancel()
	t := time.Now()
	var deferred bool
	var err error
	if rel := s.release(); rel != nil {
		deferred, err = rel(tctx, env)
	} else {
		err = env.Close(tctx)
	}
	if err != nil {
		fmt.Fprintf(s.cfg.Progress, "agentbox: teardown: %s\n", termsafe.Text(err.Error()))
		s.tw.Record(trace.Record{Type: trace.TypeEvent, Event: "teardown_error", Data: map[string]any{"error": err.Error()}})
	}
	if deferred {
		s.tw.Record(trace.Record{Type: trace.TypeEvent, Event: "teardown_deferred", Data: map[string]any{
			"why": "the app was stopped; the warm pool removes the sandbox once its loop of resets pauses"}})
	}
	s.timing("teardown", time.Since(t))
}

// release is how the sandbox ends when it came prepared with its own
// way (a warm pool's), else nil: Close it.
func (s *Session) release() func(context.Context, environment.Environment) (bool, error) {
	if p := s.cfg.Prepared; p != nil {
		return p.Release
	}
	return nil
}

// closeAgent starts closing the agent, so that an agent program stops
// while the sandbox is torn down and within the run's time; the function
// it returns waits for that and records it (timing agent_close).
func (s *Session) closeAgent() (wait func()) {
	c, ok := s.loop.Agent.(agent.Closer)
	if !ok {
		return func() {}
	}
	done := make(chan time.Duration, 1)
	go func() {
		t := time.Now()
		if err := c.Close(); err != nil {
			fmt.Fprintf(s.cfg.Progress, "agentbox: closing the agent: %s\n", termsafe.Text(err.Error()))
		}
		done <- time.Since(t)
	}()
	return func() { s.timing("agent_close", <-done) }
}
