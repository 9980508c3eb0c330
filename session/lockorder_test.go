package session

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// busyAgent decides at once, forever: a key down, a key up, a short wait.
type busyAgent struct{ n atomic.Int64 }

func (a *busyAgent) Decide(ctx context.Context, obs *observe.Observation) (agent.Decision, error) {
	switch a.n.Add(1) % 3 {
	case 0:
		return agent.Decision{Action: action.Action{Kind: action.KeyDown, Key: "Right"}}, nil
	case 1:
		return agent.Decision{Action: action.Action{Kind: action.KeyUp, Key: "Right"}}, nil
	}
	return agent.Decision{Action: action.Action{Kind: action.Wait, MS: 1}}, nil
}

// TestLockOrder runs every path that takes the session's locks at once —
// an agent that decides in no time with the app frozen while it decides,
// watchers looking (Peek), a person taking over, acting and handing back,
// events into an EventLog, and Close in the middle of it all — with
// internal/lockrank's checking on (TestMain): a lock taken out of the
// order written in lockorder.go panics the test binary, naming both
// locks. Run it under -race too (make test-race: the CI does).
func TestLockOrder(t *testing.T) {
	for round := range 3 {
		log := NewEventLog(1 << 20)
		b := &freezeBackend{}
		s, done, _ := runWith(t, b, &busyAgent{}, func(c *Config) {
			c.Listener = log.Add
			c.MaxSteps = 100000
		}, freezing)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 2 { // watchers
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					s.Peek(t.Context())
					s.Control()
				}
			})
		}
		wg.Go(func() { // a person, again and again
			for {
				select {
				case <-stop:
					return
				default:
				}
				if s.TakeOver("tester") == nil {
					s.Act(t.Context(), Step{Actor: trace.ActorHuman, Action: action.Action{Kind: action.KeyDown, Key: "Left"}})
					s.Act(t.Context(), Step{Actor: trace.ActorHuman, Action: action.Action{Kind: action.KeyUp, Key: "Left"}})
					s.HandBack("")
				}
				time.Sleep(20 * time.Millisecond) // the agent drives in between
			}
		})
		wg.Go(func() { // a reader of the events
			var after int64
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
				evs, _, _ := log.Read(ctx, after, 64)
				cancel()
				if len(evs) > 0 {
					after = evs[len(evs)-1].Seq
				}
			}
		})
		time.Sleep(time.Duration(300+200*round) * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), time.Minute)
		res := s.Close(ctx, End{Outcome: trace.Interrupted, Reason: trace.ReasonClosed, Message: "the test closed it"})
		cancel()
		close(stop)
		wg.Wait()
		waitResult(t, done)
		log.Close()
		if res.Steps == 0 {
			t.Errorf("round %d: no steps were taken: %+v", round, res)
		}
		t.Logf("round %d: %d steps, %s", round, res.Steps, res.Outcome)
	}
}
