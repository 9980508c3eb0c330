package openaitest

import (
	"fmt"
	"image"
	"strings"
	"sync"
	"time"
)

// ResponseBody is a Responses API response (as POST /v1/responses returns
// it) with the given output items.
func ResponseBody(id, prevID, model string, w, h int, output ...any) []byte {
	var prev any
	if prevID != "" {
		prev = prevID
	}
	if output == nil {
		output = []any{}
	}
	return mustJSON(map[string]any{
		"id": id, "object": "response", "created_at": time.Now().Unix(), "status": "completed",
		"error": nil, "incomplete_details": nil, "instructions": "…", "max_output_tokens": 1024,
		"model": model, "output": output, "parallel_tool_calls": true,
		"previous_response_id": prev, "reasoning": map[string]any{"effort": "medium", "summary": nil},
		"store": true, "temperature": 1.0, "text": map[string]any{"format": map[string]any{"type": "text"}},
		"tool_choice": "auto",
		"tools":       []any{map[string]any{"type": "computer_use_preview", "display_width": w, "display_height": h, "environment": "linux"}},
		"top_p":       1.0, "truncation": "auto",
		"usage": map[string]any{
			"input_tokens": 1500, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 30, "output_tokens_details": map[string]any{"reasoning_tokens": 10}, "total_tokens": 1530,
		},
		"user": nil, "metadata": map[string]any{},
	})
}

// ComputerCall is a computer_call output item; checks are pending safety
// checks ({"id", "code", "message"}).
func ComputerCall(callID string, act map[string]any, checks ...map[string]any) map[string]any {
	pc := []any{}
	for _, c := range checks {
		pc = append(pc, c)
	}
	return map[string]any{"type": "computer_call", "id": "cu_" + callID, "call_id": callID,
		"action": act, "pending_safety_checks": pc, "status": "completed"}
}

// FunctionCall is a function_call output item; args is the arguments'
// JSON text.
func FunctionCall(callID, name, args string) map[string]any {
	return map[string]any{"type": "function_call", "id": "fc_" + callID, "call_id": callID,
		"name": name, "arguments": args, "status": "completed"}
}

// Message is an assistant message output item.
func Message(text string) map[string]any {
	return map[string]any{"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
}

// Refusal is an assistant message output item that refuses.
func Refusal(text string) map[string]any {
	return map[string]any{"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
		"content": []any{map[string]any{"type": "refusal", "refusal": text}}}
}

// Reasoning is a reasoning output item with a summary.
func Reasoning(summary string) map[string]any {
	return map[string]any{"type": "reasoning", "id": "rs_1",
		"summary": []any{map[string]any{"type": "summary_text", "text": summary}}}
}

// ResponsesTurn is what a request of the conversation carried.
type ResponsesTurn struct {
	N        int
	Image    image.Image // the screenshot sent (nil if none)
	Text     string      // the user message's text
	Previous string      // previous_response_id
	Acked    []string    // ids of acknowledged safety checks
	// Functions are the names of the function tools offered besides the
	// computer tool (click_mark while the screenshot has marks).
	Functions []string
	// FunctionOutputs are the outputs sent for the last answer's function
	// calls, by call id.
	FunctionOutputs map[string]string
}

// Responses is a scripted Responses API conversation. Every request is
// checked against what the SDK must send — the model, truncation auto, the
// computer_use_preview tool with the display size, the instructions with
// the task, previous_response_id chaining to the last answer, a
// computer_call_output for each call of the last answer with the new
// screenshot as a PNG data URL of the display size, the acknowledged
// safety checks, the bearer key — and failures are recorded on the server.
// Turn decides the output items of each answer.
type Responses struct {
	Key, Model, Task string
	Width, Height    int
	// AckPolicy is what is expected of pending safety checks: "acknowledge"
	// (every check of the last answer is acknowledged) or "" (no check is
	// ever acknowledged).
	AckPolicy string
	Turn      func(t ResponsesTurn) []any

	mu        sync.Mutex
	n         int
	lastID    string
	lastCalls map[string][]string // call id → its check ids
	Turns     []ResponsesTurn
}

// Handle is the Handler of the conversation.
func (x *Responses) Handle(s *Server, r *Request) Reply {
	x.mu.Lock()
	defer x.mu.Unlock()
	if r.Method != "POST" || r.Path != "/v1/responses" {
		s.Errorf("request %d: %s %s, want POST /v1/responses", r.N, r.Method, r.Path)
		return Error(404, "invalid_request_error", "", "no such endpoint")
	}
	if want := "Bearer " + x.Key; x.Key != "" && r.Auth != want {
		s.Errorf("request %d: Authorization %q, want the key", r.N, r.Auth)
	}
	body, err := r.JSON()
	if err != nil {
		s.Errorf("request %d: body is not JSON: %v", r.N, err)
		return Error(400, "invalid_request_error", "", "bad JSON")
	}
	x.n++
	t := ResponsesTurn{N: x.n, Previous: Str(body, "previous_response_id")}
	if m := Str(body, "model"); m != x.Model {
		s.Errorf("request %d: model %q, want %q", r.N, m, x.Model)
	}
	if v := Str(body, "truncation"); v != "auto" {
		s.Errorf("request %d: truncation %q, want auto", r.N, v)
	}
	tools := List(body, "tools")
	if len(tools) < 1 || Str(tools, 0, "type") != "computer_use_preview" || Int(tools, 0, "display_width") != x.Width ||
		Int(tools, 0, "display_height") != x.Height || Str(tools, 0, "environment") != "linux" {
		s.Errorf("request %d: tools = %s, want one computer_use_preview %dx%d linux", r.N, mustJSON(tools), x.Width, x.Height)
	}
	for i := 1; i < len(tools); i++ {
		name := Str(tools, i, "name")
		if Str(tools, i, "type") != "function" || name == "" || Str(tools, i, "parameters", "type") != "object" || Str(tools, i, "description") == "" {
			s.Errorf("request %d: tools[%d] = %s, want a described function with object parameters", r.N, i, mustJSON(tools[i]))
		}
		t.Functions = append(t.Functions, name)
	}
	if !strings.Contains(Str(body, "instructions"), x.Task) {
		s.Errorf("request %d: instructions lack the task %q", r.N, x.Task)
	}
	if t.Previous != x.lastID {
		s.Errorf("request %d: previous_response_id %q, want %q", r.N, t.Previous, x.lastID)
	}
	input := List(body, "input")
	var imageURL string
	seen := map[string]bool{}
	for i, it := range input {
		switch typ := Str(it, "type"); {
		case typ == "computer_call_output":
			id := Str(it, "call_id")
			checks, ok := x.lastCalls[id]
			if !ok {
				s.Errorf("request %d: input[%d]: output for unknown call %q", r.N, i, id)
			} else if checks != nil && len(checks) == 0 {
				s.Errorf("request %d: input[%d]: a computer_call_output for function call %q", r.N, i, id)
			}
			seen[id] = true
			if Str(it, "output", "type") != "computer_screenshot" {
				s.Errorf("request %d: input[%d].output.type = %q", r.N, i, Str(it, "output", "type"))
			}
			imageURL = Str(it, "output", "image_url")
			var acked []string
			for _, a := range List(it, "acknowledged_safety_checks") {
				acked = append(acked, Str(a, "id"))
			}
			t.Acked = append(t.Acked, acked...)
			want := []string(nil)
			if x.AckPolicy == "acknowledge" {
				want = checks
			}
			if fmt.Sprint(acked) != fmt.Sprint(want) {
				s.Errorf("request %d: acknowledged_safety_checks %v, want %v", r.N, acked, want)
			}
		case typ == "function_call_output":
			id := Str(it, "call_id")
			if checks, ok := x.lastCalls[id]; !ok || checks == nil {
				s.Errorf("request %d: input[%d]: function output for %q, which is not a function call of the last answer", r.N, i, id)
			}
			seen[id] = true
			if t.FunctionOutputs == nil {
				t.FunctionOutputs = map[string]string{}
			}
			t.FunctionOutputs[id] = Str(it, "output")
		case typ == "message" || (typ == "" && Str(it, "role") != ""):
			if Str(it, "role") != "user" {
				s.Errorf("request %d: input[%d] role %q", r.N, i, Str(it, "role"))
			}
			if c := Str(it, "content"); c != "" {
				t.Text = c
			}
			for _, p := range List(it, "content") {
				switch Str(p, "type") {
				case "input_text":
					t.Text = Str(p, "text")
				case "input_image":
					imageURL = Str(p, "image_url")
				}
			}
		default:
			s.Errorf("request %d: input[%d] has type %q", r.N, i, typ)
		}
	}
	for id := range x.lastCalls {
		if !seen[id] {
			s.Errorf("request %d: no computer_call_output for call %q", r.N, id)
		}
	}
	if imageURL == "" {
		s.Errorf("request %d: no screenshot", r.N)
	} else if img, err := DecodeDataURL(imageURL); err != nil {
		s.Errorf("request %d: screenshot: %v", r.N, err)
	} else {
		t.Image = img
		if b := img.Bounds(); b.Dx() != x.Width || b.Dy() != x.Height {
			s.Errorf("request %d: screenshot is %dx%d, want %dx%d", r.N, b.Dx(), b.Dy(), x.Width, x.Height)
		}
	}
	x.Turns = append(x.Turns, t)
	out := x.Turn(t)
	id := fmt.Sprintf("resp_%04d", x.n)
	x.lastID = id
	x.lastCalls = map[string][]string{}
	for _, o := range out {
		m, _ := o.(map[string]any)
		if Str(m, "type") == "function_call" {
			x.lastCalls[Str(m, "call_id")] = []string{} // not nil: a function call
			continue
		}
		if Str(m, "type") != "computer_call" {
			continue
		}
		var ids []string
		for _, c := range List(m, "pending_safety_checks") {
			ids = append(ids, Str(c, "id"))
		}
		x.lastCalls[Str(m, "call_id")] = ids
	}
	return Reply{Body: ResponseBody(id, t.Previous, x.Model, x.Width, x.Height, out...)}
}

// MoverTurns plays the mover demo with keypress ["RIGHT"] until the square
// moved m.MinDX, then finishes with a message.
func MoverTurns(s *Server, m *Mover) func(t ResponsesTurn) []any {
	return func(t ResponsesTurn) []any {
		if t.Image == nil {
			return []any{ComputerCall(fmt.Sprintf("call_%04d", t.N), map[string]any{"type": "screenshot"})}
		}
		done, moved, err := m.Look(t.Image)
		if err != nil {
			s.Errorf("turn %d: %v", t.N, err)
		}
		if done {
			return []any{Message(fmt.Sprintf("The green square moved %+.0f px to the right; the task is done.", moved))}
		}
		return []any{Reasoning("The square must go right; pressing the right arrow."),
			ComputerCall(fmt.Sprintf("call_%04d", t.N), map[string]any{"type": "keypress", "keys": []any{"RIGHT"}})}
	}
}
