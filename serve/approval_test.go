package serve

import (
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/serve/api"
)

// TestApprovals: a create request's policy gates the client's actions;
// its ask waits for POST /v1/envs/{id}/approvals/{approval}: allowed, the
// action runs; denied, it does not and its result names the rule. A bad
// policy is refused at create, naming its line.
func TestApprovals(t *testing.T) {
	h := newHarness(t, nil, nil)
	a := h.do(req{method: "POST", path: "/v1/envs", body: []byte(`{"app": "game", "policy": "rules:\n  - {kind: clik, decision: ask}\n"}`)})
	if a.status != 422 || !strings.Contains(string(a.body), `policy:2: rule 1: field \"kind\": unknown action kind \"clik\" (did you mean click?)`) {
		t.Fatalf("create with a bad policy: %d %s", a.status, a.body)
	}

	e := h.create(testToken, `, "policy": "rules:\n  - {name: clicks ask, kind: click, decision: ask}\n"`)
	act := func() <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			ch <- h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/act", body: []byte(`{"action": "click", "x": 10, "y": 10}`)})
		}()
		return ch
	}
	// answerAsk answers ask id once it waits (404 until then).
	answerAsk := func(id string, allow bool) {
		t.Helper()
		body := []byte(`{"allow": false}`)
		if allow {
			body = []byte(`{"allow": true}`)
		}
		deadline := time.Now().Add(time.Minute)
		for {
			a := h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/approvals/" + id, body: body})
			if a.status == 204 {
				return
			}
			if a.status != 404 || time.Now().After(deadline) {
				t.Fatalf("answer %s: %d %s", id, a.status, a.body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	done := act()
	answerAsk("1", true)
	var st api.StepResponse
	r := <-done
	r.decode(t, &st)
	if r.status != 200 || !st.Result.OK {
		t.Fatalf("allowed click: %d %s", r.status, r.body)
	}

	done = act()
	answerAsk("2", false)
	r = <-done
	r.decode(t, &st)
	if r.status != 200 || st.Result.OK || !strings.Contains(st.Result.Error, `policy rule "clicks ask" asks, and it was denied by api`) {
		t.Fatalf("denied click: %d %s", r.status, r.body)
	}

	// An ask nobody waits for is not found.
	if a := h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/approvals/9", body: []byte(`{"allow": true}`)}); a.status != 404 {
		t.Errorf("answer to no ask: %d %s", a.status, a.body)
	}
}
