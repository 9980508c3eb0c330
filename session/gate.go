package session

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/trace"
)

// DefaultAskTimeout bounds one ask of the policy gate when Config does
// not say: an ask nobody answered by then is denied.
const DefaultAskTimeout = 5 * time.Minute

// gateState is the policy gate's state in an episode; guarded by s.mu.
type gateState struct {
	asks   int             // the asks made (bounded by the policy's MaxAsks)
	grants map[string]bool // rules answered "always" (never a sensitive one)
}

// gated says whether the gate looks at this kind of action at all:
// those that act on the app. A wait, a look, a done are not gated.
func gated(k action.Kind) bool {
	switch k {
	case action.Screenshot, action.Wait, action.CursorPosition, action.Done, action.AccessibilityTree:
		return false
	}
	return true
}

// gate applies the policy to a step's action before it runs: it reads
// the element under the point when the policy names targets (and the
// sandbox has a tree), decides, and asks the Approver when the decision
// is ask (the app frozen meanwhile, where the backend can freeze it; the
// wait does not count against the episode's deadline). It returns what
// the trace records, and whether the action may run. A person's own
// steps (the actor human, who holds control) are not gated. s.mu is held.
func (s *Session) gate(ctx, parent context.Context, step int, rec *trace.Record, st Step) (*trace.PolicyDecision, bool) {
	p := s.cfg.Policy
	if p == nil || st.Actor == trace.ActorHuman || !gated(st.Action.Kind) {
		return nil, true
	}
	t := time.Now()
	var tree *observe.Tree
	var treeFailed bool
	var treeMS float64
	if p.NeedsTree() && s.cfg.Env.A11y {
		if acc, ok := s.environment().(environment.Accessible); ok {
			tt := time.Now()
			tr, err := acc.Tree(ctx, s.cfg.TreeLimits)
			treeMS = msOf(time.Since(tt))
			if err != nil {
				treeFailed = true
			} else {
				tree = tr
			}
		}
	}
	var cursor action.Point
	if rec != nil && rec.Observation != nil {
		cursor = rec.Observation.Cursor
	}
	sub := policy.SubjectOf(st.Action, cursor, tree)
	sub.TreeFailed = treeFailed
	v := p.Decide(sub)
	d := &trace.PolicyDecision{Rule: v.RuleName(), Decision: string(v.Decision), Sensitive: v.Sensitive(), TreeMS: treeMS}
	if v.Element != nil {
		d.Element = v.Element.Describe()
	}
	d.GateMS = msOf(time.Since(t))
	switch v.Decision {
	case policy.Allow:
		d.Allowed = true
		return d, true
	case policy.Deny:
		return d, false
	}
	// Ask.
	if v.Rule != nil && !v.Rule.Sensitive && s.gateSt.grants[v.Rule.Name] {
		d.Allowed, d.By, d.Note = true, "grant", "answered always earlier"
		return d, true
	}
	if s.gateSt.asks >= p.MaxAsks {
		d.Note = fmt.Sprintf("too many asks: the policy allows %d an episode", p.MaxAsks)
		return d, false
	}
	s.gateSt.asks++
	req := policy.Request{
		ID: strconv.Itoa(s.gateSt.asks), Step: step, Actor: st.Actor, Action: st.Action,
		Rule: v.RuleName(), Sensitive: v.Sensitive(), Element: d.Element,
	}
	req.Screenshot = s.askShot(step, req.ID, v.Element, sub.Points)
	d.Ask = req.ID
	ans, wait := s.ask(parent, req)
	d.WaitMS = msOf(wait)
	d.Allowed, d.By, d.Note = ans.Allow, ans.By, ans.Note
	if ans.Allow && ans.Always && v.Rule != nil && !v.Rule.Sensitive {
		if s.gateSt.grants == nil {
			s.gateSt.grants = map[string]bool{}
		}
		s.gateSt.grants[v.Rule.Name] = true
	}
	return d, ans.Allow
}

// ask puts req to the Approver (DenyAll when none) with the app frozen
// where the backend can freeze it, within the ask's timeout, and pauses
// the episode's deadline for as long as it waits. An error of the
// Approver, a timeout, an interrupt, a Close are denials.
func (s *Session) ask(parent context.Context, req policy.Request) (policy.Answer, time.Duration) {
	ap := s.cfg.Approver
	if ap == nil {
		ap = policy.DenyAll{}
	}
	t := time.Now()
	defer func() { s.paused.Add(int64(time.Since(t))) }()
	timeout := s.cfg.AskTimeout
	if timeout <= 0 {
		timeout = DefaultAskTimeout
	}
	actx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-actx.Done():
		}
	}()
	frozen, ferr := s.freezeApp(actx)
	s.tell(Event{Kind: EventApproval, Step: req.Step, Actor: req.Actor, Action: &req.Action, Approval: &req})
	ans, err := ap.Approve(actx, req)
	if frozen {
		if terr := s.thawNow(); terr != nil && s.cfg.Verbose {
			fmt.Fprintf(s.cfg.Progress, "agentbox: %v\n", terr)
		}
	}
	switch {
	case err != nil:
		ans = policy.Answer{By: ans.By, Note: err.Error()}
	case actx.Err() != nil && !ans.Allow && ans.Note == "":
		ans.Note = "no answer in time"
		if errors.Is(parent.Err(), context.Canceled) {
			ans.Note = "interrupted"
		}
	}
	if ferr != nil && ans.Note == "" && s.cfg.Verbose {
		fmt.Fprintf(s.cfg.Progress, "agentbox: could not freeze the app for the ask: %v\n", ferr)
	}
	answer := "denied"
	if ans.Allow {
		answer = "allowed"
	}
	s.tell(Event{Kind: EventApproval, Step: req.Step, Actor: req.Actor, Approval: &req, Answer: answer, By: ans.By, Reason: ans.Note})
	return ans, time.Since(t)
}

// askShot writes a screenshot cropped around where the action acts (the
// element, or its points) beside the step, and returns its path; empty
// when there is no screen to crop.
func (s *Session) askShot(step int, id string, el *observe.Element, pts []action.Point) string {
	f := s.pendFrame
	if f == nil {
		return ""
	}
	const pad = 80
	var r action.Rect
	switch {
	case el != nil && el.Bounds != nil:
		b := *el.Bounds
		r = action.Rect{b[0] - pad, b[1] - pad, b[2] + pad, b[3] + pad}
	case len(pts) > 0:
		r = action.Rect{pts[0].X - 2*pad, pts[0].Y - 2*pad, pts[0].X + 2*pad, pts[0].Y + 2*pad}
	default:
		r = action.Rect{0, 0, f.Width, f.Height}
	}
	r = action.Rect{max(r[0], 0), max(r[1], 0), min(r[2], f.Width), min(r[3], f.Height)}
	if r.Dx() <= 0 || r.Dy() <= 0 {
		r = action.Rect{0, 0, f.Width, f.Height}
	}
	v, err := observe.NewView(f, &r, 0, 0, 0)
	if err != nil {
		return ""
	}
	data, err := v.Frame.PNG()
	if err != nil {
		return ""
	}
	p, err := s.tw.Attach(step, "ask-"+id+".png", data)
	if err != nil {
		return ""
	}
	return filepath.Join(s.tw.Dir(), filepath.FromSlash(p))
}

// denied records that the gate refused a step's action: the result names
// the rule (not the policy's text), and the controller is told at its
// next observation (Last).
func (s *Session) denied(step int, d *trace.PolicyDecision) *action.Result {
	msg := fmt.Sprintf("not performed: policy rule %q denies it", d.Rule)
	if d.Decision == string(policy.Ask) {
		why := "denied"
		if d.By != "" {
			why += " by " + d.By
		}
		if d.Note != "" {
			why += ": " + d.Note
		}
		msg = fmt.Sprintf("not performed: policy rule %q asks, and it was %s", d.Rule, why)
	}
	res := &action.Result{OK: false, Error: msg}
	s.tw.Record(trace.Record{Type: trace.TypeResult, Step: step, Result: res})
	s.tell(Event{Kind: EventResult, Step: step, Result: res})
	s.last = res
	if s.cfg.Verbose {
		fmt.Fprintf(s.cfg.Progress, "step %d: %s\n", step, termsafe.Line(msg))
	}
	return res
}

// deadlineNow is the episode's deadline, moved on by the time asks
// waited.
func (s *Session) deadlineNow() time.Time {
	return s.deadline.Add(time.Duration(s.paused.Load()))
}
