package openaitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"strings"
	"sync"
	"time"
)

// ChatBody is a chat completion (as POST /v1/chat/completions returns it)
// whose message says content.
func ChatBody(model, content string) []byte {
	return chatBody(model, map[string]any{"role": "assistant", "content": content, "refusal": nil}, "stop")
}

// ChatRefusal is a chat completion that refuses.
func ChatRefusal(model, refusal string) []byte {
	return chatBody(model, map[string]any{"role": "assistant", "content": nil, "refusal": refusal}, "stop")
}

func chatBody(model string, msg map[string]any, finish string) []byte {
	return mustJSON(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": time.Now().Unix(), "model": model,
		"choices":            []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
		"usage":              map[string]any{"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940},
		"system_fingerprint": "fp_test",
	})
}

// ChatTurn is what one chat request carried.
type ChatTurn struct {
	N int
	// Image is the current screenshot (in the last user message).
	Image image.Image
	// Text is the last user message's text.
	Text string
	// History is the number of earlier (user, assistant) pairs before the
	// current observation; Corrections the (assistant, user) pairs after
	// it (malformed answers told back).
	History, Corrections int
	// Images counts the screenshots in the request; Omitted the notes that
	// replace older ones.
	Images, Omitted int
	Messages        []any
}

// Chat is a scripted chat-completions server. Every request is checked:
// the model, the system prompt with the task, response_format (for
// json_schema: strict, with Schema), the current screenshot as a PNG data
// URL of Width×Height, at most MaxScreenshots images, at most MaxHistory
// earlier steps, the key (Key "" means no Authorization header at all).
// Turn decides each answer's content.
type Chat struct {
	Key, Model, Task string
	Width, Height    int
	Format           string // json_schema, json_object or none
	Schema           string // the expected schema for json_schema
	MaxScreenshots   int
	MaxHistory       int
	Turn             func(t ChatTurn) string

	mu    sync.Mutex
	n     int
	Turns []ChatTurn
}

// Handle is the Handler of the conversation.
func (x *Chat) Handle(s *Server, r *Request) Reply {
	x.mu.Lock()
	defer x.mu.Unlock()
	if r.Method != "POST" || r.Path != "/v1/chat/completions" {
		s.Errorf("request %d: %s %s, want POST /v1/chat/completions", r.N, r.Method, r.Path)
		return Error(404, "invalid_request_error", "", "no such endpoint")
	}
	switch {
	case x.Key == "" && r.Auth != "":
		s.Errorf("request %d: an Authorization header was sent without a key", r.N)
	case x.Key != "" && r.Auth != "Bearer "+x.Key:
		s.Errorf("request %d: Authorization %q, want the key", r.N, r.Auth)
	}
	body, err := r.JSON()
	if err != nil {
		s.Errorf("request %d: body is not JSON: %v", r.N, err)
		return Error(400, "invalid_request_error", "", "bad JSON")
	}
	x.n++
	t := ChatTurn{N: x.n}
	if m := Str(body, "model"); m != x.Model {
		s.Errorf("request %d: model %q, want %q", r.N, m, x.Model)
	}
	rf := Get(body, "response_format")
	switch x.Format {
	case "json_schema":
		js := Get(rf, "json_schema")
		if Str(rf, "type") != "json_schema" || Get(js, "strict") != true || Str(js, "name") == "" {
			s.Errorf("request %d: response_format = %s, want a strict json_schema", r.N, mustJSON(rf))
		}
		if !sameJSON(Get(js, "schema"), x.Schema) {
			s.Errorf("request %d: schema = %s, want %s", r.N, mustJSON(Get(js, "schema")), x.Schema)
		}
	case "json_object":
		if Str(rf, "type") != "json_object" {
			s.Errorf("request %d: response_format = %s, want json_object", r.N, mustJSON(rf))
		}
	case "none":
		if rf != nil {
			s.Errorf("request %d: response_format = %s, want none", r.N, mustJSON(rf))
		}
	}
	msgs := List(body, "messages")
	t.Messages = msgs
	if Str(msgs, 0, "role") != "system" || !strings.Contains(Str(msgs, 0, "content"), x.Task) {
		s.Errorf("request %d: the first message is not a system prompt with the task", r.N)
	}
	// system, (user, assistant)*, user (current), (assistant, user)*
	cur := -1
	for i := 1; i < len(msgs); i++ {
		role := Str(msgs, i, "role")
		if cur < 0 {
			want := []string{"user", "assistant"}[(i-1)%2]
			if role != want {
				s.Errorf("request %d: message %d has role %q, want %q", r.N, i, role, want)
			}
			if role == "user" && hasImage(Get(msgs, i)) && !hasLaterImage(msgs, i) {
				cur = i
			}
		}
		for _, p := range List(msgs, i, "content") {
			switch Str(p, "type") {
			case "image_url":
				t.Images++
				if i == cur {
					img, err := DecodeDataURL(Str(p, "image_url", "url"))
					if err != nil {
						s.Errorf("request %d: screenshot: %v", r.N, err)
					} else {
						t.Image = img
						if b := img.Bounds(); b.Dx() != x.Width || b.Dy() != x.Height {
							s.Errorf("request %d: screenshot is %dx%d, want %dx%d", r.N, b.Dx(), b.Dy(), x.Width, x.Height)
						}
					}
				}
			case "text":
				if strings.Contains(Str(p, "text"), "screenshot omitted") {
					t.Omitted++
				}
				if i == cur {
					t.Text = Str(p, "text")
				}
			}
		}
	}
	if cur < 0 {
		s.Errorf("request %d: no current screenshot", r.N)
	} else {
		t.History = (cur - 1) / 2
		t.Corrections = (len(msgs) - 1 - cur) / 2
	}
	if t.Images > x.MaxScreenshots {
		s.Errorf("request %d: %d screenshots, want at most %d", r.N, t.Images, x.MaxScreenshots)
	}
	if t.History > x.MaxHistory {
		s.Errorf("request %d: %d earlier steps, want at most %d", r.N, t.History, x.MaxHistory)
	}
	if t.Images+t.Omitted != t.History+1 {
		s.Errorf("request %d: %d screenshots and %d omitted notes for %d steps", r.N, t.Images, t.Omitted, t.History+1)
	}
	x.Turns = append(x.Turns, t)
	return Reply{Body: ChatBody(x.Model, x.Turn(t))}
}

func hasImage(msg any) bool {
	for _, p := range List(msg, "content") {
		if Str(p, "type") == "image_url" {
			return true
		}
	}
	return false
}

func hasLaterImage(msgs []any, i int) bool {
	for j := i + 1; j < len(msgs); j++ {
		if hasImage(msgs[j]) {
			return true
		}
	}
	return false
}

func sameJSON(v any, want string) bool {
	var w any
	d := json.NewDecoder(strings.NewReader(want))
	d.UseNumber()
	if d.Decode(&w) != nil {
		return false
	}
	return bytes.Equal(mustJSON(v), mustJSON(w))
}

// MoverAnswers plays the mover demo with {"action":"key","keys":"Right"}
// until the square moved m.MinDX, then answers done.
func MoverAnswers(s *Server, m *Mover) func(t ChatTurn) string {
	return func(t ChatTurn) string {
		if t.Image == nil {
			return `{"thought": "I see nothing.", "action": "wait", "ms": 100}`
		}
		done, moved, err := m.Look(t.Image)
		if err != nil {
			s.Errorf("turn %d: %v", t.N, err)
		}
		if done {
			return fmt.Sprintf(`{"thought": "The square moved %+.0f px.", "action": "done", "x": null, "y": null, "dx": null, "dy": null, "button": null, "count": null, "keys": null, "key": null, "repeat": null, "text": null, "path": null, "ms": null, "success": true, "message": "the green square moved %+.0f px to the right"}`, moved, moved)
		}
		return `{"thought": "The square is still left; pressing Right.", "action": "key", "x": null, "y": null, "dx": null, "dy": null, "button": null, "count": null, "keys": "Right", "key": null, "repeat": null, "text": null, "path": null, "ms": null, "success": null, "message": null}`
	}
}
