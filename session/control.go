package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/lockrank"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// Taking control: a person at the live page takes the app over from the
// session's controller (the agent loop, a remote client) between steps,
// drives it with steps of the actor human, and hands it back. Meanwhile
// the controller is paused: the agent loop waits before it decides, and
// an action another controller chose is not performed (it was decided on
// a screen the person is changing); the controller's next observation
// carries an observe.Intervention saying what the person did and what
// changed on the screen. A frozen app (--freeze-while-thinking) runs
// while the person drives.

// Errors of TakeOver and HandBack.
var (
	// ErrControlled: a person already has control.
	ErrControlled = errors.New("a person already has control")
	// ErrNotControlled: nobody took control, so there is nothing to hand back.
	ErrNotControlled = errors.New("nobody has taken control")
	// ErrNoController: the session has no controller but the person (a run
	// with --agent human): control cannot be handed back.
	ErrNoController = errors.New("there is no agent to hand control back to")
	// ErrFrozen: Peek while the app is frozen for the agent's decision
	// (--freeze-while-thinking): the screen cannot change meanwhile.
	ErrFrozen = errors.New("the app is frozen while the agent decides")
)

// NotAppliedError is the Result.Error of an action that was not
// performed because a person took control before it ran.
const NotAppliedError = "not performed: a person took control of the app before this action ran; look at the screen again"

// control is who drives the session.
type control struct {
	mu    lockrank.Mutex[controlLock]
	human bool // a person has control
	// noAgent: the session has no other controller (Loop.Agent nil in
	// Run): the person has control from the start and cannot hand it back.
	noAgent bool
	by      string
	since   time.Time
	back    chan struct{} // closed when control is handed back
	// before is the screen the controller saw last, when the person took
	// control; acts, more, first and last what the person did since.
	before      *observe.Frame
	acts        []action.Action
	more        int
	first, last int
	// handed is the intervention the controller's next look is told of.
	handed *handedBack
	// epoch counts takeovers; seenEpoch is the epoch of the controller's
	// last look while it had control (or of its last action not applied):
	// an action decided on an older look is not performed.
	epoch, seenEpoch int
}

// handedBack is an intervention waiting for the controller's next look.
type handedBack struct {
	iv     observe.Intervention
	before *observe.Frame
}

// Control is who drives the session, for a page that shows it.
type Control struct {
	// Human says a person has control (since Since, named By).
	Human bool
	By    string
	Since time.Time
	// NoAgent says the person is the only controller: nothing to hand
	// control back to.
	NoAgent bool
}

// Control says who drives the session now.
func (s *Session) Control() Control {
	s.ctl.mu.Lock()
	defer s.ctl.mu.Unlock()
	return Control{Human: s.ctl.human, By: s.ctl.by, Since: s.ctl.since, NoAgent: s.ctl.noAgent}
}

// TakeOver gives control to a person (by names them in the trace): from
// now on the session's controller is paused between steps until HandBack,
// and steps with the actor human are the person's. An action another
// controller decided and that has not started is not performed; one that
// is running finishes first. A frozen app is thawed. It records a
// takeover event with its time.
func (s *Session) TakeOver(by string) error {
	if e := s.endedEarly(); e != nil {
		return e
	}
	if by == "" {
		by = "a person"
	}
	s.ctl.mu.Lock()
	if s.ctl.human {
		s.ctl.mu.Unlock()
		return ErrControlled
	}
	s.takeLocked(by)
	s.ctl.mu.Unlock()
	s.thawNow() // the person drives a running app, whatever the agent does
	s.tw.Record(trace.Record{Type: trace.TypeEvent, Event: trace.EventTakeover, Data: map[string]any{"by": by}})
	s.tell(Event{Kind: EventTakeover, By: by})
	return nil
}

// takeLocked starts a person's control; s.ctl.mu is held.
func (s *Session) takeLocked(by string) {
	s.ctl.human, s.ctl.by, s.ctl.since = true, by, time.Now()
	s.ctl.epoch++
	s.ctl.back = make(chan struct{})
	s.ctl.acts, s.ctl.more, s.ctl.first, s.ctl.last = nil, 0, 0, 0
	s.ctl.before = s.seen.Load()
	if h := s.ctl.handed; h != nil {
		// The controller has not looked since the last hand-back: what it
		// will be told starts from what it saw then.
		s.ctl.before = h.before
		s.ctl.acts = append(s.ctl.acts, h.iv.Actions...)
		s.ctl.more, s.ctl.first, s.ctl.last = h.iv.More, h.iv.FirstStep, h.iv.LastStep
		s.ctl.handed = nil
	}
}

// personHasControl starts a run without an agent: the person has control
// from the start, for good.
func (s *Session) personHasControl() {
	s.ctl.mu.Lock()
	s.ctl.noAgent = true
	s.takeLocked("a person")
	s.ctl.mu.Unlock()
	s.tw.Record(trace.Record{Type: trace.TypeEvent, Event: trace.EventTakeover, Data: map[string]any{"by": "a person", "no_agent": true}})
	s.tell(Event{Kind: EventTakeover, By: "a person"})
}

// HandBack ends the person's control (reason says why: "handed back",
// "the person left", …): the controller resumes, and its next
// observation carries what the person did and what changed. It records
// a hand_back event with its time.
func (s *Session) HandBack(reason string) error {
	s.ctl.mu.Lock()
	switch {
	case s.ctl.noAgent:
		s.ctl.mu.Unlock()
		return ErrNoController
	case !s.ctl.human:
		s.ctl.mu.Unlock()
		return ErrNotControlled
	}
	took := time.Since(s.ctl.since)
	iv := observe.Intervention{By: s.ctl.by, Actions: s.ctl.acts, More: s.ctl.more,
		FirstStep: s.ctl.first, LastStep: s.ctl.last, DurationMS: took.Milliseconds()}
	if iv.Actions == nil {
		iv.Actions = []action.Action{}
	}
	if reason == "" {
		reason = "handed back"
	}
	by := s.ctl.by
	// Recorded before the controller is released (and under s.ctl.mu, so
	// a controller that looks now still waits): its next step must come
	// after the hand-back in the trace. A busy machine once recorded the
	// script's next step first (TestLiveTakeoverInChromium). The trace
	// writer's lock is a leaf: nothing under it takes s.ctl.mu.
	s.tw.Record(trace.Record{Type: trace.TypeEvent, Event: trace.EventHandBack, Data: map[string]any{
		"by": by, "reason": reason, "steps": iv.Steps(), "duration_ms": iv.DurationMS}})
	s.ctl.handed = &handedBack{iv: iv, before: s.ctl.before}
	s.ctl.human = false
	close(s.ctl.back)
	s.ctl.mu.Unlock()
	s.tell(Event{Kind: EventHandBack, By: by, Reason: reason, Steps: iv.Steps()})
	return nil
}

// controlled reports whether a person has control.
func (s *Session) controlled() bool {
	s.ctl.mu.Lock()
	defer s.ctl.mu.Unlock()
	return s.ctl.human
}

// preempted reports whether an action of the controller may not run: a
// person has control, or took it after the controller's last look (the
// action was decided on a screen they have changed since).
func (s *Session) preempted() bool {
	s.ctl.mu.Lock()
	defer s.ctl.mu.Unlock()
	return s.ctl.human || s.ctl.seenEpoch < s.ctl.epoch
}

// controllerLooked notes the controller's look, when it has control.
func (s *Session) controllerLooked() {
	s.ctl.mu.Lock()
	defer s.ctl.mu.Unlock()
	if !s.ctl.human {
		s.ctl.seenEpoch = s.ctl.epoch
	}
}

// noteHuman counts a person's recorded step for the intervention.
func (s *Session) noteHuman(step int, a action.Action) {
	s.ctl.mu.Lock()
	defer s.ctl.mu.Unlock()
	if !s.ctl.human {
		return
	}
	if s.ctl.first == 0 {
		s.ctl.first = step
	}
	s.ctl.last = step
	if len(s.ctl.acts) < observe.MaxInterventionActions {
		s.ctl.acts = append(s.ctl.acts, a)
	} else {
		s.ctl.more++
	}
}

// tookOverAfter reports whether a person took control after t (their
// first step must not act on an observation taken before).
func (s *Session) tookOverAfter(t time.Time) bool {
	s.ctl.mu.Lock()
	defer s.ctl.mu.Unlock()
	return s.ctl.human && s.ctl.since.After(t)
}

// handedBackFor takes the intervention waiting for the controller's look
// at frame, with what changed on the screen since the controller's
// previous look.
func (s *Session) handedBackFor(frame *observe.Frame) *observe.Intervention {
	s.ctl.mu.Lock()
	h := s.ctl.handed
	s.ctl.handed = nil
	s.ctl.mu.Unlock()
	if h == nil {
		return nil
	}
	iv := h.iv
	if h.before != nil {
		r, changed, _ := observe.ChangedRect(h.before, frame)
		iv.ScreenChanged = changed
		if changed {
			iv.Changed = &r
		}
	} else {
		iv.ScreenChanged = true // nothing to compare with: say it may have
	}
	return &iv
}

// waitControl waits, while a person has control, until it is handed back,
// the episode ends, the app exits or ctx ends; it reports whether it had
// to wait (the screen may have changed: look again).
func (s *Session) waitControl(ctx context.Context) bool {
	s.ctl.mu.Lock()
	if !s.ctl.human {
		s.ctl.mu.Unlock()
		return false
	}
	back := s.ctl.back
	s.ctl.mu.Unlock()
	select {
	case <-back:
	case <-s.stop:
	case <-s.events.exited:
	case <-ctx.Done():
	}
	return true
}

// notApplied answers an action of another controller that a person's
// control preempted: it waits for control to come back (or the episode
// to end), records that the action was not performed, and tells the
// controller so with its next observation's Last (its next action is
// taken as decided after that).
func (s *Session) notApplied(ctx context.Context, st Step) (StepResult, error) {
	s.waitControl(ctx)
	s.ctl.mu.Lock()
	if !s.ctl.human {
		s.ctl.seenEpoch = s.ctl.epoch
	}
	s.ctl.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.end != nil {
		return StepResult{Step: s.steps}, &EndedError{*s.end}
	}
	a := st.Action
	s.tw.Record(trace.Record{Type: trace.TypeEvent, Event: trace.EventNotApplied, Data: map[string]any{
		"actor": st.Actor, "action": a}})
	s.tell(Event{Kind: EventNotApplied, Actor: st.Actor, Action: &a})
	res := action.Result{OK: false, Error: NotAppliedError}
	s.last = &res
	return StepResult{Step: s.steps, Result: res, NotApplied: true}, nil
}

// endedEarly is the EndedError of an episode that has ended, without
// waiting for a step in flight.
func (s *Session) endedEarly() error {
	if e := s.endSeen.Load(); e != nil {
		return &EndedError{*e}
	}
	return nil
}

// markStopped records how the episode ended for readers that do not take
// the step lock, and wakes whoever waits for control; once.
func (s *Session) markStopped(end *End) {
	s.stopOnce.Do(func() {
		if end != nil {
			e := *end
			s.endSeen.Store(&e)
		}
		close(s.stop)
	})
}

// freezeForDecision freezes the app before the agent decides, unless a
// person has control (they drive a running app).
func (s *Session) freezeForDecision(ctx context.Context) (bool, error) {
	if !s.loop.FreezeWhileThinking {
		return false, nil
	}
	return s.freezeApp(ctx)
}

// freezeApp freezes the app where the backend can (the agent's decision,
// a policy's ask), unless a person has control.
func (s *Session) freezeApp(ctx context.Context) (bool, error) {
	f := s.freezer
	if f == nil {
		return false, nil
	}
	s.fz.Lock()
	defer s.fz.Unlock()
	if s.controlled() {
		return false, nil
	}
	if err := f.Freeze(ctx); err != nil {
		return false, err
	}
	s.frozenNow, s.frozeAt = true, time.Now()
	return true, nil
}

// thawNow thaws the app if it is frozen and accounts for the frozen time;
// it runs even when ctx has ended, so the app is never left frozen.
func (s *Session) thawNow() error {
	s.fz.Lock()
	defer s.fz.Unlock()
	if !s.frozenNow {
		return nil
	}
	tctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.freezer.Thaw(tctx)
	if err != nil {
		return fmt.Errorf("thaw the app: %w", err)
	}
	s.frozenNow = false
	s.frozen += time.Since(s.frozeAt)
	return nil
}
