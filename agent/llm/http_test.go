package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/agent"
)

func TestRetryDelay(t *testing.T) {
	for _, tt := range []struct {
		header, value string
		want          time.Duration
	}{
		{"Retry-After", "3600", MaxRetryAfter},
		{"Retry-After", "2", 2 * time.Second},
		{"Retry-After", "0.05", 50 * time.Millisecond},
		{"Retry-After-Ms", "999999", MaxRetryAfter},
		{"Retry-After-Ms", "250", 250 * time.Millisecond},
		{"Retry-After", time.Now().Add(2 * time.Hour).UTC().Format(http.TimeFormat), MaxRetryAfter},
		{"Retry-After", time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat), 0},
	} {
		resp := &http.Response{Header: http.Header{tt.header: {tt.value}}}
		if got := RetryDelay(resp, 1); got != tt.want {
			t.Errorf("%s: %s → %v, want %v", tt.header, tt.value, got, tt.want)
		}
	}
	// Without a header: 0.5 s doubling up to 8 s, less up to a quarter.
	for attempt, base := range map[int]time.Duration{1: 500 * time.Millisecond, 2: time.Second, 3: 2 * time.Second, 5: 8 * time.Second, 9: 8 * time.Second} {
		for range 20 {
			if d := RetryDelay(nil, attempt); d > base || d < base*3/4 {
				t.Errorf("attempt %d: %v, want %v less up to a quarter", attempt, d, base)
			}
		}
	}
}

func TestRetryable(t *testing.T) {
	resp := func(code int, h ...string) *http.Response {
		r := &http.Response{StatusCode: code, Header: http.Header{}}
		if len(h) == 2 {
			r.Header.Set(h[0], h[1])
		}
		return r
	}
	for _, tt := range []struct {
		resp *http.Response
		err  error
		want bool
	}{
		{resp(429), nil, true},
		{resp(408), nil, true},
		{resp(409), nil, true},
		{resp(500), nil, true},
		{resp(502), nil, true},
		{resp(503), nil, true},
		{resp(529), nil, true},
		{resp(501), nil, false},
		{resp(505), nil, false},
		{resp(400), nil, false},
		{resp(401), nil, false},
		{resp(403), nil, false},
		{resp(404), nil, false},
		{resp(422), nil, false},
		{resp(400, "X-Should-Retry", "true"), nil, true},
		{resp(503, "X-Should-Retry", "false"), nil, false},
		{nil, errors.New("connection reset by peer"), true},
		{nil, fmt.Errorf("%w: the server did not answer within 1s", ErrTimeout), true},
		{nil, context.Canceled, false},
		{nil, fmt.Errorf("%w: more than 1 bytes", errTooLarge), false},
	} {
		if got := Retryable(tt.resp, tt.err); got != tt.want {
			code := 0
			if tt.resp != nil {
				code = tt.resp.StatusCode
			}
			t.Errorf("status %d %v, err %v: retryable %v, want %v", code, tt.resp != nil && tt.resp.Header.Get("X-Should-Retry") != "", tt.err, got, tt.want)
		}
	}
}

// retryClient sends POSTs through a Retrier (and the attempt timeout and a
// recorder, as the adapters do) to srv.
func retryClient(r *Retrier, rec *Recorder, timeout time.Duration) func(ctx context.Context, url string) (*http.Response, error) {
	chain := func(req *http.Request) (*http.Response, error) {
		return r.Middleware(req, func(req *http.Request) (*http.Response, error) {
			return AttemptTimeout(timeout)(req, func(req *http.Request) (*http.Response, error) {
				return rec.Middleware(req, http.DefaultTransport.RoundTrip)
			})
		})
	}
	return func(ctx context.Context, url string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(`{"q":1}`))
		return chain(req)
	}
}

// TestRetrierSaysSo: each retry is told on the progress writer with the
// cause, the wait and the attempt; the body goes out again each time and
// every attempt is recorded.
func TestRetrierSaysSo(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if string(b) != `{"q":1}` {
			t.Errorf("attempt %d: body %q", n.Load()+1, b)
		}
		switch n.Add(1) {
		case 1:
			w.Header().Set("Retry-After-Ms", "30")
			w.WriteHeader(503)
		case 2:
			w.Header().Set("Retry-After", "0.02")
			w.WriteHeader(429)
		default:
			w.Write([]byte(`{"ok":true}`))
		}
	}))
	defer srv.Close()
	var progress bytes.Buffer
	r := &Retrier{Max: 4}
	r.SetProgress(&progress)
	rec := NewRecorder()
	resp, err := retryClient(r, rec, 10*time.Second)(context.Background(), srv.URL)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("resp %v, err %v", resp, err)
	}
	if r.Attempts() != 3 {
		t.Errorf("%d attempts, want 3", r.Attempts())
	}
	want := "agentbox: model request failed (HTTP 503 Service Unavailable), retrying in 30ms (attempt 2 of 5)\n" +
		"agentbox: model request failed (HTTP 429 Too Many Requests), retrying in 20ms (attempt 3 of 5)\n"
	if progress.String() != want {
		t.Errorf("progress:\n%s\nwant:\n%s", progress.String(), want)
	}
	if ex := string(rec.Take()); strings.Count(ex, `"status"`) != 3 {
		t.Errorf("recorded:\n%s", ex)
	}
}

// TestRetrierNotWhatCannotSucceed: a 501 (and the other statuses no retry
// can change) is answered after one attempt, silently.
func TestRetrierNotWhatCannotSucceed(t *testing.T) {
	for _, code := range []int{400, 401, 403, 404, 422, 501} {
		var n atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			w.WriteHeader(code)
		}))
		var progress bytes.Buffer
		r := &Retrier{Max: 4}
		r.SetProgress(&progress)
		resp, err := retryClient(r, NewRecorder(), 10*time.Second)(context.Background(), srv.URL)
		srv.Close()
		if err != nil || resp.StatusCode != code {
			t.Fatalf("%d: resp %v, err %v", code, resp, err)
		}
		if n.Load() != 1 || r.Attempts() != 1 || progress.Len() != 0 {
			t.Errorf("HTTP %d: %d requests, %d attempts, progress %q; want 1, 1, nothing", code, n.Load(), r.Attempts(), progress.String())
		}
	}
}

// TestRetrierTimeoutsAndCancel: a stalled attempt is retried after the
// attempt timeout and told as such; the caller's cancellation ends the
// wait at once.
func TestRetrierTimeoutsAndCancel(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	var progress bytes.Buffer
	r := &Retrier{Max: 1}
	r.SetProgress(&progress)
	_, err := retryClient(r, NewRecorder(), 100*time.Millisecond)(context.Background(), srv.URL)
	if !errors.Is(err, ErrTimeout) || r.Attempts() != 2 {
		t.Fatalf("err %v after %d attempts", err, r.Attempts())
	}
	if !strings.HasPrefix(progress.String(), "agentbox: model request failed (the server did not answer within 100ms), retrying in ") {
		t.Errorf("progress %q", progress.String())
	}

	// Cancelled during the wait between attempts.
	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "50")
		w.WriteHeader(503)
	}))
	defer srv2.Close()
	ctx, cancel := context.WithCancel(context.Background())
	r2 := &Retrier{Max: 3}
	r2.SetProgress(writerFunc(func(p []byte) (int, error) { cancel(); return len(p), nil }))
	done := make(chan error, 1)
	go func() { _, err := retryClient(r2, NewRecorder(), 10*time.Second)(ctx, srv2.URL); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not end with the context")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestExcerpt(t *testing.T) {
	page := "<html><head><title>502 Bad Gateway</title><style>body{color:red}</style></head>\n<body>\n<center><h1>502   Bad Gateway</h1></center>\n<hr><center>nginx/1.25</center>\n</body></html>"
	if got, want := Excerpt([]byte(page), 200), "502 Bad Gateway 502 Bad Gateway nginx/1.25"; got != want {
		t.Errorf("Excerpt(page) = %q, want %q", got, want)
	}
	if got := Excerpt([]byte("<html><body><p>Oops</p><!-- cut off he"), 200); got != "Oops" {
		t.Errorf("Excerpt(cut page) = %q", got)
	}
	if got := Excerpt([]byte(strings.Repeat("x", 500)), 10); got != "xxxxxxxxxx…" {
		t.Errorf("Excerpt(long) = %q", got)
	}
	if got := ErrorDetail([]byte(`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)); got != "authentication_error: invalid x-api-key" {
		t.Errorf("ErrorDetail(anthropic) = %q", got)
	}
	if got := ErrorDetail([]byte(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}`)); got != "invalid_request_error: Incorrect API key provided" {
		t.Errorf("ErrorDetail(openai) = %q", got)
	}
}

// TestProbeVerdict: what a preflight request's outcome means.
func TestProbeVerdict(t *testing.T) {
	for _, tt := range []struct {
		status  int
		body    string
		keySet  bool
		wantErr string // "" passes
	}{
		{200, `{"data":[]}`, true, ""},
		{429, ``, true, ""},
		{503, ``, true, ""},
		{501, ``, true, ""},
		{401, `{"error":{"type":"authentication_error","message":"invalid x-api-key"}}`, true, "HTTP 401 Unauthorized: authentication_error: invalid x-api-key (the key is read from TEST_KEY)"},
		{401, ``, false, "HTTP 401 Unauthorized (no key: TEST_KEY is not set)"},
		{403, `forbidden`, true, "HTTP 403 Forbidden: forbidden (the key is read from TEST_KEY)"},
		{404, `<html><body><h1>Not Found</h1></body></html>`, true, "HTTP 404 Not Found: Not Found (is base_url right?)"},
		{400, `{"error":{"message":"bad"}}`, true, "HTTP 400 Bad Request: bad"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tt.status)
			w.Write([]byte(tt.body))
		}))
		var p Probe
		req, _ := http.NewRequest("GET", srv.URL+"/v1/models", nil)
		_, err := p.Middleware(req, http.DefaultTransport.RoundTrip)
		verr := p.Verdict(context.Background(), err, "TEST_KEY", tt.keySet)
		srv.Close()
		switch {
		case tt.wantErr == "" && verr != nil:
			t.Errorf("HTTP %d: %v, want a pass", tt.status, verr)
		case tt.wantErr != "" && (verr == nil || !strings.HasSuffix(verr.Error(), tt.wantErr) || errors.Is(verr, agent.ErrUnreachable)):
			t.Errorf("HTTP %d: %v, want …%s", tt.status, verr, tt.wantErr)
		}
	}
	// Nothing listens: unreachable.
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	var p Probe
	req, _ := http.NewRequest("GET", url+"/v1/models", nil)
	_, err := p.Middleware(req, http.DefaultTransport.RoundTrip)
	if verr := p.Verdict(context.Background(), err, "K", true); !errors.Is(verr, agent.ErrUnreachable) || !strings.Contains(verr.Error(), url) {
		t.Errorf("nothing listening: %v", verr)
	}
}
