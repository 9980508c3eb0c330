package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	at "github.com/codegirl-games/agentbox/agent/anthropic/anthropictest"
	"github.com/codegirl-games/agentbox/agent/openai/openaitest"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
)

// What a user sees when the model endpoint is wrong or failing, through
// the real CLI.

// notStarted fails unless the run stopped before anything started: no
// trace directory, no "run …" line.
func notStarted(t *testing.T, r result) {
	t.Helper()
	if _, err := os.Stat(r.dir); !os.IsNotExist(err) {
		t.Errorf("a trace directory was created (%v): a run started", err)
	}
	if strings.Contains(r.stderr, "agentbox: run ") || !strings.Contains(r.stderr, "nothing was started") {
		t.Errorf("the run started, or the message does not say nothing was:\n%s", r)
	}
}

// TestModelPreflight: before any sandbox, the model agents try the
// endpoint once (GET models with the key): a refused key and a wrong URL
// are usage errors (exit 2), nothing answering is exit 3 — and no request
// to the model is made.
func TestModelPreflight(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	t.Run("anthropic", func(t *testing.T) {
		srv := at.New(t, func(r *at.Request) at.Reply {
			t.Errorf("request %d to the model during a failed preflight", r.N)
			return at.Answer("end_turn")
		})
		for _, tt := range []struct {
			name   string
			models at.Reply
			url    string
			code   int
			want   string
		}{
			{"bad key", at.APIError(401, "authentication_error", "invalid x-api-key"), "", 2,
				"/v1/models?limit=1: HTTP 401 Unauthorized: authentication_error: invalid x-api-key (the key is read from ANTHROPIC_API_KEY); nothing was started"},
			{"wrong path", at.APIError(404, "not_found_error", "Not Found"), srv.URL + "/api", 2, "HTTP 404 Not Found"},
			{"nothing listening", at.Reply{}, deadURL, 3, "agent anthropic: no answer from " + deadURL + "/v1/models?limit=1: dial tcp"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				srv.Models(func(*http.Request) at.Reply { return tt.models })
				url := srv.URL
				if tt.url != "" {
					url = tt.url
				}
				t.Setenv("ANTHROPIC_API_KEY", anthropicKey)
				r := agentbox(t, "run", moverApp(t, ""), "--agent", "anthropic", "--agent-opt", "base_url="+url)
				if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
					t.Errorf("want exit %d naming %q:\n%s", tt.code, tt.want, r)
				}
				notStarted(t, r)
				if strings.Contains(r.stdout+r.stderr, anthropicKey) {
					t.Error("the key is in the output")
				}
			})
		}
	})
	t.Run("openai-chat", func(t *testing.T) {
		srv := openaitest.New(t, func(s *openaitest.Server, r *openaitest.Request) openaitest.Reply {
			t.Errorf("request %d to the model during a failed preflight", r.N)
			return openaitest.Reply{Status: 500}
		})
		srv.Models(func(*openaitest.Request) openaitest.Reply {
			return openaitest.Error(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided")
		})
		setOpenAIEnv(t)
		r := agentbox(t, "run", moverApp(t, ""), "--agent", "openai-chat", "--agent-opt", "base_url="+srv.URL, "--agent-opt", "model=llava")
		if r.code != 2 || !strings.Contains(r.stderr, "HTTP 401 Unauthorized: invalid_request_error: Incorrect API key provided") {
			t.Errorf("want exit 2 naming the 401:\n%s", r)
		}
		notStarted(t, r)
	})
	t.Run("eval", func(t *testing.T) {
		srv := at.New(t, func(r *at.Request) at.Reply { return at.Answer("end_turn") })
		srv.Models(func(*http.Request) at.Reply { return at.APIError(401, "authentication_error", "invalid x-api-key") })
		t.Setenv("ANTHROPIC_API_KEY", anthropicKey)
		dir := t.TempDir()
		suite := filepath.Join(dir, "suite.yaml")
		os.WriteFile(suite, []byte("name: s\ntasks:\n  - name: claude\n    target: "+moverApp(t, "")+"\n    agent: anthropic\n    options: {base_url: \""+srv.URL+"\"}\n"), 0o644)
		out := filepath.Join(dir, "out")
		r := agentbox(t, "eval", suite, "--out", out)
		if r.code != 2 || !strings.Contains(r.stderr, "task claude: agent anthropic: GET ") || !strings.Contains(r.stderr, "HTTP 401") {
			t.Errorf("want exit 2 naming the task and the 401:\n%s", r)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("the eval's output directory was created: %v", err)
		}
		if n := len(srv.Listings()); n != 1 {
			t.Errorf("%d preflights, want 1", n)
		}
	})
}

// TestModelRetries: a failing request is retried with a line per retry on
// stderr; a 501 is not retried at all.
func TestModelRetries(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	t.Run("retried aloud", func(t *testing.T) {
		srv := at.New(t, func(r *at.Request) at.Reply {
			if r.N <= 2 {
				rep := at.APIError(503, "api_error", "busy")
				rep.Header = map[string]string{"Retry-After-Ms": "20"}
				return rep
			}
			return at.Answer("end_turn", at.TextBlock("All done."))
		})
		r := anthropicRun(t, srv, moverApp(t, ""))
		if r.code != 0 {
			t.Fatalf("want exit 0:\n%s", r)
		}
		line := "agentbox: model request failed (HTTP 503 Service Unavailable), retrying in 20ms (attempt %s of 5)\n"
		for _, n := range []string{"2", "3"} {
			if !strings.Contains(r.stderr, strings.Replace(line, "%s", n, 1)) {
				t.Errorf("no retry line for attempt %s:\n%s", n, r.stderr)
			}
		}
		// All three attempts are in the step's exchanges.
		tr := openTrace(t, r.dir)
		data, err := os.ReadFile(filepath.Join(r.dir, tr.Steps[0].Decision.Files["exchange.json"]))
		var ex []struct{ Status int }
		if err != nil || json.Unmarshal(data, &ex) != nil || len(ex) != 3 {
			t.Errorf("exchanges of step 1: %d (%v)", len(ex), err)
		}
	})
	t.Run("501 once", func(t *testing.T) {
		srv := at.New(t, func(r *at.Request) at.Reply {
			return at.APIError(501, "api_error", "not implemented here")
		})
		r := anthropicRun(t, srv, moverApp(t, ""))
		if r.code != 3 {
			t.Fatalf("want exit 3:\n%s", r)
		}
		tr := openTrace(t, r.dir)
		if tr.Run.Reason != trace.ReasonAgent || !strings.Contains(tr.Run.Message, "HTTP 501 Not Implemented after 1 attempt") {
			t.Errorf("reason %s: %s", tr.Run.Reason, tr.Run.Message)
		}
		if n := len(srv.Requests()); n != 1 || strings.Contains(r.stderr, "retrying") {
			t.Errorf("%d requests, want 1, and no retry line:\n%s", n, r.stderr)
		}
		// The failed attempt is in the trace, as an agent_error event's file.
		found := false
		for _, e := range tr.Records {
			if e.Event == "agent_error" {
				files, _ := e.Data["files"].(map[string]any)
				found = files["exchange.json"] != nil
			}
		}
		if !found {
			t.Error("the failed request is not in the trace")
		}
		assertNoContainers(t, tr.Run.ID)
	})
}
