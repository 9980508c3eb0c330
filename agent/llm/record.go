package llm

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
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
