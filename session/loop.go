package session

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/internal/version"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
	"golang.org/x/time/rate"
)

func versionString() string { return version.Version }

// agentLoop runs observe → decide → validate → record → act over the
// session until the run ends, and returns how.
func (s *Session) agentLoop(parent context.Context) (end *ending) {
	defer func() {
		// A panic in the loop (an agent's) is recorded as an error with its
		// stack; Run's close still tears down.
		if p := recover(); p != nil {
			end = s.panicked(p)
		}
	}()
	ctx, cancel := context.WithDeadline(parent, s.deadlineNow())
	defer cancel()
	if s.loop.Agent == nil {
		return s.personLoop(ctx, parent)
	}
	if end := s.startAgent(ctx, parent); end != nil {
		return end
	}
	for {
		if end := s.agentStep(parent); end != nil {
			return end
		}
	}
}

// agentStep is one turn of the agent's loop (observe, decide, act), under
// the episode's deadline as it is now: a policy's ask moves it on by the
// time it waited.
func (s *Session) agentStep(parent context.Context) *ending {
	ctx, cancel := context.WithDeadline(parent, s.deadlineNow())
	defer cancel()
	obs, err := s.observe1(parent, true)
	if err != nil {
		return endOf(err)
	}
	if obs.Ended != nil {
		return obs.Ended
	}
	// The gate: while a person has control the agent waits here,
	// between steps, and looks again when control comes back.
	if s.waitControl(ctx) {
		return nil
	}
	st, end := s.decide(ctx, parent, obs.Observation)
	if end != nil {
		return end
	}
	// A decision made while a person took control is not applied
	// (Act says so, after control came back); the agent looks again.
	// The loop looks again as soon as the action returns: the action
	// and that look are one exchange with the sandbox where it can.
	res, err := s.act1(parent, st, true)
	if err != nil {
		return endOf(err)
	}
	return res.Ended
}

// personLoop is the loop of a run without an agent (--agent human): a
// person has control from the start, at the live page, and the run waits
// until the episode ends — the person's done, the app's exit, the
// deadline, an interrupt, a close.
func (s *Session) personLoop(ctx, parent context.Context) *ending {
	var why *ending
	select {
	case <-s.stop:
	case <-s.events.exited:
		// The person can do nothing more: the episode ends, with a last
		// look for the record (unless a step of theirs ended it first).
		why = s.appExited()
	case <-ctx.Done():
		why = s.loopError(ctx, parent, "waiting for the person", ctx.Err(), trace.ReasonEnvironment)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.end == nil && why != nil {
		s.finalObservation(ctx, s.steps+1)
		s.setEnd(why)
	}
	if s.end != nil {
		return s.end
	}
	if c := s.closingEnd(); c != nil {
		return c
	}
	return &ending{trace.Error, trace.ReasonEnvironment, "the session stopped without an ending"}
}

// endOf is how the episode ended, from Observe's or Act's error.
func endOf(err error) *ending {
	var ee *EndedError
	if errors.As(err, &ee) {
		return &ee.End
	}
	return &ending{trace.Error, trace.ReasonEnvironment, err.Error()}
}

// startAgent gives the agent its task, if it wants it first.
func (s *Session) startAgent(ctx, parent context.Context) *ending {
	st, ok := s.loop.Agent.(agent.Starter)
	if !ok {
		return nil
	}
	screen := s.cfg.Env.Screen
	err := st.Start(ctx, agent.Task{Text: s.cfg.Task, Width: screen.Width, Height: screen.Height, MaxSteps: s.cfg.MaxSteps})
	if err != nil {
		return s.loopError(ctx, parent, "agent start", err, trace.ReasonAgent)
	}
	return nil
}

// decide asks the agent (with the app frozen meanwhile, given a freezer)
// and makes the step. A failed decision ends the run: the observation is
// recorded as the last one, with what the agent returned.
func (s *Session) decide(ctx, parent context.Context, obs *observe.Observation) (Step, *ending) {
	frozen, err := s.freezeForDecision(ctx)
	if err != nil {
		return Step{}, s.loopError(ctx, parent, "freeze the app", err, trace.ReasonEnvironment)
	}
	t := time.Now()
	dctx, waits := agent.WithWaits(ctx) // a queue for model calls adds its waits
	d, err := s.loop.Agent.Decide(dctx, obs)
	latency := time.Since(t)
	if frozen {
		// (A person who took control meanwhile has thawed it already.)
		if terr := s.thawNow(); terr != nil && err == nil {
			return Step{}, s.loopError(ctx, parent, "thaw the app", terr, trace.ReasonEnvironment)
		}
	}
	if err != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.final(s.pending)
		s.pending = nil
		s.recordFailedDecision(obs.Step, d, latency, err)
		reason := trace.ReasonAgent
		if errors.Is(err, agent.ErrMalformed) {
			reason = trace.ReasonMalformed
		}
		return Step{}, s.loopError(ctx, parent, "agent", err, reason)
	}
	dec := &trace.Decision{LatencyMS: msOf(latency), Message: d.Message, Meta: d.Meta}
	if q := waits.Total(); q > 0 {
		dec.QueueMS, dec.ModelMS = msOf(q), msOf(max(latency-q, 0))
	}
	if frozen {
		dec.FrozenMS = msOf(time.Since(t))
	}
	return Step{Actor: s.cfg.Actor, Action: d.Action, Decision: dec, Files: d.Files, Reason: d.Reason}, nil
}

// recordFailedDecision keeps what an agent returned with its error (the
// raw exchanges of the answers that were rejected) as an event, so a run
// that ends in agent_error or malformed_answer still shows them.
func (s *Session) recordFailedDecision(step int, d agent.Decision, latency time.Duration, err error) {
	data := map[string]any{"error": err.Error(), "latency_ms": msOf(latency)}
	if len(d.Meta) > 0 {
		data["meta"] = d.Meta
	}
	files := map[string]string{}
	for name, content := range d.Files {
		if p, aerr := s.tw.Attach(step, name, content); aerr == nil {
			files[name] = p
		}
	}
	if len(files) > 0 {
		data["files"] = files
	}
	s.tw.Record(trace.Record{Type: trace.TypeEvent, Step: step, Event: "agent_error", Data: data})
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
