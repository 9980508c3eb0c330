package llm

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Recorder keeps the raw HTTP exchanges of one decision, for the trace.
// Images in them are replaced by references to the screenshots they came
// from (registered with Image), so a trace stays small and readable.
type Recorder struct {
	mu        sync.Mutex
	images    map[[32]byte]string
	exchanges []exchange

	// Playback (Play): the recorded exchanges that answer the requests
	// until Stop, in order.
	playing bool
	play    []exchange
	played  int
}

type exchange struct {
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Status   int             `json:"status,omitempty"`
	Request  json.RawMessage `json:"request,omitempty"`
	Response json.RawMessage `json:"response,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// NewRecorder makes an empty recorder.
func NewRecorder() *Recorder { return &Recorder{images: map[[32]byte]string{}} }

// Image registers the base64 encoding of a screenshot and the trace path it
// stands for.
func (r *Recorder) Image(b64, ref string) {
	r.mu.Lock()
	r.images[sha256.Sum256([]byte(b64))] = ref
	r.mu.Unlock()
}

// Middleware records each request and response (both SDKs take this shape
// through option.WithMiddleware). Authorization headers are never read.
func (r *Recorder) Middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	ex := exchange{Method: req.Method, URL: req.URL.Redacted(), Request: r.redact(body)}
	if r.isPlaying() {
		next = r.answer
	}
	resp, err := next(req)
	if err != nil {
		ex.Error = err.Error()
	} else {
		ex.Status = resp.StatusCode
		rb, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(rb))
		if rerr != nil {
			ex.Error = rerr.Error()
		}
		ex.Response = r.redact(rb)
	}
	r.mu.Lock()
	r.exchanges = append(r.exchanges, ex)
	r.mu.Unlock()
	return resp, err
}

// Play makes the recorded exchanges in doc (a document Take returned,
// as the trace keeps it; nil: none) answer the requests that follow,
// one each in order, instead of the service, until Stop. A request
// beyond them fails: the conversation went another way than recorded.
func (r *Recorder) Play(doc []byte) error {
	var play []exchange
	if len(doc) > 0 {
		if err := json.Unmarshal(doc, &play); err != nil {
			return fmt.Errorf("the recorded exchanges: %w", err)
		}
	}
	// The attempts the retrier retried are left out (the agent saw only
	// the answer that followed them): no backoff is waited again.
	kept := play[:0]
	for i, ex := range play {
		if i < len(play)-1 && (ex.Status == 0 || Retryable(&http.Response{StatusCode: ex.Status}, nil)) {
			continue
		}
		kept = append(kept, ex)
	}
	play = kept
	r.mu.Lock()
	r.playing, r.play, r.played = true, play, 0
	r.mu.Unlock()
	return nil
}

// Stop ends playback; an error says that the requests made were not the
// recorded ones (fewer).
func (r *Recorder) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, played := len(r.play), r.played
	r.playing, r.play, r.played = false, nil, 0
	if played < n {
		return fmt.Errorf("the recording has %d model requests for this step, the agent made %d", n, played)
	}
	return nil
}

func (r *Recorder) isPlaying() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.playing
}

// ErrNotRecorded is returned for a request made during playback beyond
// the recorded ones.
var ErrNotRecorded = errors.New("a model request the recording does not have")

// answer answers req with the next recorded exchange.
func (r *Recorder) answer(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.played >= len(r.play) {
		r.played++
		return nil, fmt.Errorf("%s %s: %w (%d recorded)", req.Method, req.URL.Redacted(), ErrNotRecorded, len(r.play))
	}
	ex := r.play[r.played]
	r.played++
	if ex.Status == 0 {
		msg := ex.Error
		if msg == "" {
			msg = "no answer recorded"
		}
		return nil, fmt.Errorf("recorded: %s", msg)
	}
	body := []byte(ex.Response)
	var str string
	if len(body) > 0 && body[0] == '"' && json.Unmarshal(body, &str) == nil {
		body = []byte(str) // a body that was not JSON, kept as a string
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return &http.Response{Status: fmt.Sprintf("%d %s", ex.Status, http.StatusText(ex.Status)), StatusCode: ex.Status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, Body: io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)), Request: req}, nil
}

// minImage is the shortest base64 run taken for an image.
const minImage = 512

func isB64(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/'
}

// redact replaces image data (base64 runs of at least minImage characters)
// with references, in one linear pass; the result is valid JSON if the
// input was (a non-JSON body is kept as a JSON string).
func (r *Recorder) redact(body []byte) json.RawMessage {
	if len(body) == 0 {
		return nil
	}
	r.mu.Lock()
	out := make([]byte, 0, min(len(body), 64<<10))
	for i := 0; i < len(body); {
		if !isB64(body[i]) {
			out = append(out, body[i])
			i++
			continue
		}
		j := i
		for j < len(body) && isB64(body[j]) {
			j++
		}
		for k := 0; k < 2 && j < len(body) && body[j] == '='; k++ {
			j++
		}
		run := body[i:j]
		switch {
		case len(run) < minImage:
			out = append(out, run...)
		default:
			if ref, ok := r.images[sha256.Sum256(run)]; ok {
				out = append(out, "<screenshot "+ref+">"...)
			} else {
				out = fmt.Appendf(out, "<image: %d bytes of base64>", len(run))
			}
		}
		i = j
	}
	r.mu.Unlock()
	if !json.Valid(out) {
		q, _ := json.Marshal(string(out))
		return q
	}
	return out
}

// Take returns the exchanges recorded since the last Take, as one JSON
// document for the trace, and forgets them.
func (r *Recorder) Take() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.exchanges) == 0 {
		return nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(r.exchanges)
	r.exchanges = nil
	return b.Bytes()
}
