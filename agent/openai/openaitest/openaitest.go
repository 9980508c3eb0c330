// Package openaitest is a fake model server for tests: it speaks the wire
// format of OpenAI's Responses API and of chat completions (the shapes the
// official SDK reads and writes), records every request, and answers with
// scripted model turns. Mover is a scripted model that plays the mover
// demo from the screenshots it receives.
package openaitest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request is one request the server received.
type Request struct {
	N      int // 1-based, in arrival order
	Method string
	Path   string
	Auth   string // the Authorization header
	Header http.Header
	Raw    []byte
	// Handling is how long the server took from receiving the request to
	// having written its answer (set after the handler ran).
	Handling time.Duration

	once sync.Once
	body map[string]any
	err  error
}

// JSON decodes the body (once).
func (r *Request) JSON() (map[string]any, error) {
	r.once.Do(func() {
		d := json.NewDecoder(bytes.NewReader(r.Raw))
		d.UseNumber()
		r.err = d.Decode(&r.body)
	})
	return r.body, r.err
}

// Reply is what the server answers.
type Reply struct {
	Status int // default 200
	Body   []byte
	Header map[string]string
	// Stall delays the answer (until the client goes away, at most this
	// long).
	Stall time.Duration
}

// Handler answers one request.
type Handler func(s *Server, r *Request) Reply

// Server is a fake model server.
// Close shuts the server down.
func (s *Server) Close() { s.srv.Close() }

type Server struct {
	// URL is the base URL for base_url: the server's address with /v1.
	URL string
	srv *httptest.Server

	mu       sync.Mutex
	reqs     []*Request
	errs     []string
	handler  Handler
	listings []http.Header        // GET /v1/models requests (their headers)
	models   func(*Request) Reply // answers GET /v1/models
}

// Models makes the server answer GET /v1/models (the adapters' preflight)
// with f instead of a list of one model.
func (s *Server) Models(f func(*Request) Reply) {
	s.mu.Lock()
	s.models = f
	s.mu.Unlock()
}

// Listings returns the headers of the GET /v1/models requests received so
// far; they are not in Requests and do not reach the handler.
func (s *Server) Listings() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.listings...)
}

// ModelList is the answer to GET /v1/models: a list of one model.
func ModelList() Reply {
	return Reply{Body: mustJSON(map[string]any{"object": "list", "data": []map[string]any{
		{"id": "test-model", "object": "model", "created": 1700000000, "owned_by": "test"}}})}
}

// New starts a server that answers with h; it is closed when the test ends.
func New(t testing.TB, h Handler) *Server {
	s := &Server{handler: h}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/v1"
	t.Cleanup(s.srv.Close)
	return s
}

func (s *Server) serve(w http.ResponseWriter, hr *http.Request) {
	t0 := time.Now()
	raw, _ := io.ReadAll(hr.Body)
	s.mu.Lock()
	r := &Request{Method: hr.Method, Path: hr.URL.Path, Auth: hr.Header.Get("Authorization"), Header: hr.Header.Clone(), Raw: raw}
	var rep Reply
	if hr.Method == http.MethodGet && hr.URL.Path == "/v1/models" {
		s.listings = append(s.listings, r.Header)
		f := s.models
		s.mu.Unlock()
		rep = ModelList()
		if f != nil {
			rep = f(r)
		}
	} else {
		r.N = len(s.reqs) + 1
		s.reqs = append(s.reqs, r)
		s.mu.Unlock()
		rep = s.handler(s, r)
	}
	if rep.Stall > 0 {
		select {
		case <-time.After(rep.Stall):
		case <-hr.Context().Done():
			s.mu.Lock()
			r.Handling = time.Since(t0)
			s.mu.Unlock()
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	for k, v := range rep.Header {
		w.Header().Set(k, v)
	}
	if rep.Status == 0 {
		rep.Status = http.StatusOK
	}
	w.WriteHeader(rep.Status)
	w.Write(rep.Body)
	s.mu.Lock()
	r.Handling = time.Since(t0)
	s.mu.Unlock()
}

// Requests returns the requests received so far.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.reqs...)
}

// Errorf records a failed expectation from inside a handler; Check reports
// them.
func (s *Server) Errorf(format string, args ...any) {
	s.mu.Lock()
	s.errs = append(s.errs, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

// Check fails the test with every expectation a handler recorded.
func (s *Server) Check(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.errs {
		t.Error("fake model server: " + e)
	}
}

// Error is an API error body as OpenAI sends it.
func Error(status int, typ, code, msg string) Reply {
	body := map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nilIfEmpty(code)}}
	return Reply{Status: status, Body: mustJSON(body)}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// DecodeDataURL decodes a data:image/png;base64 URL.
func DecodeDataURL(u string) (image.Image, error) {
	const prefix = "data:image/png;base64,"
	if !strings.HasPrefix(u, prefix) {
		return nil, fmt.Errorf("not a PNG data URL: %.40q", u)
	}
	data, err := base64.StdEncoding.DecodeString(u[len(prefix):])
	if err != nil {
		return nil, fmt.Errorf("data URL: %w", err)
	}
	return png.Decode(bytes.NewReader(data))
}

// GreenX returns the mean x of clearly green pixels (g > 180, r < 80,
// b < 80) and their number.
func GreenX(img image.Image) (float64, int) {
	b := img.Bounds()
	var sx float64
	n := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if g>>8 > 180 && r>>8 < 80 && bl>>8 < 80 {
				sx += float64(x)
				n++
			}
		}
	}
	if n == 0 {
		return 0, 0
	}
	return sx / float64(n), n
}

// Mover is a scripted model for the mover demo: it finds the green square
// in each screenshot, asks for Right until the square is at least MinDX
// pixels right of where it first saw it, then finishes.
type Mover struct {
	MinDX float64

	mu     sync.Mutex
	seen   bool
	startX float64
	LastX  float64
	Looks  int // screenshots looked at
}

// Look reports, for one screenshot, whether the goal is reached and how far
// the square has moved.
func (m *Mover) Look(img image.Image) (done bool, moved float64, err error) {
	x, n := GreenX(img)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Looks++
	if n == 0 {
		return false, 0, fmt.Errorf("no green square in the screenshot")
	}
	if !m.seen {
		m.seen, m.startX = true, x
	}
	m.LastX = x
	return x-m.startX >= m.MinDX, x - m.startX, nil
}

// Moved is how far the square moved between the first and the last
// screenshot looked at.
func (m *Mover) Moved() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.LastX - m.startX
}

// get walks a decoded JSON document: keys for objects, ints for arrays.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k < 0 || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// Get walks a decoded JSON document: string keys for objects, int indexes
// for arrays; nil when the path does not exist.
func Get(v any, path ...any) any { return get(v, path...) }

// Str is Get for a string ("" when absent or not a string).
func Str(v any, path ...any) string {
	s, _ := get(v, path...).(string)
	return s
}

// Int is Get for an integer (-1 when absent or not an integer).
func Int(v any, path ...any) int {
	switch n := get(v, path...).(type) {
	case json.Number:
		i, err := n.Int64()
		if err != nil {
			return -1
		}
		return int(i)
	case float64:
		return int(n)
	}
	return -1
}

// List is Get for an array.
func List(v any, path ...any) []any {
	a, _ := get(v, path...).([]any)
	return a
}
