package session

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/internal/version"
	"github.com/codegirl-games/agentbox/trace"
	"golang.org/x/time/rate"
)

func versionString() string { return version.Version }

// loopState is what the loop carries from one step to the next.
type loopState struct {
	limits  action.Limits
	limiter *rateLimiter
	freezer environment.Freezer // nil unless the app is frozen while the agent decides
	last    *action.Result      // the previous action's result, shown to the agent
	viewReq *action.Action      // the last screenshot action with options: the next observation's view
	treeReq bool                // the agent asked for the tree (accessibility_tree): the next observation has it
	appGone bool                // the agent has seen one observation with the app gone
}

// loop runs observe → decide → validate → record → act until the run ends.
func (r *run) loop(parent context.Context) *ending {
	ctx, cancel := context.WithTimeout(parent, r.cfg.Timeout)
	defer cancel()
	defer r.loopTimings(time.Now())
	s, end := r.startLoop(ctx, parent)
	if end != nil {
		return end
	}
	for step := 1; ; step++ {
		if end := r.step(ctx, parent, step, s); end != nil {
			return end
		}
	}
}

// startLoop starts the agent and makes the loop's state.
func (r *run) startLoop(ctx, parent context.Context) (*loopState, *ending) {
	screen := r.cfg.Env.Screen
	if st, ok := r.cfg.Agent.(agent.Starter); ok {
		err := st.Start(ctx, agent.Task{Text: r.cfg.Task, Width: screen.Width, Height: screen.Height, MaxSteps: r.cfg.MaxSteps})
		if err != nil {
			return nil, r.loopError(ctx, parent, "agent start", err, trace.ReasonAgent)
		}
	}
	s := &loopState{limits: action.DefaultLimits(screen.Width, screen.Height), limiter: newRateLimiter(r.cfg.MaxRate)}
	if r.cfg.FreezeWhileThinking {
		s.freezer, _ = r.env.(environment.Freezer)
	}
	return s, nil
}

// loopTimings records where the loop's time went.
func (r *run) loopTimings(start time.Time) {
	r.timing("loop", time.Since(start))
	r.timing("trace_write", r.traceTime)
	if r.frozen > 0 {
		r.timing("frozen", r.frozen)
		r.timing("app_running", time.Since(start)-r.frozen)
	}
}

// step runs one step; nil means the loop goes on.
func (r *run) step(ctx, parent context.Context, step int, s *loopState) *ending {
	obs, rec, end := r.look(ctx, parent, step, s)
	if end != nil {
		return end
	}
	d, end := r.decide(ctx, parent, step, obs, rec, s.freezer)
	if end != nil {
		return end
	}
	a := &d.Action
	verr := action.ResolveMark(a, obs.Marks) // recorded with the point it resolved to
	if verr == nil {
		verr = action.Validate(*a, s.limits)
	}
	if end := r.recordStep(step, rec, d, verr); end != nil {
		return end
	}
	switch {
	case verr != nil:
		s.last = r.rejected(step, verr)
		return nil
	case a.Kind == action.Done:
		return r.done(ctx, step, *a, d.Reason)
	case s.appGone:
		// The agent saw the app gone and did not finish: that ends it.
		return r.appExited()
	}
	return r.act(ctx, parent, step, *a, s)
}

// look lets the screen settle, observes, and makes the agent's
// observation. It ends the run when the app is still gone at a second look
// (the agent has seen it gone once) or the steps are used up.
func (r *run) look(ctx, parent context.Context, step int, s *loopState) (*action.Observation, *trace.Record, *ending) {
	how := r.cfg.Settle
	if step == 1 {
		how = r.cfg.FirstSettle
	}
	settled, capped, err := r.settle(ctx, how)
	if err != nil {
		return nil, nil, r.loopError(ctx, parent, "settle", err, trace.ReasonEnvironment)
	}
	obs, rec, err := r.observe(ctx, step)
	if err != nil {
		return nil, nil, r.loopError(ctx, parent, "observe", err, trace.ReasonEnvironment)
	}
	rec.Observation.SettleMS, rec.Observation.SettleCapped = msOf(settled), capped
	if err := r.accessibility(ctx, step, s, obs, rec); err != nil {
		return nil, nil, r.loopError(ctx, parent, "accessibility tree", err, trace.ReasonEnvironment)
	}
	if s.viewReq != nil {
		req := s.viewReq
		v, err := action.NewView(obs.Screen, req.Region, req.Scale, req.MaxWidth, 0)
		if err == nil && (v.Scaled() || req.Region != nil) {
			obs.View = v
			rec.Observation.View = &trace.ViewInfo{Region: v.Region, Width: v.Frame.Width, Height: v.Frame.Height}
		}
		s.viewReq = nil
	}
	if step == 1 {
		r.timing("first_screenshot", time.Since(r.started))
	}
	obs.Task, obs.Last = r.cfg.Task, s.last
	if !obs.Running {
		if s.appGone {
			return nil, nil, r.appExited()
		}
		s.appGone = true
	}
	if step > r.cfg.MaxSteps {
		r.final(rec)
		return nil, nil, &ending{trace.Failure, trace.ReasonMaxSteps, fmt.Sprintf("the agent did not finish within %d steps", r.cfg.MaxSteps)}
	}
	if obs.ScreenshotRef == "" { // marked: the agent's copy
		obs.ScreenshotRef = rec.Observation.Screenshot
	}
	return obs, rec, nil
}

// decide asks the agent (with the app frozen meanwhile, given a freezer)
// and puts the decision in rec. A failed decision ends the run.
func (r *run) decide(ctx, parent context.Context, step int, obs *action.Observation, rec *trace.Record, freezer environment.Freezer) (agent.Decision, *ending) {
	frozen, err := r.freeze(ctx, freezer)
	if err != nil {
		return agent.Decision{}, r.loopError(ctx, parent, "freeze the app", err, trace.ReasonEnvironment)
	}
	t := time.Now()
	d, err := r.cfg.Agent.Decide(ctx, obs)
	latency := time.Since(t)
	if frozen {
		if terr := r.thaw(ctx, freezer, t); terr != nil && err == nil {
			return d, r.loopError(ctx, parent, "thaw the app", terr, trace.ReasonEnvironment)
		}
	}
	if err != nil {
		r.final(rec)
		r.recordFailedDecision(step, d, latency, err)
		reason := trace.ReasonAgent
		if errors.Is(err, agent.ErrMalformed) {
			reason = trace.ReasonMalformed
		}
		return d, r.loopError(ctx, parent, "agent", err, reason)
	}
	rec.Decision = &trace.Decision{LatencyMS: msOf(latency), Message: d.Message, Meta: d.Meta}
	if frozen {
		rec.Decision.FrozenMS = msOf(time.Since(t))
	}
	for name, data := range d.Files {
		if p, err := r.tw.Attach(step, name, data); err == nil {
			if rec.Decision.Files == nil {
				rec.Decision.Files = map[string]string{}
			}
			rec.Decision.Files[name] = p
		}
	}
	return d, nil
}

// recordStep writes the step (observation, decision, action, whether the
// action is invalid) to the trace: the step is on disk before its action
// runs.
func (r *run) recordStep(step int, rec *trace.Record, d agent.Decision, verr error) *ending {
	a := d.Action
	rec.Action = &a
	if verr != nil {
		rec.Invalid = verr.Error()
	}
	tw := time.Now()
	err := r.tw.Record(*rec)
	r.traceTime += time.Since(tw)
	if err != nil {
		return &ending{trace.Error, trace.ReasonEnvironment, fmt.Sprintf("trace: %v", err)}
	}
	r.steps = step
	if r.cfg.Verbose {
		// The action and the message are the agent's (a model's
		// text): shown, never obeyed by the terminal.
		fmt.Fprintf(r.cfg.Progress, "step %d: %s", step, termsafe.Line(a.String()))
		if d.Message != "" {
			fmt.Fprintf(r.cfg.Progress, " — %s", termsafe.Line(d.Message))
		}
		fmt.Fprintln(r.cfg.Progress)
	}
	return nil
}

// rejected records that an action failed validation; the agent is told at
// its next step.
func (r *run) rejected(step int, verr error) *action.Result {
	res := &action.Result{OK: false, Error: verr.Error()}
	r.tw.Record(trace.Record{Type: trace.TypeResult, Step: step, Result: res})
	if r.cfg.Verbose {
		fmt.Fprintf(r.cfg.Progress, "step %d: rejected: %s\n", step, termsafe.Line(verr.Error()))
	}
	return res
}

// done ends the run on the agent's done action, after a last look.
func (r *run) done(ctx context.Context, step int, a action.Action, why string) *ending {
	res := action.Result{OK: true}
	r.tw.Record(trace.Record{Type: trace.TypeResult, Step: step, Result: &res})
	r.finalObservation(ctx, step+1)
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
func (r *run) act(ctx, parent context.Context, step int, a action.Action, s *loopState) *ending {
	throttled, err := s.limiter.wait(ctx)
	if err != nil {
		return r.loopError(ctx, parent, a.String(), err, trace.ReasonEnvironment)
	}
	t := time.Now()
	res, err := r.env.Act(ctx, a)
	dur := time.Since(t)
	if err != nil {
		return r.loopError(ctx, parent, a.String(), err, trace.ReasonEnvironment)
	}
	s.last = &res
	if a.Kind == action.Screenshot && (a.Region != nil || a.Scale > 0 || a.MaxWidth > 0) {
		s.viewReq = &a
	}
	if a.Kind == action.AccessibilityTree {
		s.treeReq = true
	}
	tw := time.Now()
	r.tw.Record(trace.Record{Type: trace.TypeResult, Step: step, Result: &res, DurationMS: msOf(dur), ThrottledMS: msOf(throttled)})
	r.traceTime += time.Since(tw)
	if !res.OK && r.cfg.Verbose {
		fmt.Fprintf(r.cfg.Progress, "step %d: %s\n", step, termsafe.Line(res.Error))
	}
	return nil
}

// recordFailedDecision keeps what an agent returned with its error (the
// raw exchanges of the answers that were rejected) as an event, so a run
// that ends in agent_error or malformed_answer still shows them.
func (r *run) recordFailedDecision(step int, d agent.Decision, latency time.Duration, err error) {
	data := map[string]any{"error": err.Error(), "latency_ms": msOf(latency)}
	if len(d.Meta) > 0 {
		data["meta"] = d.Meta
	}
	files := map[string]string{}
	for name, content := range d.Files {
		if p, aerr := r.tw.Attach(step, name, content); aerr == nil {
			files[name] = p
		}
	}
	if len(files) > 0 {
		data["files"] = files
	}
	r.tw.Record(trace.Record{Type: trace.TypeEvent, Step: step, Event: "agent_error", Data: data})
}

// rateLimiter bounds the actions per second with golang.org/x/time/rate's
// token bucket: bursts of up to a second's worth of actions, then rate
// actions per second. A rate of 0 is no bound.
type rateLimiter struct{ l *rate.Limiter }

func newRateLimiter(perSecond float64) *rateLimiter {
	if perSecond <= 0 {
		return &rateLimiter{rate.NewLimiter(rate.Inf, 0)}
	}
	return &rateLimiter{rate.NewLimiter(rate.Limit(perSecond), max(1, int(min(perSecond, math.MaxInt32))))}
}

// wait blocks until an action may run and returns how long it waited
// (recorded as throttled_ms).
func (l *rateLimiter) wait(ctx context.Context) (time.Duration, error) {
	r := l.l.Reserve() // always OK: the burst is at least one action
	d := r.Delay()
	if d == 0 {
		return 0, nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return d, nil
	case <-ctx.Done():
		r.Cancel()
		return 0, ctx.Err()
	}
}

// freeze freezes the app before a decision, if asked and possible.
func (r *run) freeze(ctx context.Context, f environment.Freezer) (bool, error) {
	if f == nil {
		return false, nil
	}
	if err := f.Freeze(ctx); err != nil {
		return false, err
	}
	return true, nil
}

// thaw resumes the app and accounts for the frozen time; it runs even when
// ctx has ended, so an interrupted run never leaves the app frozen.
func (r *run) thaw(ctx context.Context, f environment.Freezer, since time.Time) error {
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := f.Thaw(tctx)
	r.frozen += time.Since(since)
	return err
}

// settle lets the screen settle before a screenshot as s says; capped
// says a stable settle gave up at its cap with the screen still changing.
func (r *run) settle(ctx context.Context, s Settle) (_ time.Duration, capped bool, _ error) {
	if s.Mode == "" || s.Mode == SettleNone {
		return 0, false, nil
	}
	t := time.Now()
	switch s.Mode {
	case SettleFixed:
		select {
		case <-time.After(s.Duration):
		case <-ctx.Done():
			return 0, false, ctx.Err()
		}
	case SettleStable:
		timeout := s.Timeout
		if timeout <= 0 {
			timeout = StableCap
		}
		res, err := r.env.Act(ctx, action.Action{Kind: action.Wait, Until: action.UntilStable,
			StableMS: int(s.Duration / time.Millisecond), MS: int(timeout / time.Millisecond)})
		if err != nil {
			return 0, false, err
		}
		capped = res.Met != nil && !*res.Met
	}
	return time.Since(t), capped, nil
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// observe takes a screenshot and builds the agent's observation and the
// step's record.
func (r *run) observe(ctx context.Context, step int) (*action.Observation, *trace.Record, error) {
	frame, st, err := r.env.Observe(ctx)
	if err != nil {
		return nil, nil, err
	}
	lines := r.events.takeLines()
	netEvs := r.events.takeNetwork()
	exit := r.events.exit()
	running := st.Running && exit == nil
	if exit == nil && st.Exit != nil {
		exit = st.Exit
	}
	obs := &action.Observation{
		Step: step, Elapsed: time.Since(r.started), Screen: frame,
		Cursor: st.Cursor, Windows: st.Windows, Output: lines, Network: netEvs,
		Running: running, Exit: exit,
	}
	tw := time.Now()
	shot := r.tw.Screenshot(step, frame) // queues the PNG; blocks only if encoding falls behind
	r.traceTime += time.Since(tw)
	rec := &trace.Record{
		Type: trace.TypeStep, Step: step,
		Observation: &trace.Observation{
			Screenshot: shot,
			FrameHash:  trace.FrameHash(frame.Hash),
			Width:      frame.Width, Height: frame.Height,
			Cursor: st.Cursor, Windows: st.Windows, Running: running, Output: lines,
			Network: netEvs,
		},
	}
	return obs, rec, nil
}

// final records the observation of a step that was never decided.
func (r *run) final(rec *trace.Record) {
	if rec == nil {
		return
	}
	rec.Type = trace.TypeFinal
	r.tw.Record(*rec)
}

// finalObservation takes one more screenshot after the last action, for the
// record; failures here do not change the outcome.
func (r *run) finalObservation(ctx context.Context, step int) {
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, rec, err := r.observe(octx, step)
	if err == nil {
		r.final(rec)
	}
}

func (r *run) appExited() *ending {
	ex := r.events.exit()
	if ex != nil && ex.Stopped != "" {
		// Not the app's doing: the sandbox was stopped under the run.
		return &ending{trace.Error, trace.ReasonEnvironment, "the sandbox was stopped from outside (" + ex.Stopped + "), taking the app with it"}
	}
	return &ending{trace.Failure, trace.ReasonAppExited, "the app exited during the run: " + ex.String()}
}

// loopError classifies an error inside the loop: the user's interrupt, the
// run's deadline, the app dying under us, or a real failure.
func (r *run) loopError(ctx, parent context.Context, what string, err error, reason string) *ending {
	if e := interrupted(parent); e != nil {
		return e
	}
	if ctx.Err() != nil && parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &ending{trace.Failure, trace.ReasonTimeout, fmt.Sprintf("the run's %v deadline passed (during %s)", r.cfg.Timeout, what)}
	}
	if errors.Is(err, environment.ErrGuest) && r.events.exit() != nil {
		// The sandbox went away because the app did.
		return r.appExited()
	}
	return &ending{trace.Error, reason, fmt.Sprintf("%s: %v", what, err)}
}
