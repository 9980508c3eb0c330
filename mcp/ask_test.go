package mcp

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/session"
)

// askPolicy asks before every click, as a sensitive rule (asked every
// time, never granted).
const askPolicy = `rules:
  - name: clicks ask
    kind: click
    decision: ask
    sensitive: true
`

// gated configures the episodes with askPolicy and an ask timeout.
func gated(t *testing.T, timeout time.Duration) func(*session.Config) {
	t.Helper()
	p, err := policy.Parse("policy.yaml", []byte(askPolicy))
	if err != nil {
		t.Fatal(err)
	}
	return func(c *session.Config) {
		c.Policy = p
		c.AskTimeout = timeout
		c.Approver = policy.DenyAll{} // replaced by the client's asker
	}
}

// elicitor is a client's elicitation handler that answers with action
// (and allow, when accepted), and records the messages it was asked.
type elicitor struct {
	action string
	allow  bool
	block  bool // never answers: waits for its request's end

	mu   sync.Mutex
	asks []string
}

func (e *elicitor) handle(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	e.mu.Lock()
	e.asks = append(e.asks, req.Params.Message)
	e.mu.Unlock()
	if e.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	r := &sdk.ElicitResult{Action: e.action}
	if e.action == "accept" {
		r.Content = map[string]any{"allow": e.allow}
	}
	return r, nil
}

func (e *elicitor) messages() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.asks...)
}

// TestAskByElicitation: a click the policy asks about is put to the
// client — by multi round-trip requests on the latest protocol, by
// elicitation/create on 2025-06-18 — and runs when it allows; a
// "no", a decline, a cancel deny it, and the result names the rule; each
// click is asked (a sensitive rule has no standing grant).
func TestAskByElicitation(t *testing.T) {
	for _, version := range []string{"", "2025-06-18"} {
		for _, tt := range []struct {
			action string
			allow  bool
			want   string // in the denied result; "" for allowed
		}{
			{"accept", true, ""},
			{"accept", false, `not performed: policy rule "clicks ask" asks, and it was denied by mcp`},
			{"decline", false, `denied by mcp: declined`},
			{"cancel", false, `denied by mcp: cancelled`},
		} {
			name := version + "/" + tt.action
			if version == "" {
				name = "latest/" + tt.action
			}
			t.Run(name, func(t *testing.T) {
				el := &elicitor{action: tt.action, allow: tt.allow}
				f := newFixtureClient(t, nil, gated(t, time.Minute), &sdk.ClientOptions{ElicitationHandler: el.handle},
					&sdk.ClientSessionOptions{ProtocolVersion: version})
				wantVersion := version
				if version == "" {
					wantVersion = "2026-07-28"
				}
				if got := f.cs.InitializeResult().ProtocolVersion; got != wantVersion {
					t.Fatalf("protocol %s, want %s", got, wantVersion)
				}
				for i := range 2 {
					res := f.call(t, "click", map[string]any{"x": 10, "y": 20})
					switch {
					case tt.want == "" && res.IsError:
						t.Errorf("click %d: %s", i, text(res))
					case tt.want != "" && (!res.IsError || !strings.Contains(text(res), tt.want)):
						t.Errorf("click %d: %s; want an error with %q", i, text(res), tt.want)
					}
				}
				msgs := el.messages()
				if len(msgs) != 2 {
					t.Fatalf("asked %d times, want 2 (a sensitive rule is asked every time)", len(msgs))
				}
				for _, want := range []string{`rule "clicks ask"`, "sensitive", `<untrusted source="action">`, "click 10,20"} {
					if !strings.Contains(msgs[0], want) {
						t.Errorf("the question %q lacks %q", msgs[0], want)
					}
				}
				// A step that is not gated is not asked.
				if res := f.call(t, "wait", map[string]any{"ms": 1}); res.IsError {
					t.Errorf("wait: %s", text(res))
				}
				if n := len(el.messages()); n != 2 {
					t.Errorf("asked %d times after a wait", n)
				}
				steps, err := os.ReadFile(filepath.Join(f.out, "episode-1", "steps.jsonl"))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(steps), `"by":"mcp"`) {
					t.Errorf("the trace does not say the client answered:\n%s", steps)
				}
			})
		}
	}
}

// TestAskWithoutElicitation: a client that declared no elicitation is not
// asked: the ask is denied at once, on either protocol.
func TestAskWithoutElicitation(t *testing.T) {
	for _, version := range []string{"", "2025-06-18"} {
		f := newFixtureClient(t, nil, gated(t, time.Hour), nil, &sdk.ClientSessionOptions{ProtocolVersion: version})
		res := f.call(t, "click", map[string]any{"x": 10, "y": 20})
		if want := `policy rule "clicks ask" asks, and it was denied by mcp: the MCP client cannot be asked (it declared no elicitation)`; !res.IsError || !strings.Contains(text(res), want) {
			t.Errorf("%q: %s; want %q", version, text(res), want)
		}
		// Not gated: runs.
		if res := f.call(t, "key", map[string]any{"keys": "a"}); res.IsError {
			t.Errorf("%q: key: %s", version, text(res))
		}
	}
}

// manualClient is a client that handles multi round-trip results itself.
func manualClient(t *testing.T, timeout time.Duration) *fixture {
	t.Helper()
	el := &elicitor{action: "accept", allow: true}
	return newFixtureClient(t, nil, gated(t, timeout), &sdk.ClientOptions{
		ElicitationHandler: el.handle,
		MultiRoundTrip:     &sdk.MultiRoundTripOptions{Disabled: true},
	}, nil)
}

// firstRound is a click's first answer: a question, with the request
// state naming the pending step.
func firstRound(t *testing.T, f *fixture) *sdk.CallToolResult {
	t.Helper()
	res := f.call(t, "click", map[string]any{"x": 10, "y": 20})
	if !res.NeedsInput() || res.RequestState == "" || len(res.InputRequests) != 1 {
		t.Fatalf("the first round: %+v (%s)", res, text(res))
	}
	if _, ok := res.InputRequests[askKey].(*sdk.ElicitParams); !ok {
		t.Fatalf("the input request: %#v", res.InputRequests)
	}
	return res
}

func retry(t *testing.T, f *fixture, state string, answer sdk.InputResponse) *sdk.CallToolResult {
	t.Helper()
	p := &sdk.CallToolParams{Name: "click", Arguments: map[string]any{"x": 10, "y": 20}, RequestState: state}
	if answer != nil {
		p.InputResponses = sdk.InputResponseMap{askKey: answer}
	}
	res, err := f.cs.CallTool(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestAskStaleState: a retry whose request state names no pending step
// (made up, already answered) is a tool error saying so; the pending step
// still takes the right one.
func TestAskStaleState(t *testing.T) {
	f := manualClient(t, time.Hour)
	first := firstRound(t, f)
	if res := retry(t, f, "ask-00000000000000000000000000000000", &sdk.ElicitResult{Action: "accept", Content: map[string]any{"allow": true}}); !res.IsError || !strings.Contains(text(res), "names no step of this session waiting on an answer") {
		t.Errorf("a made-up state: %s", text(res))
	}
	res := retry(t, f, first.RequestState, &sdk.ElicitResult{Action: "accept", Content: map[string]any{"allow": true}})
	if res.IsError {
		t.Fatalf("the right state: %s", text(res))
	}
	if res := retry(t, f, first.RequestState, &sdk.ElicitResult{Action: "accept", Content: map[string]any{"allow": true}}); !res.IsError || !strings.Contains(text(res), "names no step") {
		t.Errorf("the state again: %s", text(res))
	}
	// A retry without an answer denies.
	second := firstRound(t, f)
	if res := retry(t, f, second.RequestState, nil); !res.IsError || !strings.Contains(text(res), "carried no answer") {
		t.Errorf("a retry without an answer: %s", text(res))
	}
	// Another call instead of the retry denies the ask, and runs.
	third := firstRound(t, f)
	if res := f.call(t, "key", map[string]any{"keys": "a"}); res.IsError {
		t.Errorf("a key instead of the retry: %s", text(res))
	}
	if res := retry(t, f, third.RequestState, &sdk.ElicitResult{Action: "accept", Content: map[string]any{"allow": true}}); !res.IsError || !strings.Contains(text(res), "names no step") {
		t.Errorf("the retry after another call: %s", text(res))
	}
	steps, err := os.ReadFile(filepath.Join(f.out, "episode-1", "steps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(steps), "the client called another tool instead of answering") {
		t.Errorf("the trace does not say why the third ask was denied:\n%s", steps)
	}
}

// TestAskTimeout: an ask nobody answers within the ask's timeout is
// denied — a client that never retries (the latest protocol), and one
// whose elicitation never answers (2025-06-18).
func TestAskTimeout(t *testing.T) {
	t.Run("latest", func(t *testing.T) {
		f := manualClient(t, 200*time.Millisecond)
		first := firstRound(t, f)
		// The step ends by itself, denied; the late retry reads it.
		waitAnswered(t, f)
		res := retry(t, f, first.RequestState, &sdk.ElicitResult{Action: "accept", Content: map[string]any{"allow": true}})
		if !res.IsError || !strings.Contains(text(res), "denied by mcp: no answer in time") {
			t.Errorf("a late retry: %s", text(res))
		}
	})
	t.Run("2025-06-18", func(t *testing.T) {
		el := &elicitor{block: true}
		f := newFixtureClient(t, nil, gated(t, 200*time.Millisecond), &sdk.ClientOptions{ElicitationHandler: el.handle},
			&sdk.ClientSessionOptions{ProtocolVersion: "2025-06-18"})
		res := f.call(t, "click", map[string]any{"x": 10, "y": 20})
		if !res.IsError || !strings.Contains(text(res), "denied by mcp: no answer in time") {
			t.Errorf("an unanswered elicitation: %s", text(res))
		}
	})
}

// waitAnswered waits until the episode's ask has its answer (an approval
// event with an answer).
func waitAnswered(t *testing.T, f *fixture) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var after int64
	for {
		evs, _, err := f.local.Events().Log.Read(ctx, after, 64)
		if err != nil {
			t.Fatalf("no answer to the ask: %v", err)
		}
		for _, ev := range evs {
			after = ev.Seq
			if ev.Kind == session.EventApproval && ev.Answer != "" {
				return
			}
		}
	}
}
