package eval

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/agent/llm"
	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// modelServer is a model that takes 30 ms an answer and counts how many
// requests it serves at once.
var modelServer struct {
	url             string
	inFlight, most  atomic.Int32
	requestsStarted atomic.Int32
}

// queueAgent asks modelServer once a step through the queue it was given,
// then finishes at its third step.
type queueAgent struct {
	slot  llm.QueueSlot
	steps int
}

func (a *queueAgent) SetQueue(q *llm.Queue) { a.slot.SetQueue(q) }

func (a *queueAgent) Decide(ctx context.Context, _ *observe.Observation) (agent.Decision, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", modelServer.url, nil)
	if err != nil {
		return agent.Decision{}, err
	}
	resp, err := a.slot.Middleware(req, http.DefaultClient.Do)
	if err != nil {
		return agent.Decision{}, err
	}
	resp.Body.Close()
	if a.steps++; a.steps >= 3 {
		return agent.Decision{Action: action.Action{Kind: action.Done}}, nil
	}
	return agent.Decision{Action: action.Action{Kind: action.Wait, MS: 1}}, nil
}

func init() {
	agent.Register("queue-test", func(agent.Options) (agent.Agent, error) { return &queueAgent{}, nil })
}

// TestModelConcurrency: eval --model-concurrency 1 gives every episode's
// model agent the one queue: four episodes at once never have more than
// one model request in flight; steps that waited record queue_ms (and
// model_ms) apart; summary.json counts the queue's requests.
func TestModelConcurrency(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		modelServer.requestsStarted.Add(1)
		n := modelServer.inFlight.Add(1)
		for m := modelServer.most.Load(); n > m && !modelServer.most.CompareAndSwap(m, n); m = modelServer.most.Load() {
		}
		time.Sleep(30 * time.Millisecond)
		modelServer.inFlight.Add(-1)
	}))
	defer srv.Close()
	modelServer.url = srv.URL
	modelServer.requestsStarted.Store(0) // counted afresh each run (go test -count)
	modelServer.most.Store(0)

	dir := t.TempDir()
	writeFile(t, dir, "app/agentbox.json", `{"command": "xterm"}`)
	s, err := Load(writeFile(t, dir, "suite.yaml", "tasks:\n  - {name: q, target: app, agent: queue-test, episodes: 4}\n"))
	if err != nil {
		t.Fatal(err)
	}
	b := &guestenvtest.Backend{New: func() *guestenvtest.Guest { return &guestenvtest.Guest{} }}
	out := filepath.Join(dir, "out")
	sum, err := Run(t.Context(), s, Options{Backend: b, Out: out, RunID: "q", Parallel: 4, ModelConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Totals.Passed != 4 {
		t.Fatalf("passed %d of 4: %+v", sum.Totals.Passed, sum.Episodes)
	}
	if m := modelServer.most.Load(); m != 1 {
		t.Errorf("%d model requests at once through --model-concurrency 1", m)
	}
	if q := sum.ModelQueue; q == nil || q.Concurrency != 1 || q.Requests != int64(modelServer.requestsStarted.Load()) || q.Requests != 12 || q.WaitedMS <= 0 {
		t.Errorf("summary's model_queue %+v; %d requests served", sum.ModelQueue, modelServer.requestsStarted.Load())
	}
	queued := 0
	for _, ep := range sum.Episodes {
		tr, err := trace.Open(filepath.Join(out, ep.Trace))
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range tr.Steps {
			if d := st.Decision; d != nil && d.QueueMS > 0 {
				queued++
				if d.ModelMS <= 0 || d.QueueMS+d.ModelMS > d.LatencyMS+0.01 {
					t.Errorf("step %d: queue %v ms + model %v ms, latency %v ms", st.Step, d.QueueMS, d.ModelMS, d.LatencyMS)
				}
			}
		}
	}
	if queued == 0 {
		t.Error("no step recorded a queue wait, though four episodes shared one slot")
	}
}
