// Package idle is the simplest agent: it watches the app for a while and
// finishes. It is useful to smoke-test an app ("does it start, what does it
// print, what does it show") and in tests.
package idle

import (
	"context"
	"fmt"
	"strconv"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/observe"
)

func init() {
	agent.Register("idle", func(opts agent.Options) (agent.Agent, error) { return New(opts) })
}

// Agent waits, then says done.
type Agent struct {
	ms    int
	waits int
}

// maxMS is the longest watch: one wait action's limit.
var maxMS = action.DefaultLimits(0, 0).MaxWaitMS

// New makes an idle agent. Option ms (default 1000, at most one wait's
// limit, 120000): how long to watch.
func New(opts agent.Options) (*Agent, error) {
	if err := agent.CheckOptions(opts, "ms"); err != nil {
		return nil, err
	}
	a := &Agent{ms: 1000}
	if v, ok := opts["ms"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxMS {
			return nil, fmt.Errorf("option ms: want 0–%d (one wait), got %q", maxMS, v)
		}
		a.ms = n
	}
	return a, nil
}

// Decide implements agent.Agent. It never claims success for an app that
// exited (it keeps waiting, and the runtime ends the run as app_exited),
// nor over a wait that failed.
func (a *Agent) Decide(_ context.Context, obs *observe.Observation) (agent.Decision, error) {
	if !obs.Running || (a.waits == 0 && a.ms > 0) {
		a.waits++
		return agent.Decision{Action: action.Action{Kind: action.Wait, MS: a.ms}, Message: fmt.Sprintf("watching for %dms", a.ms)}, nil
	}
	if l := obs.Last; l != nil && !l.OK {
		no := false
		msg := "watching failed: " + l.Error
		return agent.Decision{Action: action.Action{Kind: action.Done, Success: &no, Message: msg}, Message: msg}, nil
	}
	msg := fmt.Sprintf("watched the app for %dms", a.ms)
	return agent.Decision{Action: action.Action{Kind: action.Done, Message: msg}, Message: msg}, nil
}
