package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/openai/openai-go/v3"

	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/agent/openai/openaitest"
)

// both makes each agent against srv, for tests that hold for both.
func both(t *testing.T, srv *openaitest.Server, opts agent.Options) map[string]interface {
	agent.Agent
	agent.Preflighter
	agent.ProgressSetter
} {
	return map[string]interface {
		agent.Agent
		agent.Preflighter
		agent.ProgressSetter
	}{"openai": newResponses(t, srv, opts), "openai-chat": newChat(t, srv, opts)}
}

// TestHTMLErrorOnce: a proxy's HTML error page is quoted once, as a
// bounded excerpt without markup; every attempt is recorded.
func TestHTMLErrorOnce(t *testing.T) {
	setKey(t)
	page := "<html><head><title>502 Bad Gateway</title></head>\n<body>\n<center><h1>502 Bad Gateway</h1></center>\n<hr><center>nginx/1.25.3</center>\n" +
		strings.Repeat("<!-- padding to make the page large -->\n", 2000) + "</body></html>"
	srv := openaitest.New(t, func(s *openaitest.Server, r *openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Status: 502, Header: map[string]string{"Content-Type": "text/html", "Retry-After-Ms": "1"}, Body: []byte(page)}
	})
	for name, ag := range both(t, srv, agent.Options{"max_retries": "1"}) {
		d, err := ag.Decide(context.Background(), newSim(640, 480).observe())
		if err == nil {
			t.Fatalf("%s: the decision did not fail", name)
		}
		endpoint := map[string]string{"openai": "POST responses", "openai-chat": "POST chat/completions"}[name]
		if want := endpoint + ": HTTP 502 Bad Gateway: 502 Bad Gateway 502 Bad Gateway nginx/1.25.3 (2 attempts)"; err.Error() != want {
			t.Errorf("%s: message:\n%s\nwant:\n%s", name, err, want)
		}
		var api *sdk.Error
		if !errors.As(err, &api) || api.StatusCode != 502 {
			t.Errorf("%s: the SDK's error is not wrapped: %#v", name, err)
		}
		var ex []struct{ Status int }
		if jerr := json.Unmarshal(d.Files["exchange.json"], &ex); jerr != nil || len(ex) != 2 || ex[0].Status != 502 || ex[1].Status != 502 {
			t.Errorf("%s: recorded %+v (%v)", name, ex, jerr)
		}
	}
}

// TestNotRetried: statuses that no retry can change are sent once.
func TestNotRetried(t *testing.T) {
	setKey(t)
	for _, code := range []int{400, 401, 403, 404, 422, 501} {
		srv := openaitest.New(t, func(s *openaitest.Server, r *openaitest.Request) openaitest.Reply {
			return openaitest.Error(code, "invalid_request_error", "", http.StatusText(code))
		})
		for name, ag := range both(t, srv, agent.Options{"max_retries": "4"}) {
			before := len(srv.Requests())
			var progress bytes.Buffer
			ag.SetProgress(&progress)
			_, err := ag.Decide(context.Background(), newSim(640, 480).observe())
			if err == nil || !strings.Contains(err.Error(), "(1 attempt)") {
				t.Errorf("%s, HTTP %d: err = %v", name, code, err)
			}
			if n := len(srv.Requests()) - before; n != 1 || progress.Len() != 0 {
				t.Errorf("%s, HTTP %d: %d requests, progress %q; want 1 and nothing", name, code, n, progress.String())
			}
		}
	}
}

// TestRetryProgress: each retry is told on the progress writer.
func TestRetryProgress(t *testing.T) {
	setKey(t)
	srv := openaitest.New(t, func(s *openaitest.Server, r *openaitest.Request) openaitest.Reply {
		rep := openaitest.Error(503, "server_error", "", "busy")
		rep.Header = map[string]string{"Retry-After-Ms": "20"}
		return rep
	})
	for name, ag := range both(t, srv, agent.Options{"max_retries": "2"}) {
		var progress bytes.Buffer
		ag.SetProgress(&progress)
		if _, err := ag.Decide(context.Background(), newSim(640, 480).observe()); err == nil {
			t.Fatalf("%s: no error", name)
		}
		line := "agentbox: model request failed (HTTP 503 Service Unavailable), retrying in 20ms (attempt %s of 3)\n"
		if want := strings.Replace(line, "%s", "2", 1) + strings.Replace(line, "%s", "3", 1); progress.String() != want {
			t.Errorf("%s: progress:\n%s\nwant:\n%s", name, progress.String(), want)
		}
	}
}

// TestPreflight: one GET models with the key (none for openai-chat
// without one); a refused key and a wrong URL are configuration errors,
// nothing listening is unreachable, a busy server passes.
func TestPreflight(t *testing.T) {
	setKey(t)
	ctx := context.Background()
	srv := openaitest.New(t, func(s *openaitest.Server, r *openaitest.Request) openaitest.Reply {
		// Only openai-chat's fallback after a 404 listing asks here: the
		// wrong URL has no chat endpoint either.
		if string(r.Raw) != "{}" {
			s.Errorf("request %d: %s %s %.40q during a preflight", r.N, r.Method, r.Path, r.Raw)
		}
		return openaitest.Reply{Status: 404, Body: []byte("404 page not found")}
	})
	for name, ag := range both(t, srv, nil) {
		if err := ag.Preflight(ctx); err != nil {
			t.Errorf("%s: healthy server: %v", name, err)
		}
	}
	for _, h := range srv.Listings() {
		if h.Get("Authorization") != "Bearer "+testKey {
			t.Errorf("listing without the key: %v", h)
		}
	}
	for _, tt := range []struct {
		reply openaitest.Reply
		want  string // "" passes
	}{
		{openaitest.Error(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided"), "/v1/models: HTTP 401 Unauthorized: invalid_request_error: Incorrect API key provided (the key is read from OPENAI_API_KEY)"},
		{openaitest.Reply{Status: 404, Body: []byte("404 page not found")}, "/v1/models: HTTP 404 Not Found: 404 page not found (is base_url right?)"},
		{openaitest.Error(503, "server_error", "", "busy"), ""},
	} {
		srv.Models(func(*openaitest.Request) openaitest.Reply { return tt.reply })
		for name, ag := range both(t, srv, agent.Options{"max_retries": "4"}) {
			err := ag.Preflight(ctx)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("%s, HTTP %d: %v, want a pass", name, tt.reply.Status, err)
			case tt.want != "" && (err == nil || !strings.HasSuffix(err.Error(), tt.want) || errors.Is(err, agent.ErrUnreachable)):
				t.Errorf("%s, HTTP %d: %v, want …%s", name, tt.reply.Status, err, tt.want)
			}
		}
	}
	if n := len(srv.Listings()); n != 8 {
		t.Errorf("%d listings, want one per preflight (no retries)", n)
	}
	// openai-chat without a key sends none, and a 401 says no key is set.
	t.Setenv(KeyEnv, "")
	srv.Models(func(r *openaitest.Request) openaitest.Reply {
		if r.Auth != "" {
			t.Errorf("a key was sent: %q", r.Auth)
		}
		return openaitest.Error(401, "invalid_request_error", "", "a key is required")
	})
	if err := newChat(t, srv, nil).Preflight(ctx); err == nil || !strings.HasSuffix(err.Error(), "(no key: OPENAI_API_KEY is not set)") {
		t.Errorf("no key: %v", err)
	}
	srv.Check(t)
	url := srv.URL
	srv.Close()
	setKey(t)
	for name, ag := range both(t, srv, nil) {
		if err := ag.Preflight(ctx); !errors.Is(err, agent.ErrUnreachable) || !strings.Contains(err.Error(), url) {
			t.Errorf("%s: nothing listening: %v", name, err)
		}
	}
}

// TestChatPreflightWithoutListing: an OpenAI-compatible server without GET
// models passes when its chat endpoint is there (an empty request is
// refused with 400), and a wrong URL (404 there too) or a refused key
// does not.
func TestChatPreflightWithoutListing(t *testing.T) {
	setKey(t)
	ctx := context.Background()
	for _, tt := range []struct {
		chat int    // the chat endpoint's answer to the empty request
		want string // "" passes
	}{
		{400, ""},
		{422, ""},
		{404, "/v1/models: HTTP 404 Not Found: 404 page not found (is base_url right?)"},
		{401, "/v1/chat/completions: HTTP 401 Unauthorized: invalid_request_error: bad key (the key is read from OPENAI_API_KEY)"},
	} {
		srv := openaitest.New(t, func(s *openaitest.Server, r *openaitest.Request) openaitest.Reply {
			if r.Method != "POST" || r.Path != "/v1/chat/completions" || string(r.Raw) != "{}" || r.Auth != "Bearer "+testKey {
				s.Errorf("%s %s %q auth %q", r.Method, r.Path, r.Raw, r.Auth)
			}
			if tt.chat == 404 {
				return openaitest.Reply{Status: 404, Body: []byte("404 page not found")}
			}
			return openaitest.Error(tt.chat, "invalid_request_error", "", "bad key")
		})
		srv.Models(func(*openaitest.Request) openaitest.Reply {
			return openaitest.Reply{Status: 404, Body: []byte("404 page not found")}
		})
		err := newChat(t, srv, nil).Preflight(ctx)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("chat endpoint answers %d: %v, want a pass", tt.chat, err)
		case tt.want != "" && (err == nil || !strings.HasSuffix(err.Error(), tt.want)):
			t.Errorf("chat endpoint answers %d: %v, want …%s", tt.chat, err, tt.want)
		}
		if n := len(srv.Requests()); n != 1 {
			t.Errorf("chat endpoint answers %d: %d requests to it, want 1", tt.chat, n)
		}
		srv.Check(t)
	}
}
