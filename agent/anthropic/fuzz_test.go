package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent/llm"
)

// FuzzMapInput feeds arbitrary tool input at one of the test screen sizes.
// Whatever comes in, mapInput never panics; an error is always an
// *inputError with words for the model; a plan's actions all pass
// action.Validate on the screen, and every absolute coordinate in them maps
// back to a pixel of the model's display.
//
//	go test ./agent/anthropic -run '^$' -fuzz FuzzMapInput -fuzztime 60s
//
// The seed corpus is in testdata/fuzz/FuzzMapInput.
func FuzzMapInput(f *testing.F) {
	for _, s := range []string{
		`{"action":"left_click","coordinate":[683,384]}`,
		`{"action":"hold_key","text":"ctrl+shift","duration":0.5}`,
		`{"action":"left_click_drag","coordinate":[1365,767]}`,
		`{"action":"scroll","coordinate":[0,0],"scroll_direction":"up","scroll_amount":100,"text":"shift"}`,
		`{"action":"key","text":"ctrl++ a a a Return"}`,
		`{"action":"type","text":"日本\n"}`,
	} {
		f.Add([]byte(s), uint8(11))
	}
	f.Fuzz(func(t *testing.T, in []byte, screen uint8) {
		s := screens[int(screen)%len(screens)]
		mw, mh := llm.ScaleFor(s[0], s[1])
		d := newDisplay(s[0], s[1], mw, mh)
		p, err := mapInput(json.RawMessage(in), d)
		if err != nil {
			if ie, ok := err.(*inputError); !ok || ie.msg == "" {
				t.Fatalf("error %T %q", err, err)
			}
			return
		}
		if len(p.actions) == 0 || len(p.releases) != len(p.actions) {
			t.Fatalf("plan %+v", p)
		}
		limits := action.DefaultLimits(s[0], s[1])
		for _, a := range p.actions {
			if err := action.Validate(a, limits); err != nil {
				t.Fatalf("%s → %v: %v", in, a, err)
			}
			pts := a.Path
			if a.X != nil {
				pts = append(pts, action.Point{X: *a.X, Y: *a.Y})
			}
			for _, pt := range pts {
				if mx, my := d.toModel(pt.X, pt.Y); mx < 0 || my < 0 || mx >= mw || my >= mh {
					t.Fatalf("%s → screen (%d,%d) → model (%d,%d), off the %dx%d display", in, pt.X, pt.Y, mx, my, mw, mh)
				}
			}
		}
	})
}
