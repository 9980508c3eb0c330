package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/agent/openai/openaitest"
	"github.com/codegirl-games/agentbox/observe"
)

func newResponses(t testing.TB, srv *openaitest.Server, opts agent.Options) *Responses {
	t.Helper()
	o := agent.Options{"base_url": srv.URL, "model": "computer-use-preview"}
	for k, v := range opts {
		o[k] = v
	}
	r, err := NewResponses(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestResponsesPlaysMover drives the Responses agent through a scripted
// model that reads the screenshots and plays the mover (in a simulated
// environment; e2e/openai_test.go does it in a real sandbox).
func TestResponsesPlaysMover(t *testing.T) {
	setKey(t)
	m := &openaitest.Mover{MinDX: 100}
	var srv *openaitest.Server
	conv := &openaitest.Responses{Key: testKey, Model: "computer-use-preview", Task: "Move the character right.", Width: 640, Height: 480, AckPolicy: "acknowledge"}
	srv = openaitest.New(t, conv.Handle)
	conv.Turn = openaitest.MoverTurns(srv, m)
	ag := newResponses(t, srv, nil)
	s := newSim(640, 480)
	ds, err := s.run(t, ag, 100)
	if err != nil {
		t.Fatal(err)
	}
	srv.Check(t)
	last := ds[len(ds)-1]
	if !last.Action.Succeeded() || !strings.Contains(last.Action.Message, "moved +") {
		t.Errorf("last decision %+v", last.Action)
	}
	if s.x-41 < 100 {
		t.Errorf("the square moved %d px", s.x-41)
	}
	for _, a := range s.acts {
		if a.Kind != action.Key || a.Keys != "RIGHT" {
			t.Errorf("action %s, want key RIGHT", a)
		}
	}
	if n := len(srv.Requests()); n != len(ds) {
		t.Errorf("%d requests for %d decisions", n, len(ds))
	}
	// Chaining: request n+1 continues response n.
	for i, turn := range conv.Turns {
		want := ""
		if i > 0 {
			want = fmt.Sprintf("resp_%04d", i)
		}
		if turn.Previous != want {
			t.Errorf("turn %d: previous_response_id %q, want %q", i+1, turn.Previous, want)
		}
	}
	d := ds[1]
	if d.Meta["model"] != "computer-use-preview" || d.Meta["attempts"] != 1 || d.Meta["response_id"] != "resp_0002" {
		t.Errorf("meta = %v", d.Meta)
	}
	ex := string(d.Files["exchange.json"])
	if !strings.Contains(ex, "<screenshot screenshots/000002.png>") || strings.Contains(ex, "iVBOR") {
		t.Errorf("exchange.json does not reference the screenshot or holds image data:\n%.2000s", ex)
	}
	var exs []map[string]any
	if err := json.Unmarshal(d.Files["exchange.json"], &exs); err != nil || len(exs) != 1 {
		t.Fatalf("exchange.json: %v (%d exchanges)", err, len(exs))
	}
	assertNoKey(t, ds)
}

// TestResponsesScaledScreen: a 1920×1080 screen is sent at max_width
// 1280 (1280×720, the tool's display size) and the model's coordinates are
// mapped back to the screen exactly.
func TestResponsesScaledScreen(t *testing.T) {
	setKey(t)
	conv := &openaitest.Responses{Key: testKey, Model: "computer-use-preview", Task: "Move", Width: 1280, Height: 720}
	srv := openaitest.New(t, conv.Handle)
	conv.Turn = func(turn openaitest.ResponsesTurn) []any {
		// Click the centre of the square as seen in the scaled image.
		x, _ := openaitest.GreenX(turn.Image)
		return []any{openaitest.ComputerCall("c1", map[string]any{"type": "click", "button": "left", "x": int(x), "y": 173})}
	}
	ag := newResponses(t, srv, nil)
	s := newSim(1920, 1080)
	obs := s.observe()
	obs.Cursor = action.Point{X: 1919, Y: 1079}
	obs.Windows = []observe.Window{{Title: "mover", X: 300, Y: 150, Width: 960, Height: 540}}
	d, err := ag.Decide(t.Context(), obs)
	if err != nil {
		t.Fatal(err)
	}
	srv.Check(t)
	// The text speaks in the model's coordinates too.
	if txt := conv.Turns[0].Text; !strings.Contains(txt, "Cursor at (1279,719)") || !strings.Contains(txt, `"mover" at (200,100) 640x360`) {
		t.Errorf("observation text in screen coordinates: %q", txt)
	}
	// The square spans x 41..80 on the screen (centre 60.5): in the image
	// scaled by 2/3 it is centred at ≈40; mapped back that is ≈60.
	v, _ := observe.NewView(s.frame(), nil, 0, 1280, 0)
	x, _ := openaitest.GreenX(conv.Turns[0].Image)
	wx, wy := v.ToScreen(int(x), 173)
	if d.Action.Kind != action.Click || *d.Action.X != wx || *d.Action.Y != wy {
		t.Errorf("action %s, want click at %d,%d", d.Action, wx, wy)
	}
	if *d.Action.X < 41 || *d.Action.X > 80 || *d.Action.Y < 255 || *d.Action.Y > 265 {
		t.Errorf("click at %d,%d is not on the square", *d.Action.X, *d.Action.Y)
	}
}

// TestResponsesMalformed: an answer agentbox cannot run is told back
// (the next input answers the call with the same screenshot and says what
// was wrong), retried max_malformed times, then ends with ErrMalformed
// naming what the model kept answering.
func TestResponsesMalformed(t *testing.T) {
	setKey(t)
	for _, tt := range []struct {
		name string
		out  func(n int) []any
		want string
	}{
		{"unknown key", func(n int) []any {
			return []any{openaitest.ComputerCall(fmt.Sprintf("c%d", n), map[string]any{"type": "keypress", "keys": []any{"NOTAKEY"}})}
		}, `unknown key "NOTAKEY"`},
		{"off the screen", func(n int) []any {
			return []any{openaitest.ComputerCall(fmt.Sprintf("c%d", n), map[string]any{"type": "click", "button": "left", "x": 700, "y": 10})}
		}, "(700,10) is outside the 640x480 screenshot"},
		{"unknown action", func(n int) []any {
			return []any{openaitest.ComputerCall(fmt.Sprintf("c%d", n), map[string]any{"type": "teleport", "x": 1, "y": 1})}
		}, `unknown computer action "teleport"`},
		{"refusal", func(n int) []any { return []any{openaitest.Refusal("I can't help with that.")} }, "refused"},
		{"empty", func(n int) []any { return nil }, "neither a computer call nor a message"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conv := &openaitest.Responses{Key: testKey, Model: "computer-use-preview", Task: "Move", Width: 640, Height: 480}
			srv := openaitest.New(t, conv.Handle)
			conv.Turn = func(turn openaitest.ResponsesTurn) []any { return tt.out(turn.N) }
			ag := newResponses(t, srv, agent.Options{"max_malformed": "2"})
			d, err := ag.Decide(t.Context(), newSim(640, 480).observe())
			srv.Check(t)
			if !errors.Is(err, agent.ErrMalformed) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "after 3 attempts") {
				t.Fatalf("err = %v, want ErrMalformed naming %q", err, tt.want)
			}
			if len(conv.Turns) != 3 {
				t.Fatalf("%d requests, want 3", len(conv.Turns))
			}
			for _, turn := range conv.Turns[1:] {
				if !strings.Contains(turn.Text, "Your last answer was not performed") || !strings.Contains(turn.Text, tt.want) {
					t.Errorf("request %d does not tell the model what was wrong: %q", turn.N, turn.Text)
				}
			}
			if d.Meta["attempts"] != 3 || len(d.Meta["malformed"].([]string)) != 3 || d.Files["exchange.json"] == nil {
				t.Errorf("meta %v, files %d", d.Meta, len(d.Files))
			}
		})
	}
}

// TestResponsesMalformedThenGood: one bad answer, told back, then a good
// one: the decision succeeds on attempt 2 and records the problem.
func TestResponsesMalformedThenGood(t *testing.T) {
	setKey(t)
	conv := &openaitest.Responses{Key: testKey, Model: "computer-use-preview", Task: "Move", Width: 640, Height: 480}
	srv := openaitest.New(t, conv.Handle)
	conv.Turn = func(turn openaitest.ResponsesTurn) []any {
		if turn.N == 1 {
			return []any{openaitest.ComputerCall("c1", map[string]any{"type": "click", "button": "left"})}
		}
		return []any{openaitest.ComputerCall("c2", map[string]any{"type": "double_click", "x": 10, "y": 20, "keys": []any{"SHIFT"}})}
	}
	ag := newResponses(t, srv, nil)
	d, err := ag.Decide(t.Context(), newSim(640, 480).observe())
	if err != nil {
		t.Fatal(err)
	}
	srv.Check(t)
	if d.Action.Kind != action.Click || d.Action.Count != 2 || d.Action.Keys != "SHIFT" || *d.Action.X != 10 {
		t.Errorf("action %+v", d.Action)
	}
	if d.Meta["attempts"] != 2 || !strings.Contains(fmt.Sprint(d.Meta["malformed"]), "click needs x and y") {
		t.Errorf("meta %v", d.Meta)
	}
}

// TestResponsesFinish: a message without a computer call finishes the
// run; one starting "FAILED:" gives up.
func TestResponsesFinish(t *testing.T) {
	setKey(t)
	for _, tt := range []struct {
		text, msg string
		ok        bool
	}{
		{"The square moved.", "The square moved.", true},
		{"FAILED: there is no square.", "there is no square.", false},
	} {
		conv := &openaitest.Responses{Key: testKey, Model: "computer-use-preview", Task: "Move", Width: 640, Height: 480}
		srv := openaitest.New(t, conv.Handle)
		conv.Turn = func(openaitest.ResponsesTurn) []any {
			return []any{openaitest.Reasoning("Looking."), openaitest.Message(tt.text)}
		}
		d, err := newResponses(t, srv, nil).Decide(t.Context(), newSim(640, 480).observe())
		if err != nil {
			t.Fatal(err)
		}
		srv.Check(t)
		if d.Action.Kind != action.Done || d.Action.Succeeded() != tt.ok || d.Action.Message != tt.msg {
			t.Errorf("%q: action %+v", tt.text, d.Action)
		}
		if !strings.Contains(openaitest.Str(mustBody(t, srv.Requests()[0]), "instructions"), "has no done action") {
			t.Error("the instructions do not say how to finish")
		}
	}
}

func mustBody(t *testing.T, r *openaitest.Request) map[string]any {
	t.Helper()
	b, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestResponsesRetries: 429 twice (with Retry-After) then success: the SDK
// retried, the decision succeeds, all three attempts are recorded.
func TestResponsesRetries(t *testing.T) {
	setKey(t)
	conv := &openaitest.Responses{Key: testKey, Model: "computer-use-preview", Task: "Move", Width: 640, Height: 480}
	conv.Turn = func(openaitest.ResponsesTurn) []any { return []any{openaitest.Message("done")} }
	srv := openaitest.New(t, func(s *openaitest.Server, r *openaitest.Request) openaitest.Reply {
		if r.N <= 2 {
			rep := openaitest.Error(429, "requests", "rate_limit_exceeded", "Rate limit reached for requests")
			rep.Header = map[string]string{"Retry-After": "0.05"}
			return rep
		}
		return conv.Handle(s, r)
	})
	ag := newResponses(t, srv, nil)
	t0 := time.Now()
	d, err := ag.Decide(t.Context(), newSim(640, 480).observe())
	if err != nil {
		t.Fatal(err)
	}
	srv.Check(t)
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	if d.Action.Kind != action.Done || d.Action.Message != "done" {
		t.Errorf("action %+v", d.Action)
	}
	var exs []struct{ Status int }
	json.Unmarshal(d.Files["exchange.json"], &exs)
	if len(exs) != 3 || exs[0].Status != 429 || exs[1].Status != 429 || exs[2].Status != 200 {
		t.Errorf("recorded exchanges %+v", exs)
	}
	t.Logf("decided after two 429s in %v", time.Since(t0))
}

// TestResponsesServerError: a persistent 503 ends the decision with an
// error (not ErrMalformed) naming the status and the server's message
// after max_retries+1 attempts.
func TestResponsesServerError(t *testing.T) {
	setKey(t)
	srv := openaitest.New(t, func(s *openaitest.Server, r *openaitest.Request) openaitest.Reply {
		rep := openaitest.Error(503, "server_error", "", "The engine is currently overloaded")
		rep.Header = map[string]string{"Retry-After-Ms": "10"}
		return rep
	})
	ag := newResponses(t, srv, agent.Options{"max_retries": "2"})
	_, err := ag.Decide(t.Context(), newSim(640, 480).observe())
	if err == nil || errors.Is(err, agent.ErrMalformed) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"HTTP 503 Service Unavailable", "overloaded", "3 attempts"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
}

// TestResponsesTimeout: a server that never answers is abandoned after the
// timeout, retried, and the decision fails in bounded time.
func TestResponsesTimeout(t *testing.T) {
	setKey(t)
	srv := openaitest.New(t, func(s *openaitest.Server, r *openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Stall: time.Minute}
	})
	ag := newResponses(t, srv, agent.Options{"max_retries": "2", "timeout": "300ms"})
	t0 := time.Now()
	_, err := ag.Decide(t.Context(), newSim(640, 480).observe())
	el := time.Since(t0)
	if err == nil || !strings.Contains(err.Error(), "did not answer within 300ms") || !strings.Contains(err.Error(), "3 attempts") {
		t.Fatalf("err = %v", err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3 (the timeouts were retried)", n)
	}
	if el > 40*time.Second { // a stall waited out would take a minute
		t.Errorf("took %v", el)
	}
	t.Logf("3 attempts of 300ms with backoff: %v", el)
}

// TestResponsesSafetyChecks: pending safety checks are recorded in the
// meta; by default they are acknowledged in the next computer_call_output
// (the fake server checks that); with safety_checks=stop the run ends
// (done, success false) without running the call.
func TestResponsesSafetyChecks(t *testing.T) {
	setKey(t)
	check := map[string]any{"id": "cu_sc_1", "code": "malicious_instructions", "message": "The screen contains instructions that may be malicious."}
	turn := func(turn openaitest.ResponsesTurn) []any {
		if turn.N == 1 {
			return []any{openaitest.ComputerCall("c1", map[string]any{"type": "keypress", "keys": []any{"RIGHT"}}, check)}
		}
		return []any{openaitest.Message("done")}
	}
	t.Run("acknowledge", func(t *testing.T) {
		conv := &openaitest.Responses{Key: testKey, Model: "computer-use-preview", Task: "Move", Width: 640, Height: 480, AckPolicy: "acknowledge", Turn: turn}
		srv := openaitest.New(t, conv.Handle)
		ag := newResponses(t, srv, nil)
		s := newSim(640, 480)
		ds, err := s.run(t, ag, 5)
		if err != nil {
			t.Fatal(err)
		}
		srv.Check(t)
		if len(ds) != 2 || ds[0].Action.Kind != action.Key {
			t.Fatalf("decisions %v", ds)
		}
		checks, _ := ds[0].Meta["pending_safety_checks"].([]safetyCheck)
		if len(checks) != 1 || checks[0].Code != "malicious_instructions" {
			t.Errorf("meta %v", ds[0].Meta)
		}
		if got := conv.Turns[1].Acked; len(got) != 1 || got[0] != "cu_sc_1" {
			t.Errorf("acknowledged %v", got)
		}
	})
	t.Run("stop", func(t *testing.T) {
		conv := &openaitest.Responses{Key: testKey, Model: "computer-use-preview", Task: "Move", Width: 640, Height: 480, Turn: turn}
		srv := openaitest.New(t, conv.Handle)
		ag := newResponses(t, srv, agent.Options{"safety_checks": "stop"})
		s := newSim(640, 480)
		ds, err := s.run(t, ag, 5)
		if err != nil {
			t.Fatal(err)
		}
		srv.Check(t)
		d := ds[0]
		if len(ds) != 1 || d.Action.Kind != action.Done || d.Action.Succeeded() || !strings.Contains(d.Action.Message, "malicious_instructions") {
			t.Errorf("decision %+v", d.Action)
		}
		if d.Meta["pending_safety_checks"] == nil || len(s.acts) != 0 {
			t.Errorf("meta %v, actions run %v", d.Meta, s.acts)
		}
	})
}

// TestResponsesHeldKeys: a move with keys held becomes key_down, the move
// and key_up, decided one per step without asking the model again.
func TestResponsesHeldKeys(t *testing.T) {
	setKey(t)
	conv := &openaitest.Responses{Key: testKey, Model: "computer-use-preview", Task: "Move", Width: 640, Height: 480}
	srv := openaitest.New(t, conv.Handle)
	conv.Turn = func(turn openaitest.ResponsesTurn) []any {
		if turn.N == 1 {
			return []any{openaitest.ComputerCall("c1", map[string]any{"type": "drag", "path": []any{map[string]any{"x": 1, "y": 2}, map[string]any{"x": 30, "y": 40}}, "keys": []any{"SHIFT"}})}
		}
		return []any{openaitest.Message("ok")}
	}
	ag := newResponses(t, srv, nil)
	s := newSim(640, 480)
	ds, err := s.run(t, ag, 10)
	if err != nil {
		t.Fatal(err)
	}
	srv.Check(t)
	var got []string
	for _, d := range ds {
		got = append(got, d.Action.String())
	}
	if strings.Join(got, ", ") != "key_down SHIFT, drag, key_up SHIFT, done" || len(srv.Requests()) != 2 {
		t.Errorf("decisions %v after %d requests", got, len(srv.Requests()))
	}
}

// TestResponsesBatchedActions: a computer call with an actions list (the
// GA tool's batching) runs one action per step and is answered once.
func TestResponsesBatchedActions(t *testing.T) {
	setKey(t)
	conv := &openaitest.Responses{Key: testKey, Model: "computer-use-preview", Task: "Move", Width: 640, Height: 480}
	srv := openaitest.New(t, conv.Handle)
	conv.Turn = func(turn openaitest.ResponsesTurn) []any {
		if turn.N == 1 {
			c := openaitest.ComputerCall("c1", nil)
			delete(c, "action")
			c["actions"] = []any{map[string]any{"type": "keypress", "keys": []any{"RIGHT"}}, map[string]any{"type": "type", "text": "hi"}}
			return []any{c}
		}
		return []any{openaitest.Message("ok")}
	}
	ds, err := newSim(640, 480).run(t, newResponses(t, srv, nil), 10)
	if err != nil {
		t.Fatal(err)
	}
	srv.Check(t)
	var got []string
	for _, d := range ds {
		got = append(got, d.Action.String())
	}
	if strings.Join(got, ", ") != `key RIGHT, type "hi", done` || len(srv.Requests()) != 2 || ds[1].Meta["continues_call"] != true {
		t.Errorf("decisions %v after %d requests", got, len(srv.Requests()))
	}
}

func TestResponsesOptions(t *testing.T) {
	setKey(t)
	for _, tt := range []struct {
		opts agent.Options
		want string
	}{
		{agent.Options{"max_screenshots": "2"}, "does not apply"},
		{agent.Options{"api_key": "sk"}, "unknown option"},
		{agent.Options{"safety_checks": "maybe"}, "safety_checks"},
		{agent.Options{"max_width": "10"}, "max_width"},
		{agent.Options{"max_scroll": "0"}, "max_scroll"},
		{agent.Options{"api_key_env": "AGENTBOX_TEST_NO_SUCH_KEY"}, "set AGENTBOX_TEST_NO_SUCH_KEY"},
	} {
		if _, err := NewResponses(tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewResponses(%v) = %v, want %q", tt.opts, err, tt.want)
		}
	}
	if _, err := agent.New("openai", agent.Options{"wait_ms": "500", "max_scroll": "5", "safety_checks": "stop"}); err != nil {
		t.Errorf("agent.New(openai): %v", err)
	}
}

// TestResponsesMarks: while the screenshot has marks the Responses agent
// offers the click_mark function beside the computer tool; a call to it
// clicks the mark's centre in screen pixels (on a scaled screen, not
// mapped again), an unknown mark is told back as malformed, and the next
// request answers the function call with a function_call_output and
// sends the screenshot in the user message. Without marks the function is
// not offered and a call to it is malformed.
func TestResponsesMarks(t *testing.T) {
	setKey(t)
	marks := []observe.Mark{
		{N: 1, ID: "1.2/9", Role: "push button", Name: "Cancel", Bounds: action.Rect{100, 100, 200, 140}},
		{N: 2, ID: "1.2/10", Role: "push button", Name: "OK", Bounds: action.Rect{1500, 900, 1600, 940}},
	}
	answers := [][]any{
		{openaitest.FunctionCall("f1", "click_mark", `{"mark": 9}`)},
		{openaitest.Reasoning("OK is mark 2."), openaitest.FunctionCall("f2", "click_mark", `{"mark": 2}`)},
		{openaitest.Message("Pressed OK.")},
	}
	conv := &openaitest.Responses{Key: testKey, Model: "computer-use-preview", Task: "Move", Width: 1280, Height: 720,
		Turn: func(t openaitest.ResponsesTurn) []any { return answers[min(t.N, len(answers))-1] }}
	srv := openaitest.New(t, conv.Handle)
	ag := newResponses(t, srv, nil)
	obs := newSim(1920, 1080).observe()
	obs.Marks = marks
	d, err := ag.Decide(t.Context(), obs)
	if err != nil {
		t.Fatal(err)
	}
	if d.Action.Kind != action.Click || d.Action.Mark != 2 || *d.Action.X != 1550 || *d.Action.Y != 920 {
		t.Errorf("action %+v", d.Action)
	}
	if p := fmt.Sprint(d.Meta["malformed"]); !strings.Contains(p, "mark 9: the screenshot's marks are 1 to 2") {
		t.Errorf("the unknown mark was not told back: %v", p)
	}
	d, err = ag.Decide(t.Context(), obs)
	if err != nil {
		t.Fatal(err)
	}
	if d.Action.Kind != action.Done || d.Message != "Pressed OK." {
		t.Errorf("the last decision: %+v", d)
	}
	srv.Check(t)
	if len(conv.Turns) != 3 {
		t.Fatalf("%d requests, want 3", len(conv.Turns))
	}
	for i, turn := range conv.Turns {
		if fmt.Sprint(turn.Functions) != "[click_mark]" {
			t.Errorf("request %d offered the functions %v, want [click_mark]", i+1, turn.Functions)
		}
	}
	if txt := conv.Turns[0].Text; !strings.Contains(txt, `<untrusted source="accessibility marks">`) || !strings.Contains(txt, `[2] push button "OK"`) {
		t.Errorf("the marks are not told: %q", txt)
	}
	if out := conv.Turns[1].FunctionOutputs["f1"]; !strings.Contains(out, "Not performed") || !strings.Contains(conv.Turns[1].Text, "mark 9") {
		t.Errorf("the malformed call's output %q, the message %q", out, conv.Turns[1].Text)
	}
	if out := conv.Turns[2].FunctionOutputs["f2"]; !strings.HasPrefix(out, "Done") {
		t.Errorf("the click's output %q", out)
	}

	t.Run("no marks", func(t *testing.T) {
		conv := &openaitest.Responses{Key: testKey, Model: "computer-use-preview", Task: "Move", Width: 640, Height: 480,
			Turn: func(t openaitest.ResponsesTurn) []any {
				if t.N == 1 {
					return []any{openaitest.FunctionCall("f1", "click_mark", `{"mark": 1}`)}
				}
				return []any{openaitest.Message("done")}
			}}
		srv := openaitest.New(t, conv.Handle)
		ag := newResponses(t, srv, nil)
		d, err := ag.Decide(t.Context(), newSim(640, 480).observe())
		if err != nil {
			t.Fatal(err)
		}
		srv.Check(t)
		if d.Action.Kind != action.Done {
			t.Errorf("action %+v", d.Action)
		}
		if p := fmt.Sprint(d.Meta["malformed"]); !strings.Contains(p, `unknown function "click_mark"`) {
			t.Errorf("the call was not told back as malformed: %v", p)
		}
		if len(conv.Turns[0].Functions) != 0 {
			t.Errorf("functions offered without marks: %v", conv.Turns[0].Functions)
		}
	})
}
