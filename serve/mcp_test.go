package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/serve/api"
	"github.com/codegirl-games/agentbox/trace"
	"github.com/codegirl-games/agentbox/wire"
)

// bearer adds a token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// mcpConnect connects the SDK's client to the server's MCP endpoint with
// a token ("" for none).
func mcpConnect(t *testing.T, h *harness, token string) (*sdk.ClientSession, error) {
	t.Helper()
	hc := &http.Client{Transport: http.DefaultTransport}
	if token != "" {
		hc.Transport = bearer{token, http.DefaultTransport}
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: h.url + "/v1/mcp", HTTPClient: hc, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func mcpCall(t *testing.T, cs *sdk.ClientSession, name string, args any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func resultText(r *sdk.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// envs lists a token's environments over the API.
func (h *harness) envs(token string) []api.Environment {
	h.t.Helper()
	var list []api.Environment
	h.do(req{method: "GET", path: "/v1/envs", token: token}).decode(h.t, &list)
	return list
}

// TestMCPEndpoint: an MCP session over /v1/mcp drives an environment of
// its token's — created at its first tool call, listed by the API,
// stepped with the actor mcp, reset by launch — and ending the session
// closes it and finalises its traces.
func TestMCPEndpoint(t *testing.T) {
	h := newHarness(t, nil, nil)
	cs, err := mcpConnect(t, h, testToken)
	if err != nil {
		t.Fatal(err)
	}
	if res := mcpCall(t, cs, "screenshot", nil); res.IsError || len(res.Content) != 2 {
		t.Fatalf("screenshot: %s", resultText(res))
	}
	list := h.envs("")
	if len(list) != 1 || list[0].App != "game" || list[0].State != api.StateRunning || list[0].Episode != 1 {
		t.Fatalf("the MCP session's environment: %+v", list)
	}
	if other := h.envs(otherToken); len(other) != 0 {
		t.Errorf("another token sees the environment: %+v", other)
	}
	first := list[0]
	if res := mcpCall(t, cs, "click", map[string]any{"x": 9999, "y": 1}); !res.IsError || !strings.Contains(resultText(res), "outside the 640x480 screen") {
		t.Errorf("an off-screen click: %s", resultText(res))
	}
	var launched struct {
		Episode int    `json:"episode"`
		Trace   string `json:"trace"`
	}
	res := mcpCall(t, cs, "launch", map[string]any{"task": "again"})
	json.Unmarshal([]byte(resultText(res)), &launched)
	if res.IsError || launched.Episode != 2 || launched.Trace == first.Trace {
		t.Fatalf("launch: %s", resultText(res))
	}
	if list = h.envs(""); len(list) != 1 || list[0].ID != first.ID || list[0].Episode != 2 || list[0].Task != "again" {
		t.Errorf("after launch: %+v", list)
	}
	mcpCall(t, cs, "key", map[string]any{"keys": "Return"})
	cs.Close() // DELETE: the session ends
	waitFor(t, func() bool { return len(h.envs("")) == 0 })
	for _, tt := range []struct{ dir, reason string }{{first.Trace, trace.ReasonClosed}, {launched.Trace, trace.ReasonClosed}} {
		tr, err := trace.Open(tt.dir)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Incomplete || tr.Run.Reason != tt.reason || tr.Run.Agent.Name != trace.ActorMCP || tr.Run.Agent.Options["client"] != "test 1" {
			t.Errorf("%s: incomplete %v, reason %s, agent %+v", tt.dir, tr.Incomplete, tr.Run.Reason, tr.Run.Agent)
		}
		for _, s := range tr.Steps {
			if s.Actor != trace.ActorMCP {
				t.Errorf("%s step %d: actor %q", tt.dir, s.Step, s.Actor)
			}
		}
	}
}

// TestMCPRefused: the endpoint is behind the API's defences — no token,
// a wrong one, another host, another origin — and a session answers only
// the token that made it.
func TestMCPRefused(t *testing.T) {
	h := newHarness(t, nil, nil)
	initialize := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	post := func(token string, header map[string]string) (*http.Response, string) {
		hr, _ := http.NewRequest("POST", h.url+"/v1/mcp", strings.NewReader(string(initialize)))
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			hr.Header.Set("Authorization", "Bearer "+token)
		}
		for k, v := range header {
			if k == "Host" {
				hr.Host = v
				continue
			}
			hr.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		resp.Body.Close()
		return resp, b.String()
	}
	for _, tt := range []struct {
		name   string
		token  string
		header map[string]string
		status int
		code   string
	}{
		{"no token", "", nil, 401, api.CodeUnauthorized},
		{"a wrong token", "wrong-token-0123456789abcdef", nil, 401, api.CodeUnauthorized},
		{"another host", testToken, map[string]string{"Host": "evil.example"}, 403, api.CodeBadHost},
		{"another origin", testToken, map[string]string{"Origin": "http://evil.example"}, 403, api.CodeCrossOrigin},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := post(tt.token, tt.header)
			var eb api.ErrorBody
			json.Unmarshal([]byte(body), &eb)
			if resp.StatusCode != tt.status || eb.Error.Code != tt.code {
				t.Errorf("%d %s, want %d %s", resp.StatusCode, body, tt.status, tt.code)
			}
		})
	}
	if _, err := mcpConnect(t, h, ""); err == nil {
		t.Error("the SDK's client connected without a token")
	}
	// A session is its token's: another token cannot use its ID.
	cs, err := mcpConnect(t, h, testToken)
	if err != nil {
		t.Fatal(err)
	}
	hr, _ := http.NewRequest("POST", h.url+"/v1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"screenshot","arguments":{}}}`))
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json, text/event-stream")
	hr.Header.Set("Authorization", "Bearer "+otherToken)
	hr.Header.Set("Mcp-Session-Id", cs.ID())
	hr.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("another token's request in the session: %s", resp.Status)
	}
	if list := h.envs(otherToken); len(list) != 0 {
		t.Errorf("it made an environment: %+v", list)
	}
	// The session's own token still works.
	if res := mcpCall(t, cs, "state", nil); res.IsError {
		t.Errorf("state: %s", resultText(res))
	}
}

// TestMCPLimits: an MCP session's environment counts against its token's
// environments; a token holds at most 16 MCP sessions.
func TestMCPLimits(t *testing.T) {
	h := newHarness(t, nil, nil) // 3 environments per token
	for range 3 {
		h.create("", "")
	}
	cs, err := mcpConnect(t, h, testToken)
	if err != nil {
		t.Fatal(err)
	}
	if res := mcpCall(t, cs, "screenshot", nil); !res.IsError || !strings.Contains(resultText(res), "this token holds 3 live environments") {
		t.Errorf("a fourth environment: %s", resultText(res))
	}
	sessions := []*sdk.ClientSession{cs}
	for i := 1; i < 16; i++ {
		cs, err := mcpConnect(t, h, testToken)
		if err != nil {
			t.Fatalf("session %d: %v", i+1, err)
		}
		sessions = append(sessions, cs)
	}
	if _, err := mcpConnect(t, h, testToken); err == nil {
		t.Error("a 17th session was made")
	}
	// The answer says why (the SDK's client reports the status only).
	hr, _ := http.NewRequest("POST", h.url+"/v1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json, text/event-stream")
	hr.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || !strings.Contains(string(body), "this token holds 16 MCP sessions, the most it may") {
		t.Errorf("a 17th session: %s %s", resp.Status, body)
	}
	if _, err := mcpConnect(t, h, otherToken); err != nil {
		t.Errorf("another token's first session: %v", err)
	}
	sessions[0].Close()
	waitFor(t, func() bool {
		cs, err := mcpConnect(t, h, testToken)
		if err == nil {
			cs.Close()
		}
		return err == nil
	})
}

// TestMCPLease: an MCP session's environment is leased like any other:
// nothing for the lease and it is closed; the next call says so, and
// launch starts a fresh one. read_output reads on from where the client
// was into the new environment's events, and says when output of the old
// one went unread (a positive control: none unread, no gap).
func TestMCPLease(t *testing.T) {
	for _, unread := range []bool{false, true} {
		t.Run(fmt.Sprintf("unread output %v", unread), func(t *testing.T) {
			guest := func() *guestenvtest.Guest {
				return &guestenvtest.Guest{OnAct: func(w *guestenvtest.Writer) {
					w.Event(wire.EventOutput, wire.OutputEvent{Stream: observe.Stdout}, []byte("acted\n"))
				}}
			}
			// The lease runs from each call: long enough that the calls
			// before the wait below are never more than it apart on a
			// busy machine (or the environment closes early and the
			// unread output is never printed), short enough to wait out.
			h := newHarness(t, guest, func(o *Options) { o.Lease = 2 * time.Second })
			cs, err := mcpConnect(t, h, testToken)
			if err != nil {
				t.Fatal(err)
			}
			mcpCall(t, cs, "screenshot", nil)
			var out struct {
				Next   int64 `json:"next"`
				Gap    bool  `json:"gap"`
				Output []struct {
					Started string `json:"started"`
					Text    string `json:"text"`
				} `json:"output"`
			}
			json.Unmarshal([]byte(resultText(mcpCall(t, cs, "read_output", nil))), &out)
			next := out.Next
			if next == 0 || len(out.Output) == 0 || out.Output[0].Started == "" {
				t.Fatalf("read_output: %+v", out)
			}
			first := out.Output[0].Started
			if unread {
				mcpCall(t, cs, "key", map[string]any{"keys": "a"}) // the app prints "acted"
			}
			waitFor(t, func() bool { return len(h.envs("")) == 0 })
			res := mcpCall(t, cs, "key", map[string]any{"keys": "a"})
			if !res.IsError || !strings.Contains(resultText(res), "was closed (lease_expired") || !strings.Contains(resultText(res), "Call launch") {
				t.Errorf("after the lease: %s", resultText(res))
			}
			if res := mcpCall(t, cs, "launch", nil); res.IsError {
				t.Fatalf("launch: %s", resultText(res))
			}
			out.Output = nil
			json.Unmarshal([]byte(resultText(mcpCall(t, cs, "read_output", map[string]any{"after": next}))), &out)
			if out.Gap != unread || out.Next <= next || len(out.Output) != 1 || out.Output[0].Started == "" || out.Output[0].Started == first {
				t.Errorf("reading on into the new environment from %d: %+v", next, out)
			}
		})
	}
}

// TestMCPShutdown: the server's shutdown ends every MCP session (the
// client's open stream too) and closes their environments as
// interrupted; it does not wait for the clients.
func TestMCPShutdown(t *testing.T) {
	h := newHarness(t, nil, nil)
	var traces []string
	for i := range 2 {
		cs, err := mcpConnect(t, h, testToken)
		if err != nil {
			t.Fatal(err)
		}
		var la struct {
			Trace string `json:"trace"`
		}
		res := mcpCall(t, cs, "launch", map[string]any{"task": fmt.Sprint(i)})
		json.Unmarshal([]byte(resultText(res)), &la)
		traces = append(traces, la.Trace)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	for _, dir := range traces {
		tr, err := trace.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Incomplete || tr.Run.Outcome != trace.Interrupted || tr.Run.Reason != trace.ReasonSignal {
			t.Errorf("%s: incomplete %v, %s/%s", dir, tr.Incomplete, tr.Run.Outcome, tr.Run.Reason)
		}
	}
}

// TestMCPAsks: over /v1/mcp the registered app's manifest policy gates
// the client's steps, and its asks go to the client by elicitation (the
// streamable HTTP handler keeps sessions, so the SDK's client negotiates
// 2025-11-25: elicitation/create during the call); a client that
// declared no elicitation has them denied.
func TestMCPAsks(t *testing.T) {
	p, err := policy.Parse("policy.yaml", []byte("rules:\n  - name: clicks ask\n    kind: click\n    decision: ask\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, nil, func(o *Options) { o.AppPolicies = map[string]*policy.Policy{"game": p} })
	var answers []bool
	var mu sync.Mutex
	elicit := func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		mu.Lock()
		defer mu.Unlock()
		allow := len(answers) == 0 // the first yes, then no
		answers = append(answers, allow)
		return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"allow": allow}}, nil
	}
	hc := &http.Client{Transport: bearer{testToken, http.DefaultTransport}}
	connect := func(opts *sdk.ClientOptions) *sdk.ClientSession {
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, opts).Connect(t.Context(),
			&sdk.StreamableClientTransport{Endpoint: h.url + "/v1/mcp", HTTPClient: hc, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	cs := connect(&sdk.ClientOptions{ElicitationHandler: elicit})
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Logf("the protocol negotiated is %s", v)
	}
	if res := mcpCall(t, cs, "click", map[string]any{"x": 10, "y": 10}); res.IsError {
		t.Errorf("an allowed click: %s", resultText(res))
	}
	if res := mcpCall(t, cs, "click", map[string]any{"x": 10, "y": 10}); !res.IsError || !strings.Contains(resultText(res), `policy rule "clicks ask" asks, and it was denied by mcp`) {
		t.Errorf("a denied click: %s", resultText(res))
	}
	if res := mcpCall(t, cs, "key", map[string]any{"keys": "a"}); res.IsError {
		t.Errorf("a key (not asked): %s", resultText(res))
	}
	mu.Lock()
	if len(answers) != 2 {
		t.Errorf("asked %d times, want 2", len(answers))
	}
	mu.Unlock()
	plain := connect(nil)
	if res := mcpCall(t, plain, "click", map[string]any{"x": 10, "y": 10}); !res.IsError || !strings.Contains(resultText(res), "declared no elicitation") {
		t.Errorf("a client without elicitation: %s", resultText(res))
	}
}
