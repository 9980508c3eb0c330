package llm

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/internal/textcut"
)

// The HTTP policy every model adapter shares, as middlewares of either
// SDK (github.com/openai/openai-go and github.com/anthropics/anthropic-sdk-go
// take the same shape through option.WithMiddleware). The SDKs' own retries
// are turned off (option.WithMaxRetries(0)): they retry statuses that
// cannot succeed (501 and every 5xx), say nothing while they wait, and one
// of them gives up on an attempt that timed out instead of retrying it.

// MaxBody caps one response body: a larger one is an error, not a hang.
const MaxBody = 32 << 20

// MaxRetryAfter caps a server's Retry-After, so one header cannot stall a
// run for hours (the run's own --timeout still applies).
const MaxRetryAfter = 60 * time.Second

// ErrTimeout marks an attempt that got no complete answer in time.
var ErrTimeout = errors.New("request timed out")

// errTooLarge marks a response body over MaxBody (not retried).
var errTooLarge = errors.New("response body too large")

// Next is the rest of the middleware chain: the SDKs' option.MiddlewareNext.
type Next = func(*http.Request) (*http.Response, error)

// AttemptTimeout bounds one HTTP attempt, the response body included (it is
// read here, into memory, so a server that stalls mid-body is a timeout
// too, and the body is capped at MaxBody).
func AttemptTimeout(d time.Duration) func(*http.Request, Next) (*http.Response, error) {
	return func(req *http.Request, next Next) (*http.Response, error) {
		ctx, cancel := context.WithTimeout(req.Context(), d)
		defer cancel()
		timedOut := func(err error) error {
			if ctx.Err() != nil && req.Context().Err() == nil {
				return fmt.Errorf("%w: the server did not answer within %v", ErrTimeout, d)
			}
			return err
		}
		resp, err := next(req.WithContext(ctx))
		if err != nil {
			return nil, timedOut(err)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
		resp.Body.Close()
		if err != nil {
			return nil, timedOut(err)
		}
		if len(body) > MaxBody {
			return nil, fmt.Errorf("%w: more than %d bytes", errTooLarge, MaxBody)
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return resp, nil
	}
}

// Retrier retries one request as the adapters' policy says: transport
// errors and timeouts, 408, 409, 429 and the 5xx that can pass (not 501,
// 505, 506, 508, 510, 511), or whatever the server's x-should-retry header
// says; never a status that cannot succeed (400, 401, 403, 404, 422, …).
// It waits as the server's Retry-After-Ms or Retry-After asks (capped at
// MaxRetryAfter), else 0.5 s doubling up to 8 s with jitter, and says so on
// its progress writer before each wait. Its middleware must be the
// outermost: each attempt goes through the rest of the chain (the
// recorder, the attempt timeout) again.
type Retrier struct {
	// Max is the number of retries after the first attempt.
	Max int

	mu       sync.Mutex
	progress io.Writer
	attempts int
}

// SetProgress sets where the retrier says what it waits for (nil: nowhere).
func (r *Retrier) SetProgress(w io.Writer) {
	r.mu.Lock()
	r.progress = w
	r.mu.Unlock()
}

// Attempts is how many HTTP attempts the last (or current) call made.
func (r *Retrier) Attempts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attempts
}

// Middleware is the retry loop around the rest of the chain.
func (r *Retrier) Middleware(req *http.Request, next Next) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read the request body: %w", err)
		}
	}
	ctx := req.Context()
	for attempt := 1; ; attempt++ {
		r.mu.Lock()
		r.attempts = attempt
		w := r.progress
		r.mu.Unlock()
		areq := req.Clone(ctx)
		if body != nil {
			areq.Body = io.NopCloser(bytes.NewReader(body))
			areq.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
			areq.ContentLength = int64(len(body))
		}
		if areq.Header.Get("X-Stainless-Retry-Count") != "" {
			areq.Header.Set("X-Stainless-Retry-Count", strconv.Itoa(attempt-1))
		}
		resp, err := next(areq)
		if ctx.Err() != nil || attempt > r.Max || !Retryable(resp, err) {
			return resp, err
		}
		delay := RetryDelay(resp, attempt)
		if w != nil {
			fmt.Fprintf(w, "agentbox: model request failed (%s), retrying in %s (attempt %d of %d)\n",
				termsafe.Line(failure(resp, err)), roundDelay(delay), attempt+1, r.Max+1)
		}
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// Retryable reports whether an attempt that ended so may succeed if sent
// again.
func Retryable(resp *http.Response, err error) bool {
	if err != nil {
		var dns *net.DNSError
		var unknownCA x509.UnknownAuthorityError
		var hostname x509.HostnameError
		var certInvalid x509.CertificateInvalidError
		var verify *tls.CertificateVerificationError
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, errTooLarge):
			return false
		case errors.As(err, &dns) && dns.IsNotFound:
			return false // no such host: a wrong URL
		case errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &certInvalid), errors.As(err, &verify):
			return false
		}
		return true
	}
	switch resp.Header.Get("X-Should-Retry") {
	case "true":
		return true
	case "false":
		return false
	}
	switch s := resp.StatusCode; {
	case s == http.StatusRequestTimeout, s == http.StatusConflict, s == http.StatusTooManyRequests:
		return true
	case s == http.StatusNotImplemented, s == http.StatusHTTPVersionNotSupported, s == http.StatusVariantAlsoNegotiates,
		s == http.StatusLoopDetected, s == http.StatusNotExtended, s == http.StatusNetworkAuthenticationRequired:
		return false
	default:
		return s >= 500
	}
}

// RetryDelay is the wait before attempt+1: the server's Retry-After-Ms or
// Retry-After (seconds or an HTTP date) within [0, MaxRetryAfter], else
// 0.5 s · 2^(attempt-1) up to 8 s, less up to a quarter of jitter.
func RetryDelay(resp *http.Response, attempt int) time.Duration {
	if resp != nil {
		if d, ok := retryAfter(resp.Header); ok {
			return min(max(d, 0), MaxRetryAfter)
		}
	}
	d := 8 * time.Second
	if attempt <= 5 {
		d = 500 * time.Millisecond << (attempt - 1)
	}
	return d - time.Duration(rand.Int64N(int64(d/4)+1))
}

func retryAfter(h http.Header) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 && s < 1e9 {
			return time.Duration(s * float64(time.Second)), true
		}
		if t, err := http.ParseTime(v); err == nil {
			return time.Until(t), true
		}
	}
	return 0, false
}

// roundDelay renders a wait for people: 450ms, 1.8s, 60s.
func roundDelay(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

// failure says in a few words why an attempt failed.
func failure(resp *http.Response, err error) string {
	if err != nil {
		if errors.Is(err, ErrTimeout) {
			return strings.TrimPrefix(err.Error(), ErrTimeout.Error()+": ")
		}
		return textcut.Runes(err.Error(), 200, "…")
	}
	return Status(resp.StatusCode)
}

// Status is "HTTP 503 Service Unavailable".
func Status(code int) string {
	s := "HTTP " + strconv.Itoa(code)
	if t := http.StatusText(code); t != "" {
		s += " " + t
	}
	return s
}

var (
	htmlTags  = regexp.MustCompile(`(?s)<(script|style)\b.*?</(script|style)>|<!--.*?-->|<[^>]*>|<[^>]*$`)
	htmlSpace = regexp.MustCompile(`\s+`)
)

// Excerpt is a bounded, readable excerpt of a response body for a
// message: an HTML page loses its markup, whitespace runs become one
// space, and at most n characters are kept.
func Excerpt(body []byte, n int) string {
	s := string(bytes.ToValidUTF8(body, []byte("�")))
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "<") {
		t = htmlTags.ReplaceAllString(t, " ")
	}
	t = strings.TrimSpace(htmlSpace.ReplaceAllString(t, " "))
	return textcut.Runes(t, n, "…")
}

// Wrap is an error whose message is msg and that wraps err: for messages
// that already say what err would repeat (an SDK error holding the whole
// response body).
func Wrap(msg string, err error) error { return &wrapped{msg, err} }

type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.err }

// Probe keeps the last response a request got, for Preflight: a
// middleware of a client of its own (no retries, no recorder), whose
// verdict reads the status rather than the SDK's error types.
type Probe struct {
	url    string
	status int
	body   []byte
}

// Status is the status of the response the probe saw (0: none).
func (p *Probe) Status() int { return p.status }

// Middleware records the request's URL and the response's status and body.
func (p *Probe) Middleware(req *http.Request, next Next) (*http.Response, error) {
	p.url = req.URL.Redacted()
	resp, err := next(req)
	if err == nil && resp != nil {
		p.status = resp.StatusCode
		b, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		if rerr == nil {
			p.body = b
		}
	}
	return resp, err
}

// Verdict turns the outcome of the preflight request into Preflight's
// error. Nothing answered: an error wrapping agent.ErrUnreachable. A
// refusal that no retry can change (401, 403, 404, other 4xx but 408, 409
// and 429): an error naming the status, the server's words and, for 401
// and 403, where the key came from. Any other answer — 2xx, or a busy
// server (429, 5xx), whose requests the run retries — passes.
func (p *Probe) Verdict(ctx context.Context, err error, keyEnv string, keySet bool) error {
	if p.status == 0 {
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		cause := err
		var ue *url.Error
		if errors.As(err, &ue) {
			cause = ue.Err // without the URL again
		}
		return Wrap(fmt.Sprintf("no answer from %s: %s", p.url, failure(nil, cause)), errors.Join(agent.ErrUnreachable, err))
	}
	s := p.status
	if s < 400 || Retryable(&http.Response{StatusCode: s, Header: http.Header{}}, nil) || s >= 500 {
		return nil
	}
	msg := fmt.Sprintf("GET %s: %s", p.url, Status(s))
	if d := ErrorDetail(p.body); d != "" {
		msg += ": " + d
	}
	switch {
	case (s == http.StatusUnauthorized || s == http.StatusForbidden) && keySet:
		msg += fmt.Sprintf(" (the key is read from %s)", keyEnv)
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		msg += fmt.Sprintf(" (no key: %s is not set)", keyEnv)
	case s == http.StatusNotFound:
		msg += " (is base_url right?)"
	}
	return errors.New(msg)
}

// ErrorDetail is what an error response says, in a few words: the
// "type: message" of an API error body ({"error":{"type","message"}}, as
// both OpenAI and Anthropic send), else an excerpt of the body.
func ErrorDetail(body []byte) string {
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && (e.Error.Type != "" || e.Error.Message != "") {
		s := e.Error.Message
		if e.Error.Type != "" && s != "" {
			s = e.Error.Type + ": " + s
		} else if s == "" {
			s = e.Error.Type
		}
		return textcut.Runes(strings.TrimSpace(s), 300, "…")
	}
	return Excerpt(body, 200)
}
