// Package anthropictest is a local stand-in for Anthropic's Messages API,
// for tests: an HTTP server that speaks the API's wire format (request and
// response JSON, content blocks, stop_reason, usage, tool_use ids, error
// bodies), records every request the SDK sent, and answers with scripted
// model turns.
package anthropictest

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

// Request is one request as the server received it.
type Request struct {
	N      int // 1 for the first request
	Header http.Header
	Raw    []byte
	Params Params
	// Handling is the server's own time for this request: from the body
	// fully read to the answer written (the scripted model's thinking).
	Handling time.Duration
}

// Params is the decoded body of POST /v1/messages.
type Params struct {
	Model       string           `json:"model"`
	MaxTokens   int              `json:"max_tokens"`
	System      json.RawMessage  `json:"system"`
	Tools       []map[string]any `json:"tools"`
	Messages    []Message        `json:"messages"`
	Temperature *float64         `json:"temperature"`
}

// Message is one message of the conversation.
type Message struct {
	Role    string  `json:"role"`
	Content []Block `json:"content"`
}

// Block is a content block of any type; only the fields of its type are set.
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Content   Contents        `json:"content,omitempty"`
	Source    *Source         `json:"source,omitempty"`
}

// Contents is a tool_result's content: a string or a list of blocks.
type Contents []Block

// UnmarshalJSON accepts both forms.
func (c *Contents) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = Contents{{Type: "text", Text: s}}
		return nil
	}
	var blocks []Block
	err := json.Unmarshal(b, &blocks)
	*c = blocks
	return err
}

// Source is an image's source.
type Source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

// System returns the system prompt's text.
func (r *Request) System() string {
	var s string
	if json.Unmarshal(r.Params.System, &s) == nil {
		return s
	}
	var blocks []Block
	_ = json.Unmarshal(r.Params.System, &blocks)
	var parts []string
	for _, b := range blocks {
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n")
}

// Image is one image found in a request.
type Image struct {
	Message   int    // index in Params.Messages
	ToolUseID string // the tool_result holding it, if any
	MediaType string
	B64       string
	Img       image.Image
	Err       error // decoding failed
}

// Images lists every image of the request in order, decoded.
func (r *Request) Images() []Image {
	var out []Image
	add := func(i int, id string, b Block) {
		if b.Type != "image" || b.Source == nil {
			return
		}
		im := Image{Message: i, ToolUseID: id, MediaType: b.Source.MediaType, B64: b.Source.Data}
		data, err := base64.StdEncoding.DecodeString(b.Source.Data)
		if err == nil {
			im.Img, err = png.Decode(bytes.NewReader(data))
		}
		im.Err = err
		out = append(out, im)
	}
	for i, m := range r.Params.Messages {
		for _, b := range m.Content {
			add(i, "", b)
			for _, c := range b.Content {
				add(i, b.ToolUseID, c)
			}
		}
	}
	return out
}

// LastImage is the newest image of the request, or nil.
func (r *Request) LastImage() image.Image {
	imgs := r.Images()
	if len(imgs) == 0 {
		return nil
	}
	return imgs[len(imgs)-1].Img
}

// Last is the request's last message.
func (r *Request) Last() Message {
	if len(r.Params.Messages) == 0 {
		return Message{}
	}
	return r.Params.Messages[len(r.Params.Messages)-1]
}

// ToolResults are the tool_result blocks of the last message.
func (r *Request) ToolResults() []Block {
	var out []Block
	for _, b := range r.Last().Content {
		if b.Type == "tool_result" {
			out = append(out, b)
		}
	}
	return out
}

// Text joins the text blocks of a block list (a tool_result's content).
func Text(blocks []Block) string {
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Tool returns the tool definition named computer, or nil.
func (r *Request) Tool() map[string]any {
	for _, t := range r.Params.Tools {
		if t["name"] == "computer" {
			return t
		}
	}
	return nil
}

// Reply is the server's answer to one request.
type Reply struct {
	Status int
	Header map[string]string
	Body   any // JSON-encoded; a []byte is sent as it is
	// Stall never answers: the handler waits until the client gives up or
	// the server closes.
	Stall bool
}

// Answer is a 200 with a Messages API message: content blocks, stop
// reason and usage.
func Answer(stopReason string, blocks ...Block) Reply {
	return Reply{Status: 200, Body: map[string]any{
		"id": fmt.Sprintf("msg_%016x", time.Now().UnixNano()), "type": "message", "role": "assistant",
		"model": "claude-test", "content": blocks, "stop_reason": stopReason, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 1000, "output_tokens": 50, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}}
}

// ToolUse is a tool_use block of the computer tool.
func ToolUse(id string, input map[string]any) Block {
	b, _ := json.Marshal(input)
	return Block{Type: "tool_use", ID: id, Name: "computer", Input: b}
}

// RawToolUse is a tool_use block with its input as given.
func RawToolUse(id, name, input string) Block {
	return Block{Type: "tool_use", ID: id, Name: name, Input: json.RawMessage(input)}
}

// TextBlock is a text content block.
func TextBlock(s string) Block { return Block{Type: "text", Text: s} }

// APIError is an error response as the API sends it:
// {"type":"error","error":{"type":…,"message":…}}.
func APIError(status int, typ, msg string) Reply {
	return Reply{Status: status, Body: map[string]any{
		"type": "error", "error": map[string]any{"type": typ, "message": msg}, "request_id": "req_test",
	}}
}

// Server is the fake API. Its model function is called once per request,
// in order, from the server's goroutines (one at a time).
type Server struct {
	URL string

	srv   *httptest.Server
	model func(*Request) Reply
	done  chan struct{}
	once  sync.Once

	mu       sync.Mutex
	requests []*Request
	listings []http.Header             // GET /v1/models requests (their headers)
	models   func(*http.Request) Reply // answers GET /v1/models
	turn     sync.Mutex                // serialises model calls
}

// Models makes the server answer GET /v1/models (the adapter's preflight)
// with f instead of a page listing one model.
func (s *Server) Models(f func(*http.Request) Reply) {
	s.mu.Lock()
	s.models = f
	s.mu.Unlock()
}

// Listings returns the headers of the GET /v1/models requests received so
// far (they are not in Requests).
func (s *Server) Listings() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.listings...)
}

// ModelList is the answer to GET /v1/models: one page, one model.
func ModelList() Reply {
	return Reply{Status: 200, Body: map[string]any{
		"data":     []map[string]any{{"type": "model", "id": "claude-test", "display_name": "Claude Test", "created_at": "2025-01-01T00:00:00Z"}},
		"has_more": false, "first_id": "claude-test", "last_id": "claude-test",
	}}
}

// New starts a server; it is closed when the test ends.
func New(t testing.TB, model func(*Request) Reply) *Server {
	s := &Server{model: model, done: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Close releases stalled requests and stops the server.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.done)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// Requests returns the requests received so far.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
		s.mu.Lock()
		s.listings = append(s.listings, r.Header.Clone())
		f := s.models
		s.mu.Unlock()
		reply := ModelList()
		if f != nil {
			reply = f(r)
		}
		if reply.Stall {
			select {
			case <-r.Context().Done():
			case <-s.done:
			}
			return
		}
		writeReply(w, reply)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		writeReply(w, APIError(404, "not_found_error", "no route "+r.Method+" "+r.URL.Path))
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	start := time.Now()
	req := &Request{Header: r.Header.Clone(), Raw: raw}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	req.N = len(s.requests)
	s.mu.Unlock()
	if err := json.Unmarshal(raw, &req.Params); err != nil {
		writeReply(w, APIError(400, "invalid_request_error", "body: "+err.Error()))
		return
	}
	s.turn.Lock()
	reply := s.model(req)
	s.turn.Unlock()
	if reply.Stall {
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		return
	}
	writeReply(w, reply)
	s.mu.Lock()
	req.Handling = time.Since(start)
	s.mu.Unlock()
}

func writeReply(w http.ResponseWriter, r Reply) {
	body, ok := r.Body.([]byte)
	if !ok {
		body, _ = json.Marshal(r.Body)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", "req_test")
	for k, v := range r.Header {
		w.Header().Set(k, v)
	}
	if r.Status == 0 {
		r.Status = 200
	}
	w.WriteHeader(r.Status)
	w.Write(body)
}

// Box is where pixels of one colour are in an image.
type Box struct {
	X0, Y0, X1, Y1 int     // bounding box, X1 and Y1 exclusive
	CX, CY         float64 // centroid
	N              int     // pixels
}

// Find locates the pixels for which match holds (8-bit channels).
func Find(img image.Image, match func(r, g, b uint8) bool) Box {
	bx := Box{X0: 1 << 30, Y0: 1 << 30}
	var sx, sy float64
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if match(uint8(r>>8), uint8(g>>8), uint8(b>>8)) {
				sx += float64(x)
				sy += float64(y)
				bx.N++
				bx.X0, bx.Y0 = min(bx.X0, x), min(bx.Y0, y)
				bx.X1, bx.Y1 = max(bx.X1, x+1), max(bx.Y1, y+1)
			}
		}
	}
	if bx.N == 0 {
		return Box{}
	}
	bx.CX, bx.CY = sx/float64(bx.N), sy/float64(bx.N)
	return bx
}

// Green matches the mover's square (as agent/demo does).
func Green(r, g, b uint8) bool { return g > 180 && r < 80 && b < 80 }
