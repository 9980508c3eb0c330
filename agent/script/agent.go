package script

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/internal/plural"
	"github.com/codegirl-games/agentbox/observe"
)

// pollInterval is how often a wait_for re-checks a condition that cannot be
// waited for inside the sandbox.
const pollInterval = 100 * time.Millisecond

// maxLines bounds the app output a script keeps for log checks.
const maxLines = 20000

// MaxSteps is the step limit of a script's run unless one is given:
// wait_for polls take steps, so the script's length is no bound; the
// run's timeout is.
const MaxSteps = 100_000

// Agent plays a script: it performs the actions in order and evaluates the
// checks between them; the first failing check ends the run with outcome
// failure and reason check_failed, and an action that failed (a wait
// until a condition that was not met, an action the sandbox refused) ends
// it with reason action_failed, unless its step is optional.
type Agent struct {
	s     *Script
	idx   int
	named map[string]*observe.Frame
	prev  *observe.Frame
	lines []observe.LogLine
	// acted is the action step whose result the next observation carries
	// (nil after a check's own polling wait).
	acted *Step
	net   []observe.NetEvent
	act   []observe.ActivityEvent // the trusted observer's events so far

	waiting   bool
	waitStart time.Time
	waitRef   *observe.Frame
	passed    int
	tolerated int // optional actions that failed
	// rereads counts the reads of the tree the current expect: element
	// asked for again because the last was cut for time (maxRereads).
	rereads int
}

// maxRereads bounds the extra reads of the tree one expect: element asks
// for when a read it does not hold on was cut for a reason another read
// may not have (Tree.Transient).
const maxRereads = 3

// New makes an agent that plays s.
func New(s *Script) *Agent {
	return &Agent{s: s, named: map[string]*observe.Frame{}}
}

// Keys of a decision's meta that a resume reads: the index of the script
// step the script goes on with after the decision, and the names of the
// screenshots it remembered at the decision's observation.
const (
	MetaNext       = "script_next"
	MetaRemembered = "script_remembered"
)

// Resume positions the agent at script step next (a MetaNext of a
// recorded decision), for a resumed run whose steps up to there were
// replayed; named are the screenshots the replayed steps remembered.
func (a *Agent) Resume(next int, named map[string]*observe.Frame) error {
	if next < 0 || next > len(a.s.Steps) {
		return fmt.Errorf("%s has %d steps; the recording went on at step %d: is it the same script?", a.s.File, len(a.s.Steps), next)
	}
	a.idx = next
	for k, f := range named {
		a.named[k] = f
	}
	return nil
}

// ActionRecord is how a failed action step is recorded in a decision's
// meta: "failed_action" when it ends the run, "optional_failed" when the
// step was optional and the script went on.
type ActionRecord struct {
	Step     int    `json:"step"`
	Line     int    `json:"line"`
	Action   string `json:"action"`
	Error    string `json:"error"`
	Optional bool   `json:"optional,omitempty"`
}

// CheckRecord is how a check is recorded in a decision's meta.
type CheckRecord struct {
	Step  int    `json:"step"`
	Line  int    `json:"line"`
	Check string `json:"check"` // "expect moved", "wait_for window"
	Verdict
	WaitedMS float64 `json:"waited_ms,omitempty"`
}

// Decide implements agent.Agent.
func (a *Agent) Decide(_ context.Context, obs *observe.Observation) (agent.Decision, error) {
	prev := a.prev
	a.prev = obs.Screen
	a.lines = append(a.lines, obs.Output...)
	if n := len(a.lines) - maxLines; n > 0 {
		a.lines = append(a.lines[:0], a.lines[n:]...)
	}
	a.net = append(a.net, obs.Network...)
	if n := len(a.net) - maxLines; n > 0 {
		a.net = append(a.net[:0], a.net[n:]...)
	}
	a.act = append(a.act, obs.Activity...)
	if n := len(a.act) - maxLines; n > 0 {
		a.act = append(a.act[:0], a.act[n:]...)
	}
	var checked []CheckRecord
	var tolerated *ActionRecord
	var remembered []string
	meta := func() map[string]any {
		// Where the script goes on after this decision, and the frames it
		// named at this observation: what a resume needs (Resume).
		m := map[string]any{MetaNext: a.idx}
		if len(remembered) > 0 {
			m[MetaRemembered] = remembered
		}
		if len(checked) > 0 {
			m["checks"] = checked
		}
		if tolerated != nil {
			m["optional_failed"] = *tolerated
		}
		return m
	}
	if st := a.acted; st != nil {
		a.acted = nil
		if l := obs.Last; l != nil && !l.OK {
			rec := ActionRecord{Step: st.N, Line: st.Line, Action: string(st.Action.Kind), Error: l.Error, Optional: st.Optional}
			if rec.Error == "" {
				rec.Error = "the action failed"
			}
			if !st.Optional {
				msg := fmt.Sprintf("%s:%d: %s failed: %s (a step that may fail says optional: true)", a.s.File, st.Line, st.Describe(), rec.Error)
				no := false
				return agent.Decision{
					Action:  action.Action{Kind: action.Done, Success: &no, Message: msg},
					Message: msg,
					Reason:  agent.ReasonActionFailed,
					Meta:    map[string]any{"failed_action": rec},
				}, nil
			}
			tolerated = &rec
			a.tolerated++
		}
	}
	for a.idx < len(a.s.Steps) {
		st := a.s.Steps[a.idx]
		switch {
		case st.Remember != "":
			a.named[st.Remember] = obs.Screen
			remembered = append(remembered, st.Remember)
			a.idx++
		case st.Action != nil:
			a.idx++
			a.acted = &a.s.Steps[a.idx-1]
			return agent.Decision{Action: *st.Action, Message: st.Describe(), Meta: meta()}, nil
		default:
			c := st.Check
			ref := prev
			if c.Since != "" {
				ref = a.named[c.Since]
			}
			if c.Wait {
				if !a.waiting {
					a.waiting, a.waitStart, a.waitRef = true, time.Now(), ref
				}
				ref = a.waitRef
			}
			v := c.evaluate(world{obs: obs, ref: ref, lines: a.lines, net: a.net, act: a.act})
			// A verdict on a tree read that was cut for time is no
			// verdict: what was not read may be there (or, for absent,
			// may not be gone). expect reads it again, up to maxRereads
			// times; wait_for goes on polling; a failure says the cut.
			if cuts := c.unsure(obs.Tree, v); len(cuts) > 0 {
				v.OK = false
				if !c.Wait && a.rereads < maxRereads {
					a.rereads++
					return agent.Decision{
						Action:  action.Action{Kind: action.Wait, MS: int(pollInterval / time.Millisecond)},
						Message: fmt.Sprintf("%s: the tree read was cut (%s); reading it again (%d of %d)", st.Describe(), strings.Join(cuts, "; "), a.rereads, maxRereads),
						Meta:    meta(),
					}, nil
				}
				v.Seen = withCut(v.Seen, cuts)
			}
			a.rereads = 0
			rec := CheckRecord{Step: st.N, Line: st.Line, Check: checkName(c), Verdict: v}
			if c.Wait {
				rec.WaitedMS = float64(time.Since(a.waitStart).Microseconds()) / 1000
			}
			if v.OK {
				a.waiting = false
				a.passed++
				checked = append(checked, rec)
				a.idx++
				continue
			}
			elapsed := time.Since(a.waitStart)
			if c.Wait && elapsed < time.Duration(c.TimeoutMS)*time.Millisecond {
				return agent.Decision{
					Action:  a.poll(c, time.Duration(c.TimeoutMS)*time.Millisecond-elapsed),
					Message: fmt.Sprintf("%s: waiting (%s; seen: %s)", st.Describe(), v.Expected, v.Seen),
					Meta:    meta(),
				}, nil
			}
			checked = append(checked, rec)
			msg := fmt.Sprintf("%s:%d: %s failed: expected %s; seen %s", a.s.File, st.Line, st.Describe(), v.Expected, v.Seen)
			if c.Wait {
				msg = fmt.Sprintf("%s:%d: %s timed out after %v: expected %s; seen %s", a.s.File, st.Line, st.Describe(), time.Duration(c.TimeoutMS)*time.Millisecond, v.Expected, v.Seen)
			}
			no := false
			return agent.Decision{
				Action:  action.Action{Kind: action.Done, Success: &no, Message: msg},
				Message: msg,
				Reason:  agent.ReasonCheckFailed,
				Meta:    map[string]any{"checks": checked, "failed": rec},
			}, nil
		}
	}
	all := "all " + plural.S(len(a.s.Steps), "step")
	if len(a.s.Steps) == 1 {
		all = "the one step"
	}
	checks := plural.S(a.passed, "check")
	if a.tolerated > 0 {
		checks += "; " + plural.Count(a.tolerated, "optional action", "optional actions") + " failed"
	}
	msg := fmt.Sprintf("%s of %s passed (%s)", all, a.s.File, checks)
	return agent.Decision{Action: action.Action{Kind: action.Done, Message: msg}, Message: msg, Meta: meta()}, nil
}

// WantsTree implements agent.TreeWanter: the tree is read for the
// observations that element checks look at, and for no other.
func (a *Agent) WantsTree() bool {
	for i := a.idx; i < len(a.s.Steps); i++ {
		st := a.s.Steps[i]
		if st.Action != nil {
			return false
		}
		if st.Check != nil && st.Check.Kind == CheckElement {
			return true
		}
	}
	return false
}

// poll is the action a waiting check takes before looking again: the
// sandbox waits for a window itself; everything else is looked at again
// after a short wait.
func (a *Agent) poll(c *Check, remaining time.Duration) action.Action {
	ms := int(remaining / time.Millisecond)
	if c.Kind == CheckWindow {
		return action.Action{Kind: action.Wait, Until: action.UntilWindow, Title: c.Title, MS: max(ms, 1)}
	}
	return action.Action{Kind: action.Wait, MS: max(1, min(ms, int(pollInterval/time.Millisecond)))}
}

func checkName(c *Check) string {
	if c.Wait {
		return "wait_for " + c.Kind
	}
	return "expect " + c.Kind
}
