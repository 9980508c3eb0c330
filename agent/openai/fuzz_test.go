package openai

import (
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
)

// FuzzParseAnswer: whatever a chat model answers, parsing never panics,
// and an answer that is accepted maps to an action valid on the screen.
// Seeds: testdata/fuzz/FuzzParseAnswer.
func FuzzParseAnswer(f *testing.F) {
	f.Add(`{"thought": "go", "action": "key", "keys": "Right", "x": null}`)
	f.Add(`{"action":"click","x":639,"y":479,"button":"left","count":2,"keys":"ctrl"}`)
	f.Add("```json\n{\"action\":\"drag\",\"path\":[[0,0],[10,10]]}\n```")
	screen := action.DefaultLimits(1920, 1080)
	f32 := &observe.Frame{Width: 1920, Height: 1080, Pix: make([]byte, 4*1920*1080)}
	view, err := observe.NewView(f32, nil, 0, 1280, 0)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, _, err := parseAnswer(s)
		if err != nil {
			return
		}
		a, err = toScreenAction(a, view, screen)
		if err != nil {
			return
		}
		if err := action.Validate(a, screen); err != nil {
			t.Fatalf("%q was accepted as %+v, which is invalid: %v", s, a, err)
		}
	})
}

// FuzzMapComputerAction: whatever computer action the Responses API
// returns, mapping never panics, and what it accepts is valid on the
// screen. Seeds: testdata/fuzz/FuzzMapComputerAction.
func FuzzMapComputerAction(f *testing.F) {
	f.Add([]byte(`{"type":"keypress","keys":["CTRL","C"]}`))
	f.Add([]byte(`{"type":"scroll","x":1279,"y":719,"scroll_x":-5,"scroll_y":900}`))
	f.Add([]byte(`{"type":"drag","path":[{"x":0,"y":0},{"x":1279,"y":719}],"keys":["SHIFT"]}`))
	m := testMapping(1920, 1080, 1280)
	f.Fuzz(func(t *testing.T, raw []byte) {
		acts, err := mapComputerAction(raw, m)
		if err != nil {
			return
		}
		if len(acts) == 0 {
			t.Fatalf("%q mapped to nothing", raw)
		}
		for _, a := range acts {
			if err := action.Validate(a, m.limits); err != nil {
				t.Fatalf("%q was accepted as %+v, which is invalid: %v", raw, a, err)
			}
		}
	})
}
