package session

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// TestTeardownStopIsNotTheAppsExit: the app still running at the end is
// stopped by the teardown (SIGTERM); run.json and its app_exited event
// say agentbox stopped it, and the outcome stands. An app that exits
// during the run keeps its own exit.
func TestTeardownStopIsNotTheAppsExit(t *testing.T) {
	res, tr := runFake(t, &fakeBackend{termOnClose: true}, newDemo(t, "Right"), nil)
	if res.Outcome != trace.Success {
		t.Fatalf("result = %+v", res)
	}
	ex := tr.Run.AppExit
	if ex == nil || ex.Signal != "SIGTERM" || ex.Stopped != observe.StoppedAtEnd {
		t.Errorf("run.json app_exit = %+v, want SIGTERM %s", ex, observe.StoppedAtEnd)
	}
	found := false
	for _, r := range tr.Records {
		if r.Event == "app_exited" {
			found = r.Data["stopped"] == observe.StoppedAtEnd
		}
	}
	if !found {
		t.Error("the app_exited event does not say agentbox stopped the app")
	}

	res, tr = runFake(t, &fakeBackend{exitAfter: 1, termOnClose: true}, newDemo(t, "Right"), nil)
	if res.Reason != trace.ReasonAppExited || tr.Run.AppExit == nil || tr.Run.AppExit.Signal != "SIGSEGV" || tr.Run.AppExit.Stopped != "" {
		t.Errorf("an app that crashed: %s, app_exit %+v", res.Reason, tr.Run.AppExit)
	}
}

// closingAgent records when it is closed.
type closingAgent struct {
	scripted
	closes atomic.Int32
}

func (c *closingAgent) Close() error {
	c.closes.Add(1)
	return errors.New("closing failed")
}

// TestAgentClosedWithinTheRun: the session closes the agent (stopping an
// agent program) during the teardown, inside the run's time, on every
// path — also when the sandbox was never created.
func TestAgentClosedWithinTheRun(t *testing.T) {
	for _, tt := range []struct {
		name string
		b    *fakeBackend
	}{
		{"finished", &fakeBackend{}},
		{"sandbox failed", &fakeBackend{createErr: errors.New("no daemon")}},
	} {
		ag := &closingAgent{scripted: scripted{steps: []agent.Decision{{Action: action.Action{Kind: action.Done}}}}}
		_, tr := runFake(t, tt.b, ag, nil)
		if n := ag.closes.Load(); n != 1 {
			t.Errorf("%s: closed %d times during Run, want 1", tt.name, n)
		}
		if _, ok := tr.Run.Timings["agent_close"]; !ok {
			t.Errorf("%s: timings %v lack agent_close", tt.name, tr.Run.Timings)
		}
	}
	// An agent that is no Closer is left alone.
	_, tr := runFake(t, &fakeBackend{}, &scripted{steps: []agent.Decision{{Action: action.Action{Kind: action.Done}}}}, nil)
	if _, ok := tr.Run.Timings["agent_close"]; ok {
		t.Error("agent_close recorded for an agent without Close")
	}
}
