package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/codegirl-games/agentbox/agent"
	at "github.com/codegirl-games/agentbox/agent/anthropic/anthropictest"
	"github.com/codegirl-games/agentbox/observe"
)

// decideOnce makes one decision on a fresh 640x480 desk.
func decideOnce(t *testing.T, ag *Agent) (agent.Decision, error) {
	t.Helper()
	ag.Start(context.Background(), agent.Task{Text: "x", Width: 640, Height: 480})
	return ag.Decide(context.Background(), &observe.Observation{Step: 1, Screen: newDesk(640, 480).frame(), Running: true, ScreenshotRef: "screenshots/000001.png"})
}

// TestFailedRequestRecorded: a decision whose request failed still hands
// every attempt to the trace, as the OpenAI adapters do.
func TestFailedRequestRecorded(t *testing.T) {
	srv := at.New(t, func(r *at.Request) at.Reply {
		rep := at.APIError(500, "api_error", "Internal server error")
		rep.Header = map[string]string{"Retry-After-Ms": "1"}
		return rep
	})
	d, err := decideOnce(t, newAgent(t, srv, agent.Options{"max_retries": "2"}))
	if err == nil {
		t.Fatal("the decision did not fail")
	}
	var ex []struct {
		Status   int
		Request  json.RawMessage
		Response json.RawMessage
	}
	if jerr := json.Unmarshal(d.Files["exchange.json"], &ex); jerr != nil {
		t.Fatalf("exchange.json: %v (files %v)", jerr, d.Files)
	}
	if len(ex) != 3 {
		t.Fatalf("%d exchanges recorded, want all 3 attempts", len(ex))
	}
	for i, e := range ex {
		if e.Status != 500 || !bytes.Contains(e.Response, []byte("Internal server error")) ||
			!bytes.Contains(e.Request, []byte("<screenshot screenshots/000001.png>")) {
			t.Errorf("exchange %d: status %d, response %s", i, e.Status, e.Response)
		}
	}
	if d.Meta["http_attempts"] != 3 {
		t.Errorf("meta %v", d.Meta)
	}
}

// TestHTMLErrorOnce: a proxy's HTML error page is quoted once, as a
// bounded excerpt without markup, after the status.
func TestHTMLErrorOnce(t *testing.T) {
	page := "<html><head><title>502 Bad Gateway</title></head>\n<body>\n<center><h1>502 Bad Gateway</h1></center>\n<hr><center>nginx/1.25.3</center>\n" +
		strings.Repeat("<!-- padding to make the page large -->\n", 2000) + "</body></html>"
	srv := at.New(t, func(r *at.Request) at.Reply {
		return at.Reply{Status: 502, Header: map[string]string{"Content-Type": "text/html", "Retry-After-Ms": "1"}, Body: []byte(page)}
	})
	_, err := decideOnce(t, newAgent(t, srv, agent.Options{"max_retries": "1"}))
	if err == nil {
		t.Fatal("the decision did not fail")
	}
	msg := err.Error()
	want := "anthropic: HTTP 502 Bad Gateway after 2 attempts (max_retries 1): 502 Bad Gateway 502 Bad Gateway nginx/1.25.3"
	if msg != want {
		t.Errorf("message:\n%s\nwant:\n%s", msg, want)
	}
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 502 {
		t.Error("the SDK's error is not wrapped")
	}
}

// TestNotRetried: statuses that no retry can change are not retried.
func TestNotRetried(t *testing.T) {
	for _, code := range []int{400, 401, 403, 404, 422, 501} {
		srv := at.New(t, func(r *at.Request) at.Reply {
			return at.APIError(code, "error", http.StatusText(code))
		})
		var progress bytes.Buffer
		ag := newAgent(t, srv, agent.Options{"max_retries": "4"})
		ag.SetProgress(&progress)
		_, err := decideOnce(t, ag)
		if err == nil || !strings.Contains(err.Error(), "after 1 attempt") {
			t.Errorf("HTTP %d: err = %v", code, err)
		}
		if n := len(srv.Requests()); n != 1 || progress.Len() != 0 {
			t.Errorf("HTTP %d: %d requests, progress %q; want 1 and nothing", code, n, progress.String())
		}
	}
}

// TestRetryProgress: each retry is told, with the status, the wait and
// the attempt.
func TestRetryProgress(t *testing.T) {
	srv := at.New(t, func(r *at.Request) at.Reply {
		if r.N <= 2 {
			rep := at.APIError(503, "api_error", "busy")
			rep.Header = map[string]string{"Retry-After-Ms": "20"}
			return rep
		}
		return at.Answer("end_turn", at.TextBlock("fine"))
	})
	var progress bytes.Buffer
	ag := newAgent(t, srv, nil)
	ag.SetProgress(&progress)
	if _, err := decideOnce(t, ag); err != nil {
		t.Fatal(err)
	}
	line := "agentbox: model request failed (HTTP 503 Service Unavailable), retrying in 20ms (attempt %s of 5)\n"
	if want := strings.Replace(line, "%s", "2", 1) + strings.Replace(line, "%s", "3", 1); progress.String() != want {
		t.Errorf("progress:\n%s\nwant:\n%s", progress.String(), want)
	}
}

// TestPreflight: one GET /v1/models with the key; a refused key and a
// wrong URL are configuration errors, nothing listening is unreachable, a
// busy server passes.
func TestPreflight(t *testing.T) {
	ctx := context.Background()
	srv := at.New(t, func(r *at.Request) at.Reply { return at.Answer("end_turn") })
	if err := newAgent(t, srv, nil).Preflight(ctx); err != nil {
		t.Fatalf("healthy server: %v", err)
	}
	l := srv.Listings()
	if len(l) != 1 || l[0].Get("X-Api-Key") != testKey || l[0].Get("Anthropic-Version") == "" || len(srv.Requests()) != 0 {
		t.Fatalf("listings %v, %d messages requests", l, len(srv.Requests()))
	}
	for _, tt := range []struct {
		reply at.Reply
		want  string // "" passes
	}{
		{at.APIError(401, "authentication_error", "invalid x-api-key"), "HTTP 401 Unauthorized: authentication_error: invalid x-api-key (the key is read from ANTHROPIC_API_KEY)"},
		{at.APIError(404, "not_found_error", "Not found"), "HTTP 404 Not Found: not_found_error: Not found (is base_url right?)"},
		{at.APIError(529, "overloaded_error", "Overloaded"), ""},
		{at.APIError(429, "rate_limit_error", "slow down"), ""},
	} {
		srv.Models(func(*http.Request) at.Reply { return tt.reply })
		err := newAgent(t, srv, agent.Options{"max_retries": "4"}).Preflight(ctx)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("HTTP %d: %v, want a pass", tt.reply.Status, err)
		case tt.want != "" && (err == nil || !strings.HasSuffix(err.Error(), tt.want) || errors.Is(err, agent.ErrUnreachable)):
			t.Errorf("HTTP %d: %v, want …%s", tt.reply.Status, err, tt.want)
		}
	}
	if n := len(srv.Listings()); n != 5 {
		t.Errorf("%d listings, want one per preflight (no retries)", n)
	}
	url := srv.URL
	srv.Close()
	ag := newAgent(t, srv, nil)
	if err := ag.Preflight(ctx); !errors.Is(err, agent.ErrUnreachable) || !strings.Contains(err.Error(), url) {
		t.Errorf("nothing listening: %v", err)
	}
}
