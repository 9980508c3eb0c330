package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/agent/openai/openaitest"
	"github.com/codegirl-games/agentbox/observe"
)

func newChat(t testing.TB, srv *openaitest.Server, opts agent.Options) *Chat {
	t.Helper()
	o := agent.Options{"base_url": srv.URL, "model": "qwen2.5vl:7b"}
	for k, v := range opts {
		o[k] = v
	}
	c, err := NewChat(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func chatConv(key string, maxShots, maxHistory int) *openaitest.Chat {
	return &openaitest.Chat{Key: key, Model: "qwen2.5vl:7b", Task: "Move the character right.", Width: 640, Height: 480,
		Format: FormatSchema, Schema: AnswerSchema, MaxScreenshots: maxShots, MaxHistory: maxHistory}
}

// TestChatPlaysMover drives the chat agent through a scripted model that
// reads the screenshots and plays the mover (simulated environment), and
// checks the conversation it was sent: the strict JSON schema, the history
// bounded by max_history, only the latest max_screenshots images with
// older ones replaced by a note.
func TestChatPlaysMover(t *testing.T) {
	setKey(t)
	m := &openaitest.Mover{MinDX: 100}
	conv := chatConv(testKey, 2, 3)
	srv := openaitest.New(t, conv.Handle)
	conv.Turn = openaitest.MoverAnswers(srv, m)
	ag := newChat(t, srv, agent.Options{"max_screenshots": "2", "max_history": "3"})
	s := newSim(640, 480)
	ds, err := s.run(t, ag, 100)
	if err != nil {
		t.Fatal(err)
	}
	srv.Check(t)
	last := ds[len(ds)-1].Action
	if last.Kind != action.Done || !last.Succeeded() || !strings.Contains(last.Message, "moved +") {
		t.Errorf("last action %+v", last)
	}
	if s.x-41 < 100 {
		t.Errorf("the square moved %d px", s.x-41)
	}
	var hist, imgs, omitted []int
	for _, turn := range conv.Turns {
		hist, imgs, omitted = append(hist, turn.History), append(imgs, turn.Images), append(omitted, turn.Omitted)
	}
	// History grows to max_history; images to max_screenshots; the rest of
	// the history carries notes.
	if fmt.Sprint(hist[:5]) != "[0 1 2 3 3]" || fmt.Sprint(imgs[:5]) != "[1 2 2 2 2]" || fmt.Sprint(omitted[:5]) != "[0 0 1 2 2]" {
		t.Errorf("history %v, images %v, omitted %v", hist[:5], imgs[:5], omitted[:5])
	}
	if !strings.Contains(conv.Turns[0].Text, `<untrusted source="application output">`) {
		t.Errorf("the app's output is not marked untrusted: %q", conv.Turns[0].Text)
	}
	d := ds[0]
	if d.Message != "The square is still left; pressing Right." || d.Meta["model"] != "qwen2.5vl:7b" || d.Meta["attempts"] != 1 {
		t.Errorf("decision message %q, meta %v", d.Message, d.Meta)
	}
	if u := d.Meta["usage"]; !strings.Contains(fmt.Sprint(u), "900 40") {
		t.Errorf("usage %v", d.Meta["usage"])
	}
	ex := string(d.Files["exchange.json"])
	if !strings.Contains(ex, "<screenshot screenshots/000001.png>") || strings.Contains(ex, "iVBOR") {
		t.Errorf("exchange.json:\n%.1500s", ex)
	}
	assertNoKey(t, ds)
}

// TestChatMalformed: invalid JSON, an unknown action, coordinates off the
// screenshot and a refusal are each told back as a user message; after
// max_malformed retries the decision fails with ErrMalformed saying what
// the model kept answering.
func TestChatMalformed(t *testing.T) {
	setKey(t)
	for _, tt := range []struct {
		name, answer, want string
	}{
		{"not JSON", `I will press the right arrow key.`, "no JSON object"},
		{"broken JSON", `{"action": "key", "keys": "Right"`, "not a valid JSON object"},
		{"unknown action", `{"action": "teleport", "x": 3}`, `unknown action "teleport"`},
		{"unavailable action", `{"action": "screenshot"}`, `"screenshot" is not available`},
		{"off the screen", `{"action": "click", "x": 640, "y": 10}`, "(640,10) is outside the 640x480 screen"},
		{"unknown key", `{"action": "key", "keys": "Rihgt"}`, `unknown key "Rihgt"`},
		{"wrong field", `{"action": "key", "keys": "Right", "text": "x"}`, `field "text": unknown field`},
		{"refusal", "", "refused"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conv := chatConv(testKey, 3, 20)
			srv := openaitest.New(t, func(s *openaitest.Server, r *openaitest.Request) openaitest.Reply {
				rep := conv.Handle(s, r)
				if tt.answer == "" {
					rep.Body = openaitest.ChatRefusal(conv.Model, "I'm sorry, I can't help with that.")
				}
				return rep
			})
			conv.Turn = func(openaitest.ChatTurn) string { return tt.answer }
			ag := newChat(t, srv, agent.Options{"max_malformed": "2"})
			d, err := ag.Decide(t.Context(), newSim(640, 480).observe())
			srv.Check(t)
			if !errors.Is(err, agent.ErrMalformed) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "after 3 attempts") {
				t.Fatalf("err = %v, want ErrMalformed naming %q", err, tt.want)
			}
			if len(conv.Turns) != 3 {
				t.Fatalf("%d requests, want 3", len(conv.Turns))
			}
			for i, turn := range conv.Turns {
				if turn.Corrections != i {
					t.Errorf("request %d carries %d corrections, want %d", i+1, turn.Corrections, i)
				}
			}
			msgs := conv.Turns[2].Messages
			if tell := openaitest.Str(msgs[len(msgs)-1], "content"); !strings.Contains(tell, "cannot be run") || !strings.Contains(tell, tt.want) {
				t.Errorf("the correction says %q", tell)
			}
			if d.Meta["attempts"] != 3 {
				t.Errorf("meta %v", d.Meta)
			}
		})
	}
}

// TestChatFormats: json_object and none send the matching response_format
// (none: no field) and still parse answers, also fenced or after prose.
func TestChatFormats(t *testing.T) {
	setKey(t)
	for _, format := range []string{FormatObject, FormatNone} {
		t.Run(format, func(t *testing.T) {
			conv := chatConv(testKey, 3, 20)
			conv.Format = format
			srv := openaitest.New(t, conv.Handle)
			conv.Turn = func(openaitest.ChatTurn) string {
				return "Sure.\n```json\n{\"action\": \"scroll\", \"x\": 100, \"y\": 100, \"dy\": -3}\n```"
			}
			ag := newChat(t, srv, agent.Options{"response_format": format})
			d, err := ag.Decide(t.Context(), newSim(640, 480).observe())
			if err != nil {
				t.Fatal(err)
			}
			srv.Check(t)
			if d.Action.Kind != action.Scroll || *d.Action.DY != -3 || *d.Action.X != 100 {
				t.Errorf("action %+v", d.Action)
			}
			if !strings.Contains(openaitest.Str(conv.Turns[0].Messages, 0, "content"), `{"thought": "what you see and why", "action": "<kind>"`) {
				t.Error("the system prompt does not describe the answer")
			}
		})
	}
}

// TestChatNoKey: openai-chat needs no key; with none set no Authorization
// header is sent — and OPENAI_API_KEY is not sent to a server when
// api_key_env names another (unset) variable.
func TestChatNoKey(t *testing.T) {
	t.Setenv(KeyEnv, testKey)
	os.Unsetenv("AGENTBOX_TEST_NO_SUCH_KEY")
	conv := chatConv("", 3, 20)
	srv := openaitest.New(t, conv.Handle)
	conv.Turn = func(openaitest.ChatTurn) string { return `{"action":"done","success":false,"message":"cannot"}` }
	ag := newChat(t, srv, agent.Options{"api_key_env": "AGENTBOX_TEST_NO_SUCH_KEY"})
	d, err := ag.Decide(t.Context(), newSim(640, 480).observe())
	if err != nil {
		t.Fatal(err)
	}
	srv.Check(t)
	if d.Action.Kind != action.Done || d.Action.Succeeded() || d.Message != "cannot" {
		t.Errorf("decision %+v", d)
	}
}

// TestChatScaled: on a 1920×1080 screen the model sees 1280×720 and its
// coordinates (absolute, paths, relative motion) are mapped back.
func TestChatScaled(t *testing.T) {
	setKey(t)
	conv := chatConv(testKey, 3, 20)
	conv.Width, conv.Height = 1280, 720
	srv := openaitest.New(t, conv.Handle)
	answers := []string{
		`{"action": "click", "x": 1279, "y": 719, "button": "right"}`,
		`{"action": "drag", "path": [[0, 0], [640, 360]]}`,
		`{"action": "mouse_move", "dx": 100, "dy": -30}`,
	}
	conv.Turn = func(t openaitest.ChatTurn) string { return answers[t.N-1] }
	ag := newChat(t, srv, nil)
	s := newSim(1920, 1080)
	var got []string
	for range answers {
		d, err := ag.Decide(t.Context(), s.observe())
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(d.Action)
		got = append(got, string(b))
		s.act(t, d.Action)
	}
	srv.Check(t)
	want := []string{
		`{"action":"click","x":1919,"y":1079,"button":"right"}`,
		`{"action":"drag","path":[[0,0],[960,540]]}`,
		`{"action":"mouse_move","dx":150,"dy":-45}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAnswerSchemaStrict checks the schema against the rules of strict
// structured outputs: every object lists all its properties as required
// and forbids others; every property but action accepts null.
func TestAnswerSchemaStrict(t *testing.T) {
	var s struct {
		Type                 string                    `json:"type"`
		Properties           map[string]map[string]any `json:"properties"`
		Required             []string                  `json:"required"`
		AdditionalProperties *bool                     `json:"additionalProperties"`
	}
	if err := json.Unmarshal([]byte(AnswerSchema), &s); err != nil {
		t.Fatal(err)
	}
	if s.Type != "object" || s.AdditionalProperties == nil || *s.AdditionalProperties || len(s.Required) != len(s.Properties) {
		t.Fatalf("schema object: %+v", s)
	}
	for _, r := range s.Required {
		p, ok := s.Properties[r]
		if !ok {
			t.Errorf("required %q is not a property", r)
			continue
		}
		nullable := strings.Contains(fmt.Sprint(p["type"]), "null")
		if r == "action" == nullable {
			t.Errorf("property %q: type %v", r, p["type"])
		}
		if e, ok := p["enum"].([]any); ok && nullable && e[len(e)-1] != nil {
			t.Errorf("property %q: a nullable enum must list null", r)
		}
		if r != "thought" && r != "action" && !slices.Contains(action.Fields(action.Click), r) && !isField(r) {
			t.Errorf("property %q is no action field", r)
		}
	}
	var kinds []string
	for _, k := range s.Properties["action"]["enum"].([]any) {
		kinds = append(kinds, k.(string))
	}
	if strings.Join(kinds, ", ") != kindNames() {
		t.Errorf("enum %v, want %s", kinds, kindNames())
	}
}

func isField(name string) bool {
	for _, k := range chatKinds {
		if slices.Contains(action.Fields(k), name) {
			return true
		}
	}
	return false
}

func TestChatOptions(t *testing.T) {
	t.Setenv(KeyEnv, "")
	for _, tt := range []struct {
		opts agent.Options
		want string
	}{
		{agent.Options{}, "no model"},
		{agent.Options{"model": "m", "response_format": "xml"}, "response_format"},
		{agent.Options{"model": "m", "openai_key": "x"}, "unknown option"},
	} {
		if _, err := NewChat(tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewChat(%v) = %v, want %q", tt.opts, err, tt.want)
		}
	}
	if _, err := agent.New("openai-chat", agent.Options{"model": "llava", "base_url": "http://127.0.0.1:11434/v1"}); err != nil {
		t.Errorf("agent.New(openai-chat) without a key: %v", err)
	}
}

// TestChatMarks: on a scaled screen a model that answers with a mark
// clicks the mark's centre in screen pixels (not mapped again as if it
// were a screenshot pixel); the marks are told as untrusted text; an
// unknown mark is told back as malformed.
func TestChatMarks(t *testing.T) {
	setKey(t)
	conv := chatConv(testKey, 3, 20)
	conv.Width, conv.Height = 1280, 720
	srv := openaitest.New(t, conv.Handle)
	answers := []string{`{"action": "click", "mark": 9}`, `{"action": "click", "mark": 2}`}
	conv.Turn = func(t openaitest.ChatTurn) string { return answers[min(t.N, len(answers))-1] }
	ag := newChat(t, srv, nil)
	obs := newSim(1920, 1080).observe()
	obs.Marks = []observe.Mark{
		{N: 1, ID: "1.2/9", Role: "push button", Name: "Cancel", Bounds: action.Rect{100, 100, 200, 140}},
		{N: 2, ID: "1.2/10", Role: "push button", Name: "OK", Bounds: action.Rect{1500, 900, 1600, 940}},
	}
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
	if txt := conv.Turns[0].Text; !strings.Contains(txt, `<untrusted source="accessibility marks">`) || !strings.Contains(txt, `[2] push button "OK"`) {
		t.Errorf("the marks are not told: %q", txt)
	}
}
