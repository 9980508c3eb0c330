package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// Observation is what Observe returns: the controller's observation of
// the next step, and whether the episode ended at this look.
type Observation struct {
	*observe.Observation
	// Screenshot is the screenshot's path in the trace (relative to it).
	Screenshot string
	// Ended is set when the episode ended at this look: the steps are used
	// up (this observation is recorded as the last one) or the app was
	// still gone at a second look. Nothing can be done any more.
	Ended *End
}

// Step is one action a controller chose.
type Step struct {
	// Actor says who chose it (trace.ActorRemote, …); default the
	// session's Config.Actor.
	Actor  string
	Action action.Action
	// Decision is how it was chosen, recorded with the step; nil records
	// the time since the step's observation was taken as its latency.
	Decision *trace.Decision
	// Files are written into the trace beside the step (listed in the
	// recorded Decision.Files).
	Files map[string][]byte
	// Reason, for an unsuccessful done, is the episode's reason
	// (agent.ReasonCheckFailed, agent.ReasonDiverged); empty: gave up.
	Reason string
}

// StepResult is what Act did.
type StepResult struct {
	// Step is the step's number in the trace.
	Step int
	// Result is the action's result. An action that failed validation is
	// not run: Result says why (OK false) and Invalid is set.
	Result  action.Result
	Invalid bool
	// Ended is set when this step ended the episode: a done, or an action
	// after the app was seen gone.
	Ended *End
	// Final is the last observation, taken after a done.
	Final *Observation
	// NotApplied says the action was not performed: a person took control
	// (TakeOver) before it ran, and the call waited until they handed it
	// back. Nothing was recorded as a step (an action_not_applied event
	// was); Result says so, and the next observation says what the person
	// did (Intervention).
	NotApplied bool
	// Denied says the policy gate refused the action (Result names the
	// rule): it was recorded as a step and not performed.
	Denied bool
}

// Observe lets the screen settle (Config.Settle; FirstSettle at the first
// step), takes a screenshot with the desktop's state and the app's output
// since the last look, and keeps it as the observation of the next step.
// Observing again before acting replaces it. An error means the
// observation could not be made: the episode has ended (errors.Is
// ErrEnded; *EndedError says how).
func (s *Session) Observe(ctx context.Context) (*Observation, error) {
	return s.observe1(ctx, false)
}

// observe1 is Observe; ahead takes the observation made with the last
// action when there is one (the agent's loop, which looks right after
// it acted).
func (s *Session) observe1(ctx context.Context, ahead bool) (*Observation, error) {
	defer s.busy()()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.end != nil {
		return nil, &EndedError{*s.end}
	}
	if s.relaunchDecided() {
		return nil, ErrRelaunching
	}
	lctx, cancel := context.WithDeadline(ctx, s.deadlineNow())
	defer cancel()
	obs, end := s.look(lctx, ctx, false, ahead)
	if end != nil {
		s.setEnd(end)
		if obs == nil {
			return nil, &EndedError{*end}
		}
		return &Observation{Observation: obs, Screenshot: obs.ScreenshotRef, Ended: end}, nil
	}
	return &Observation{Observation: obs, Screenshot: obs.ScreenshotRef}, nil
}

// Act performs one step: it takes the step's observation if none is
// pending, validates the action against the screen, records the step
// (observation, decision, action, actor) before anything runs, waits for
// the rate limit, performs it and records its result — as the agent loop
// does. An invalid action is recorded and not run; a done ends the
// episode after a last look. An error means the episode has ended
// (errors.Is ErrEnded) or ended during the step (the environment failed,
// the deadline passed): *EndedError says how.
//
// While a person has control (TakeOver), an action of any other actor is
// not performed: Act waits until control is handed back and returns a
// result with NotApplied set; so is the first action after the hand-back
// when the controller has not looked since the takeover (it was decided
// on a screen the person has changed). A person's step (trace.ActorHuman) looks at
// the screen afresh and leaves the app's output for the controller's
// next observation (the person saw it as it came).
func (s *Session) Act(ctx context.Context, st Step) (StepResult, error) {
	return s.act1(ctx, st, false)
}

// act1 is Act; ahead says the caller looks right after it (the agent's
// loop): the action and that look are then one exchange with the
// sandbox where the environment can (environment.Stepper), and the
// observation waits in s.ahead for the look.
func (s *Session) act1(ctx context.Context, st Step, ahead bool) (StepResult, error) {
	defer s.busy()()
	if st.Actor == "" {
		st.Actor = s.cfg.Actor
	}
	human := st.Actor == trace.ActorHuman
	if !human && s.preempted() {
		return s.notApplied(ctx, st)
	}
	s.mu.Lock()
	if !human && s.preempted() { // taken over while this step waited for its turn
		s.mu.Unlock()
		return s.notApplied(ctx, st)
	}
	defer s.mu.Unlock()
	if s.end != nil {
		return StepResult{}, &EndedError{*s.end}
	}
	if s.relaunchDecided() {
		return StepResult{}, ErrRelaunching
	}
	lctx, cancel := context.WithDeadline(ctx, s.deadlineNow())
	defer cancel()
	if s.pending == nil || human && s.tookOverAfter(s.pendAt) {
		if _, end := s.look(lctx, ctx, human, false); end != nil {
			s.setEnd(end)
			return StepResult{Step: s.steps}, &EndedError{*end}
		}
	}
	rec, seen := s.pending, s.pendAt
	s.pending = nil
	if st.Decision == nil {
		// The controller's time between its observation and its action.
		st.Decision = &trace.Decision{LatencyMS: msOf(time.Since(seen))}
	}
	res, end := s.perform(lctx, ctx, rec.Step, rec, st, ahead)
	if end != nil {
		s.setEnd(end)
		if res == nil {
			return StepResult{Step: rec.Step}, &EndedError{*end}
		}
	}
	return *res, nil
}

// busy counts a controller's call (Observe, Act) in flight, waiting for
// its turn included, until the function it returns is called.
func (s *Session) busy() (done func()) {
	s.inFlight.Add(1)
	return func() {
		s.lastCall.Store(time.Now().UnixNano())
		s.inFlight.Add(-1)
	}
}

// Activity says whether a controller's call (Observe or Act) is in flight
// — a step that takes long (a wait of two minutes, a slow app), or one
// waiting for a person to hand control back — and when the last one
// ended (zero before any). A server's lease counts from the later of its
// last request and this, and never runs out while a call is in flight.
func (s *Session) Activity() (inFlight bool, lastEnded time.Time) {
	if n := s.lastCall.Load(); n != 0 {
		lastEnded = time.Unix(0, n)
	}
	return s.inFlight.Load() > 0, lastEnded
}

// Peek takes a screenshot with the desktop's state for someone who
// watches (a live page) rather than steps: nothing is recorded, the app's
// output is left for the next observation, and the episode's step is not
// taken. It does not wait for a step in flight (the sandbox answers it
// after that step's request, if one is running there); while the app is
// frozen for the agent's decision it returns ErrFrozen at once (the
// screen cannot change then, and a frozen sandbox does not answer).
func (s *Session) Peek(ctx context.Context) (*observe.Frame, environment.State, error) {
	if err := s.endedEarly(); err != nil {
		return nil, environment.State{}, err
	}
	s.fz.Lock()
	defer s.fz.Unlock()
	if s.frozenNow {
		return nil, environment.State{}, ErrFrozen
	}
	env := s.environment()
	if env == nil {
		return nil, environment.State{}, environment.ErrClosed
	}
	f, st, err := env.Observe(ctx)
	if err != nil {
		return nil, st, err
	}
	st.Windows = s.events.secrets.windows(st.Windows) // a watcher is told no value either
	f, _, _, err = s.paint(ctx, f, false)             // nor shown one
	return f, st, err
}

// WatchScreen subscribes to the screen's changes in the session's
// environment (environment.ScreenWatcher), for a watcher that looks with
// Peek: the channel receives when the screen may have changed since the
// last look, and is closed when the environment goes (a relaunch's new
// one is subscribed to again). It fails with environment.ErrNoScreenEvents
// where the environment cannot tell: poll instead.
func (s *Session) WatchScreen(ctx context.Context) (<-chan struct{}, func(), error) {
	if err := s.endedEarly(); err != nil {
		return nil, nil, err
	}
	env := s.environment()
	if env == nil {
		return nil, nil, environment.ErrClosed
	}
	w, ok := env.(environment.ScreenWatcher)
	if !ok {
		return nil, nil, environment.ErrNoScreenEvents
	}
	return w.WatchScreen(ctx)
}

// setEnd records how the episode ended (the first time) and tells the
// listener; s.mu is held.
func (s *Session) setEnd(end *End) {
	if s.end == nil {
		if c := s.closingEnd(); c != nil {
			end = c // the step failed because Close tore the environment down
		}
		s.end = end
		s.markStopped(end)
		s.tell(Event{Kind: EventEnd, End: end})
	}
}

// look lets the screen settle, observes, and makes the step's
// observation, pending until an action is recorded with it. It ends the
// episode when the app is still gone at a second look (the controller has
// seen it gone once) or the steps are used up. ctx carries the episode's
// deadline; parent is the caller's context. A person's look (human)
// leaves the app's output and network events for the controller's next
// observation and does not count as what the controller saw.
//
// With ahead, the look is the one taken with the last action, when there
// is one (s.ahead: the settle and the screenshot made in the same
// exchange, right after the action); any other look drops it.
func (s *Session) look(ctx, parent context.Context, human, ahead bool) (*observe.Observation, *ending) {
	step := s.steps + 1
	la := s.ahead
	s.ahead = nil
	if !ahead || human || la == nil || la.step != step || la.env != s.environment() {
		la = nil
	}
	how := s.cfg.Settle
	if step == 1 {
		how = s.cfg.FirstSettle
	}
	var (
		settled time.Duration
		capped  bool
		err     error
	)
	if la != nil {
		settled, capped = la.settled, la.capped
	} else if settled, capped, err = s.settle(ctx, how); err != nil {
		return nil, s.loopError(ctx, parent, "settle", err, trace.ReasonEnvironment)
	}
	obs, rec, err := s.observeWith(ctx, step, !human, la)
	if err != nil {
		return nil, s.loopError(ctx, parent, "observe", err, trace.ReasonEnvironment)
	}
	if !human {
		s.controllerLooked()
		s.seen.Store(obs.Screen)
		if iv := s.handedBackFor(obs.Screen); iv != nil {
			obs.Intervention, rec.Observation.Intervention = iv, iv
		}
	}
	rec.Observation.SettleMS, rec.Observation.SettleCapped = msOf(settled), capped
	s.pendFrame = obs.Screen
	if err := s.accessibility(ctx, step, obs, rec); err != nil {
		return nil, s.loopError(ctx, parent, "accessibility tree", err, trace.ReasonEnvironment)
	}
	if s.viewReq != nil {
		req := s.viewReq
		v, err := observe.NewView(obs.Screen, req.Region, req.Scale, req.MaxWidth, 0)
		if err == nil && (v.Scaled() || req.Region != nil) {
			obs.View = v
			rec.Observation.View = &trace.ViewInfo{Region: v.Region, Width: v.Frame.Width, Height: v.Frame.Height}
		}
		s.viewReq = nil
	}
	if step == 1 {
		s.timing("first_screenshot", time.Since(s.started))
	}
	obs.Task, obs.Last = s.cfg.Task, s.last
	obs.Secrets = s.cfg.Vault.Names()
	if obs.ScreenshotRef == "" { // marked: the agent's copy
		obs.ScreenshotRef = rec.Observation.Screenshot
	}
	if !obs.Running {
		if s.appGone {
			return nil, s.appExited()
		}
		s.appGone = true
	}
	if step > s.cfg.MaxSteps {
		s.final(rec)
		return obs, &ending{trace.Failure, trace.ReasonMaxSteps, fmt.Sprintf("the agent did not finish within %d steps", s.cfg.MaxSteps)}
	}
	s.pending = rec
	s.pendAt = time.Now()
	return obs, nil
}

// perform records the step and runs its action (the loop's validate →
// record → act). It returns the step's result, and how the episode ended
// when it did (with a nil result when the step has no result).
func (s *Session) perform(ctx, parent context.Context, step int, rec *trace.Record, st Step, ahead bool) (*StepResult, *ending) {
	a := st.Action
	verr := observe.ResolveMark(&a, s.marks) // recorded with the point it resolved to
	if verr == nil {
		verr = action.Validate(a, s.limits)
	}
	if verr == nil {
		verr = s.checkSecret(a)
	}
	st.Action = a
	if st.Actor == "" {
		st.Actor = s.cfg.Actor
	}
	// The policy gate, before the step is recorded (the trace has its
	// decision) and before anything runs.
	var pd *trace.PolicyDecision
	allowed := true
	if verr == nil {
		pd, allowed = s.gate(ctx, parent, step, rec, st)
		if pd != nil && pd.WaitMS > 0 {
			// The ask's wait does not count against the deadline.
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(parent, s.deadlineNow())
			defer cancel()
		}
	}
	rec.Policy = pd
	if end := s.recordStep(step, rec, st, verr); end != nil {
		return nil, end
	}
	if st.Actor == trace.ActorHuman {
		s.noteHuman(step, a)
	}
	switch {
	case verr != nil:
		res := s.rejected(step, verr)
		return &StepResult{Step: step, Result: *res, Invalid: true}, nil
	case !allowed:
		res := s.denied(step, pd)
		return &StepResult{Step: step, Result: *res, Denied: true}, nil
	case a.Kind == action.Done:
		return s.finish(ctx, step, a, st.Reason)
	case s.appGone:
		// The controller saw the app gone and did not finish: that ends it.
		return nil, s.appExited()
	}
	res, end := s.act(ctx, parent, step, a, ahead)
	if end != nil {
		return nil, end
	}
	return &StepResult{Step: step, Result: *res}, nil
}

// recordStep writes the step (observation, decision, action, actor,
// whether the action is invalid) to the trace: the step is on disk before
// its action runs.
func (s *Session) recordStep(step int, rec *trace.Record, st Step, verr error) *ending {
	if err := s.tw.Err(); err != nil {
		// A write failed (a full disk): what was written stays, the run
		// ends here.
		return &ending{trace.Error, trace.ReasonEnvironment, err.Error()}
	}
	a := st.Action
	rec.Action = &a
	rec.Actor = st.Actor
	if verr != nil {
		rec.Invalid = verr.Error()
	}
	if st.Decision != nil {
		d := *st.Decision
		rec.Decision = &d
		for name, data := range st.Files {
			p, err := s.tw.Attach(step, name, data)
			if err != nil {
				// The agent's record of its decision (a model's history,
				// what a resume rebuilds) could not be kept.
				return &ending{trace.Error, trace.ReasonEnvironment, fmt.Sprintf("trace: step %d's %s: %v", step, name, err)}
			}
			if rec.Decision.Files == nil {
				rec.Decision.Files = map[string]string{}
			}
			rec.Decision.Files[name] = p
		}
	}
	tw := time.Now()
	err := s.tw.Record(*rec)
	s.traceTime += time.Since(tw)
	if err != nil {
		return &ending{trace.Error, trace.ReasonEnvironment, err.Error()} // "trace: …"
	}
	s.steps = step
	s.tell(Event{Kind: EventStep, Step: step, Actor: st.Actor, Action: &a, Invalid: rec.Invalid})
	if s.cfg.Verbose {
		// The action and the message are the controller's (a model's
		// text): shown, never obeyed by the terminal.
		fmt.Fprintf(s.cfg.Progress, "step %d: %s", step, termsafe.Line(a.String()))
		if rec.Decision != nil && rec.Decision.Message != "" {
			fmt.Fprintf(s.cfg.Progress, " — %s", termsafe.Line(rec.Decision.Message))
		}
		fmt.Fprintln(s.cfg.Progress)
	}
	return nil
}

// rejected records that an action failed validation; the controller is
// told at its next observation (Last).
func (s *Session) rejected(step int, verr error) *action.Result {
	res := &action.Result{OK: false, Error: verr.Error()}
	s.tw.Record(trace.Record{Type: trace.TypeResult, Step: step, Result: res})
	s.tell(Event{Kind: EventResult, Step: step, Result: res})
	s.last = res
	if s.cfg.Verbose {
		fmt.Fprintf(s.cfg.Progress, "step %d: rejected: %s\n", step, termsafe.Line(verr.Error()))
	}
	return res
}

// finish ends the episode on a done action, after a last look.
func (s *Session) finish(ctx context.Context, step int, a action.Action, why string) (*StepResult, *ending) {
	res := action.Result{OK: true}
	s.tw.Record(trace.Record{Type: trace.TypeResult, Step: step, Result: &res})
	s.tell(Event{Kind: EventResult, Step: step, Result: &res})
	sr := &StepResult{Step: step, Result: res}
	if obs := s.finalObservation(ctx, step+1); obs != nil {
		sr.Final = &Observation{Observation: obs, Screenshot: obs.ScreenshotRef}
	}
	sr.Ended = doneEnding(a, why)
	if sr.Final != nil {
		sr.Final.Ended = sr.Ended
	}
	return sr, sr.Ended
}

// doneEnding is how a done action ends the episode.
func doneEnding(a action.Action, why string) *ending {
	msg := a.Message
	if a.Succeeded() {
		if msg == "" {
			msg = "the agent finished"
		}
		return &ending{trace.Success, trace.ReasonDone, msg}
	}
	if msg == "" {
		msg = "the agent gave up"
	}
	reason := trace.ReasonGaveUp
	switch why {
	case agent.ReasonCheckFailed:
		reason = trace.ReasonCheckFailed
	case agent.ReasonActionFailed:
		reason = trace.ReasonActionFailed
	case agent.ReasonDiverged:
		reason = trace.ReasonDiverged
	}
	return &ending{trace.Failure, reason, msg}
}

// act waits for the rate limit, performs the action and records its result.
//
// With ahead (the caller looks right after), an action the environment
// performs is performed with the next step's settle and screenshot in one
// exchange where the environment can (environment.Stepper) and the settle
// is done in the sandbox (none, or until stable): the look that follows
// takes them from s.ahead.
func (s *Session) act(ctx, parent context.Context, step int, a action.Action, ahead bool) (*action.Result, *ending) {
	throttled, err := s.limiter.wait(ctx)
	if err != nil {
		return nil, s.loopError(ctx, parent, a.String(), err, trace.ReasonEnvironment)
	}
	env := s.environment()
	if env == nil {
		return nil, s.loopError(ctx, parent, a.String(), environment.ErrClosed, trace.ReasonEnvironment)
	}
	t := time.Now()
	var res action.Result
	advance := s.clockAdvance(step, a)
	if a.Kind == action.Wait && a.Until == "" {
		// A plain wait is a timer: kept here rather than in the sandbox,
		// which answers one request at a time, so that a watcher's look
		// (Peek) is answered while it runs. A virtual clock moves by the
		// wait at its start.
		err = s.advanceClock(ctx, advance)
		if err == nil {
			err = s.sleep(ctx, env, time.Duration(a.MS)*time.Millisecond)
		}
		res = action.Result{OK: true, ElapsedUS: time.Since(t).Microseconds()}
	} else if typed, failed := s.unseal(a); failed != nil {
		res = *failed
	} else {
		var looked time.Duration // the look's share of the exchange
		sp, ok := env.(environment.Stepper)
		settle, inSandbox := s.settleAction(s.cfg.Settle)
		if ahead && ok && inSandbox && advance == 0 {
			var got *environment.Stepped
			res, got, err = sp.Step(ctx, typed, settle)
			if err == nil && got != nil {
				s.ahead = &lookAhead{step: step + 1, env: env, stepped: got}
				if got.Settled != nil {
					s.ahead.settled = time.Duration(got.Settled.ElapsedUS) * time.Microsecond
					s.ahead.capped = got.Settled.Met != nil && !*got.Settled.Met
				}
				looked = got.Observe
			}
		} else {
			res, err = env.Act(ctx, typed)
		}
		t = t.Add(looked)
		err = s.events.secrets.err(err)
		if err == nil && advance > 0 {
			// On a virtual clock the app takes the action in at the
			// instant it happened: the screen settles (the app idle,
			// its picture unchanged) before the clock moves on. Moved
			// at once, the app could draw the next instant before or
			// after it had handled the action (an xterm's echo of a
			// key drawn after the app's redraw, or wiped by it): two
			// runs of the same steps would differ.
			if _, _, err = s.settle(ctx, s.cfg.Settle); err == nil {
				err = s.advanceClock(ctx, advance)
			}
		}
	}
	s.events.secrets.result(&res)
	dur := time.Since(t)
	if err != nil {
		return nil, s.loopError(ctx, parent, a.String(), err, trace.ReasonEnvironment)
	}
	s.last = &res
	if a.Kind == action.Screenshot && (a.Region != nil || a.Scale > 0 || a.MaxWidth > 0) {
		s.viewReq = &a
	}
	if a.Kind == action.AccessibilityTree {
		s.treeReq = true
	}
	tw := time.Now()
	rr := trace.Record{Type: trace.TypeResult, Step: step, Result: &res, DurationMS: msOf(dur), ThrottledMS: msOf(throttled)}
	if s.clock != nil {
		rr.ClockAdvanceMS = msOf(advance)
	}
	s.tw.Record(rr)
	s.traceTime += time.Since(tw)
	s.tell(Event{Kind: EventResult, Step: step, Result: &res})
	if !res.OK && s.cfg.Verbose {
		fmt.Fprintf(s.cfg.Progress, "step %d: %s\n", step, termsafe.Line(res.Error))
	}
	return &res, nil
}

// lookAhead is the observation an environment took with the loop's last
// action (environment.Stepper), for the look of step.
type lookAhead struct {
	step    int
	env     environment.Environment
	stepped *environment.Stepped
	settled time.Duration // the settle's time, in the sandbox
	capped  bool
}

// settleAction is the wait a settle as st says makes in the sandbox (nil:
// none); inSandbox is false where it is not made there (a fixed time, on
// the host).
func (s *Session) settleAction(st Settle) (_ *action.Action, inSandbox bool) {
	switch st.Mode {
	case "", SettleNone:
		return nil, true
	case SettleStable:
		a := stableWait(st)
		return &a, true
	}
	return nil, false
}

// stableWait is the wait until stable of a stable settle.
func stableWait(st Settle) action.Action {
	timeout := st.Timeout
	if timeout <= 0 {
		timeout = StableCap
	}
	return action.Action{Kind: action.Wait, Until: action.UntilStable,
		StableMS: int(st.Duration / time.Millisecond), MS: int(timeout / time.Millisecond)}
}

// settle lets the screen settle before a screenshot as st says; capped
// says a stable settle gave up at its cap with the screen still changing.
func (s *Session) settle(ctx context.Context, st Settle) (_ time.Duration, capped bool, _ error) {
	if st.Mode == "" || st.Mode == SettleNone {
		return 0, false, nil
	}
	t := time.Now()
	switch st.Mode {
	case SettleFixed:
		select {
		case <-time.After(st.Duration):
		case <-ctx.Done():
			return 0, false, ctx.Err()
		}
	case SettleStable:
		env := s.environment()
		if env == nil {
			return 0, false, environment.ErrClosed
		}
		res, err := env.Act(ctx, stableWait(st))
		if err != nil {
			return 0, false, err
		}
		capped = res.Met != nil && !*res.Met
	}
	return time.Since(t), capped, nil
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// sleep waits d, until ctx ends, or until Close begins (which aborts a
// step in flight as the teardown aborts the sandbox's requests).
func (s *Session) sleep(ctx context.Context, env environment.Environment, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	// Nothing is asked of the guest meanwhile, so its liveness is watched
	// here: a guest that stops answering, or a sandbox that ends, fails the
	// wait as it would have failed a wait performed in the sandbox (an
	// environment error, within the host's liveness bound, not at the
	// run's deadline).
	var ended <-chan struct{}
	var stalled chan error
	l, ok := env.(environment.Liveness)
	if ok && d > sleepPing {
		ended = l.Done()
		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stalled = make(chan error, 1)
		go func() {
			tick := time.NewTicker(sleepPing)
			defer tick.Stop()
			for {
				select {
				case <-pctx.Done():
					return
				case <-tick.C:
				}
				if err := l.Ping(pctx); err != nil {
					if pctx.Err() == nil {
						stalled <- err
					}
					return
				}
			}
		}()
	}
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.stop:
		return environment.ErrClosed
	case err := <-stalled:
		return fmt.Errorf("wait: %w", err)
	case <-ended:
		// The guest's stream ended: a ping says why (killed, crashed).
		if err := l.Ping(ctx); err != nil {
			return fmt.Errorf("wait: %w", err)
		}
		return fmt.Errorf("wait: %w", environment.ErrClosed)
	}
}

// sleepPing is how often a wait kept on the host asks the guest whether
// it still answers.
const sleepPing = time.Second

// observe takes a screenshot and builds the observation and the step's
// record; consume takes the app's output and network events since the
// last observation into it (a person's look leaves them).
func (s *Session) observe(ctx context.Context, step int, consume bool) (*observe.Observation, *trace.Record, error) {
	return s.observeWith(ctx, step, consume, nil)
}

// observeWith is observe; with la, its screenshot is the one taken with
// the last action (lookAhead) instead of a new one.
func (s *Session) observeWith(ctx context.Context, step int, consume bool, la *lookAhead) (*observe.Observation, *trace.Record, error) {
	env := s.environment()
	if env == nil {
		return nil, nil, environment.ErrClosed
	}
	var (
		frame *observe.Frame
		st    environment.State
		err   error
	)
	if la != nil {
		frame, st = la.stepped.Frame, la.stepped.State
	} else if frame, st, err = s.screen(ctx, env); err != nil {
		return nil, nil, err
	}
	tm := time.Now()
	frame, tree, areas, err := s.paint(ctx, frame, true)
	if err != nil {
		return nil, nil, err
	}
	var maskMS float64
	if s.masker.Active() {
		maskMS = msOf(time.Since(tm))
	}
	s.maskTree = tree
	var lines []observe.LogLine
	var netEvs []observe.NetEvent
	var activity []observe.ActivityEvent
	if consume {
		lines = s.events.takeLines()
		netEvs = s.events.takeNetwork()
		if activity, err = s.activity(ctx, env); err != nil {
			return nil, nil, err
		}
	}
	exit := s.events.exit()
	st.Windows = s.events.secrets.windows(st.Windows)
	running := st.Running && exit == nil
	if exit == nil && st.Exit != nil {
		exit = st.Exit
	}
	obs := &observe.Observation{
		Step: step, Elapsed: time.Since(s.started), Screen: frame,
		Cursor: st.Cursor, Windows: st.Windows, Output: lines, Network: netEvs,
		Activity: activity, Running: running, Exit: exit,
	}
	tw := time.Now()
	shot := s.tw.Screenshot(step, frame) // queues the PNG; blocks only if encoding falls behind
	s.traceTime += time.Since(tw)
	rec := &trace.Record{
		Type: trace.TypeStep, Step: step,
		Observation: &trace.Observation{
			Screenshot: shot,
			FrameHash:  trace.FrameHash(frame.Hash),
			Width:      frame.Width, Height: frame.Height,
			Cursor: st.Cursor, Windows: st.Windows, Running: running, Output: lines,
			Network: netEvs, Activity: activity, Clock: s.clockStamp(), Masked: maskedAreas(areas), MaskMS: maskMS,
		},
	}
	return obs, rec, nil
}

// activity is a checkpoint of the trusted observer (Config.Env.Observe):
// what the app did since the previous observation, its paths and
// arguments with the vault's values replaced.
func (s *Session) activity(ctx context.Context, env environment.Environment) ([]observe.ActivityEvent, error) {
	if !s.cfg.Env.Observe {
		return nil, nil
	}
	o, ok := env.(environment.Observer)
	if !ok {
		return nil, fmt.Errorf("activity: %w", environment.ErrNoObserver)
	}
	evs, err := o.Activity(ctx)
	if err != nil {
		return nil, err
	}
	return s.events.secrets.activity(evs), nil
}

// final records the observation of a step that was never decided.
func (s *Session) final(rec *trace.Record) {
	if rec == nil {
		return
	}
	rec.Type = trace.TypeFinal
	s.tw.Record(*rec)
}

// finalObservation takes one more screenshot after the last action, for the
// record; failures here do not change the outcome.
func (s *Session) finalObservation(ctx context.Context, step int) *observe.Observation {
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	obs, rec, err := s.observe(octx, step, true)
	if err != nil {
		return nil
	}
	s.final(rec)
	obs.Task, obs.ScreenshotRef = s.cfg.Task, rec.Observation.Screenshot
	return obs
}

func (s *Session) appExited() *ending {
	ex := s.events.exit()
	if ex != nil && ex.Stopped != "" {
		// Not the app's doing: the sandbox was stopped under the run.
		return &ending{trace.Error, trace.ReasonEnvironment, "the sandbox was stopped from outside (" + ex.Stopped + "), taking the app with it"}
	}
	return &ending{trace.Failure, trace.ReasonAppExited, "the app exited during the run: " + ex.String()}
}

// loopError classifies an error of a step: the user's interrupt, the
// episode's deadline, the app dying under us, or a real failure. ctx
// carries the deadline, parent is the caller's.
func (s *Session) loopError(ctx, parent context.Context, what string, err error, reason string) *ending {
	if e := interrupted(parent); e != nil {
		return e
	}
	if c := s.closingEnd(); c != nil {
		return c
	}
	if ctx.Err() != nil && parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &ending{trace.Failure, trace.ReasonTimeout, fmt.Sprintf("the run's %v deadline passed (during %s)", s.cfg.Timeout, what)}
	}
	if errors.Is(err, environment.ErrGuest) && s.events.exit() != nil {
		// The sandbox went away because the app did.
		return s.appExited()
	}
	return &ending{trace.Error, reason, fmt.Sprintf("%s: %v", what, err)}
}
