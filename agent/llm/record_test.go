package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestRecorderPlayback records a step's exchanges (a retried 503, then two
// answers) and plays them back: the retried attempt is left out, the
// answers come back in order without the service, a request beyond them
// fails, and Stop says when fewer were asked for than recorded.
func TestRecorderPlayback(t *testing.T) {
	served := 0
	answers := []struct {
		status int
		body   string
	}{{503, `{"error":"busy"}`}, {200, `{"n":1}`}, {200, `{"n":2}`}}
	service := func(req *http.Request) (*http.Response, error) {
		a := answers[served]
		served++
		return &http.Response{StatusCode: a.status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(a.body))}, nil
	}
	do := func(r *Recorder, next func(*http.Request) (*http.Response, error)) (int, string, error) {
		req, _ := http.NewRequest("POST", "http://127.0.0.1:9/v1/messages", bytes.NewReader([]byte(`{"q":1}`)))
		resp, err := r.Middleware(req, next)
		if err != nil {
			return 0, "", err
		}
		b, _ := io.ReadAll(resp.Body)
		var c bytes.Buffer
		if json.Compact(&c, b) == nil {
			b = c.Bytes()
		}
		return resp.StatusCode, string(b), nil
	}
	rec := NewRecorder()
	for range answers {
		if _, _, err := do(rec, service); err != nil {
			t.Fatal(err)
		}
	}
	doc := rec.Take()

	noService := func(*http.Request) (*http.Response, error) {
		t.Fatal("the service was asked during playback")
		return nil, nil
	}
	play := NewRecorder()
	if err := play.Play(doc); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`{"n":1}`, `{"n":2}`} {
		if st, body, err := do(play, noService); err != nil || st != 200 || body != want {
			t.Fatalf("played back: %d %s, %v; want 200 %s", st, body, err, want)
		}
	}
	if _, _, err := do(play, noService); !errors.Is(err, ErrNotRecorded) {
		t.Fatalf("a request beyond the recording: %v, want ErrNotRecorded", err)
	}
	if err := play.Stop(); err != nil {
		t.Fatalf("Stop after every recorded answer was used: %v", err)
	}
	if got := play.Take(); !bytes.Contains(got, []byte(`"n": 2`)) {
		t.Errorf("the played-back exchanges are recorded again for the new trace:\n%s", got)
	}

	if err := play.Play(doc); err != nil {
		t.Fatal(err)
	}
	if _, _, err := do(play, noService); err != nil {
		t.Fatal(err)
	}
	if err := play.Stop(); err == nil || !strings.Contains(err.Error(), "has 2 model requests for this step, the agent made 1") {
		t.Fatalf("Stop after one of two: %v", err)
	}
	// After Stop, the service answers again.
	served = 1
	if st, _, err := do(play, service); err != nil || st != 200 || served != 2 {
		t.Fatalf("after Stop: %d, %v (served %d)", st, err, served)
	}
	if err := play.Play([]byte("not json")); err == nil {
		t.Fatal("Play took a document that is not the recorder's")
	}
}
