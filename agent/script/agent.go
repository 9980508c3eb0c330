package script

import (
	"context"
	"fmt"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
)

// pollInterval is how often a wait_for re-checks a condition that cannot be
// waited for inside the sandbox.
const pollInterval = 100 * time.Millisecond

// maxLines bounds the app output a script keeps for log checks.
const maxLines = 20000

// Agent plays a script: it performs the actions in order and evaluates the
// checks between them; the first failing check ends the run with outcome
// failure and reason check_failed.
type Agent struct {
	s     *Script
	idx   int
	named map[string]*action.Frame
	prev  *action.Frame
	lines []action.LogLine
	net   []action.NetEvent

	waiting   bool
	waitStart time.Time
	waitRef   *action.Frame
	passed    int
}

// New makes an agent that plays s.
func New(s *Script) *Agent {
	return &Agent{s: s, named: map[string]*action.Frame{}}
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
func (a *Agent) Decide(_ context.Context, obs *action.Observation) (agent.Decision, error) {
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
	var checked []CheckRecord
	meta := func() map[string]any {
		if len(checked) == 0 {
			return nil
		}
		return map[string]any{"checks": checked}
	}
	for a.idx < len(a.s.Steps) {
		st := a.s.Steps[a.idx]
		switch {
		case st.Remember != "":
			a.named[st.Remember] = obs.Screen
			a.idx++
		case st.Action != nil:
			a.idx++
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
			v := c.evaluate(world{obs: obs, ref: ref, lines: a.lines, net: a.net})
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
	msg := fmt.Sprintf("all %d steps of %s passed (%d checks)", len(a.s.Steps), a.s.File, a.passed)
	return agent.Decision{Action: action.Action{Kind: action.Done, Message: msg}, Message: msg, Meta: meta()}, nil
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
