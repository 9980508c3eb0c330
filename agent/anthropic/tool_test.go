package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent/llm"
	"github.com/codegirl-games/agentbox/observe"
)

func actionsJSON(t *testing.T, as []action.Action) string {
	t.Helper()
	var parts []string
	for _, a := range as {
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, string(b))
	}
	return strings.Join(parts, " ")
}

// TestMapInput maps every action of the computer tool at 1:1 scale.
func TestMapInput(t *testing.T) {
	d := newDisplay(640, 480, 640, 480)
	for _, tt := range []struct{ in, want string }{
		{`{"action":"key","text":"ctrl+s"}`, `{"action":"key","keys":"ctrl+s"}`},
		{`{"action":"key","text":"Return"}`, `{"action":"key","keys":"Return"}`},
		{`{"action":"key","text":"ctrl+a Delete"}`, `{"action":"key","keys":"ctrl+a"} {"action":"key","keys":"Delete"}`},
		{`{"action":"key","text":"Down Down Down"}`, `{"action":"key","keys":"Down","repeat":3}`},
		{`{"action":"key","text":" "}`, `{"action":"key","keys":"space"}`},
		{`{"action":"hold_key","text":"Right","duration":1}`, `{"action":"key_down","key":"Right"} {"action":"wait","ms":1000} {"action":"key_up","key":"Right"}`},
		{`{"action":"hold_key","text":"ctrl+shift","duration":0.25}`, `{"action":"key_down","key":"ctrl"} {"action":"key_down","key":"shift"} {"action":"wait","ms":250} {"action":"key_up","key":"shift"} {"action":"key_up","key":"ctrl"}`},
		{`{"action":"type","text":"héllo ✓\n"}`, `{"action":"type","text":"héllo ✓\n"}`},
		{`{"action":"cursor_position"}`, `{"action":"cursor_position"}`},
		{`{"action":"mouse_move","coordinate":[100,200]}`, `{"action":"mouse_move","x":100,"y":200}`},
		{`{"action":"left_mouse_down"}`, `{"action":"mouse_down","button":"left"}`},
		{`{"action":"left_mouse_up"}`, `{"action":"mouse_up","button":"left"}`},
		{`{"action":"left_click"}`, `{"action":"click","button":"left"}`},
		{`{"action":"left_click","coordinate":[5,6],"text":"shift"}`, `{"action":"click","x":5,"y":6,"button":"left","keys":"shift"}`},
		{`{"action":"left_click_drag","start_coordinate":[10,20],"coordinate":[300,400]}`, `{"action":"drag","button":"left","path":[[10,20],[300,400]]}`},
		{`{"action":"left_click_drag","coordinate":[300,400]}`, `{"action":"mouse_down","button":"left"} {"action":"mouse_move","x":300,"y":400} {"action":"mouse_up","button":"left"}`},
		{`{"action":"right_click","coordinate":[1,2]}`, `{"action":"click","x":1,"y":2,"button":"right"}`},
		{`{"action":"middle_click"}`, `{"action":"click","button":"middle"}`},
		{`{"action":"double_click","coordinate":[7,8],"text":"ctrl"}`, `{"action":"click","x":7,"y":8,"button":"left","count":2,"keys":"ctrl"}`},
		{`{"action":"triple_click","coordinate":[7,8]}`, `{"action":"click","x":7,"y":8,"button":"left","count":3}`},
		{`{"action":"scroll","coordinate":[250,250],"scroll_direction":"down","scroll_amount":3}`, `{"action":"scroll","x":250,"y":250,"dy":3}`},
		{`{"action":"scroll","scroll_direction":"up","scroll_amount":2,"text":"ctrl"}`, `{"action":"scroll","dy":-2,"keys":"ctrl"}`},
		{`{"action":"scroll","coordinate":[1,1],"scroll_direction":"left","scroll_amount":4}`, `{"action":"scroll","x":1,"y":1,"dx":-4}`},
		{`{"action":"scroll","coordinate":[1,1],"scroll_direction":"right","scroll_amount":5}`, `{"action":"scroll","x":1,"y":1,"dx":5}`},
		{`{"action":"wait","duration":2.5}`, `{"action":"wait","ms":2500}`},
		{`{"action":"wait","duration":100}`, `{"action":"wait","ms":100000}`},
		{`{"action":"screenshot"}`, `{"action":"screenshot"}`},
		{`{"action":"screenshot","coordinate":null,"text":null}`, `{"action":"screenshot"}`},
		{`{"action":"mouse_move","coordinate":[100.0,200]}`, `{"action":"mouse_move","x":100,"y":200}`},
	} {
		p, err := mapInput(json.RawMessage(tt.in), d)
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if got := actionsJSON(t, p.actions); got != tt.want {
			t.Errorf("%s\n got %s\nwant %s", tt.in, got, tt.want)
		}
	}
}

// TestMapInputErrors: what cannot be performed says why, in the tool's
// terms.
func TestMapInputErrors(t *testing.T) {
	d := newDisplay(1920, 1080, 1366, 768)
	for _, tt := range []struct{ in, want string }{
		{`[]`, "must be a JSON object"},
		{`{"action":"fly"}`, `unknown action "fly"`},
		{`{"text":"a"}`, "action is required"},
		{`{"action":"key"}`, "text is required for action key"},
		{`{"action":"key","text":"Retrun"}`, `text for action key: invalid key chord "Retrun": part 1: unknown key "Retrun" (did you mean "Return"?)`},
		{`{"action":"key","text":""}`, "text must name a key"},
		{`{"action":"key","text":"a","coordinate":[1,1]}`, "coordinate is not accepted for action key"},
		{`{"action":"key","text":"a","bogus":1}`, `unknown field "bogus"`},
		{`{"action":"left_click","coordinate":[1366,10]}`, "coordinate [1366, 10] is outside the 1366x768 display (x 0–1365, y 0–767)"},
		{`{"action":"left_click","coordinate":[10,768]}`, "outside the 1366x768 display"},
		{`{"action":"left_click","coordinate":[-1,10]}`, "outside"},
		{`{"action":"left_click","coordinate":[1.5,10]}`, "two whole numbers"},
		{`{"action":"left_click","coordinate":[1]}`, "coordinate must be [x, y]"},
		{`{"action":"left_click","coordinate":"1,2"}`, "coordinate must be [x, y]"},
		{`{"action":"left_click","coordinate":[1,2],"text":"a"}`, `text for action left_click: "a" is not a modifier`},
		{`{"action":"left_click_drag","start_coordinate":[0,0],"coordinate":[2000,0]}`, "outside"},
		{`{"action":"left_click_drag","start_coordinate":[0,0]}`, "coordinate is required"},
		{`{"action":"left_mouse_down","coordinate":[1,2]}`, "coordinate is not accepted for action left_mouse_down"},
		{`{"action":"mouse_move"}`, "coordinate is required"},
		{`{"action":"hold_key","text":"Right"}`, "duration is required"},
		{`{"action":"hold_key","text":"Right","duration":101}`, "duration must be between 0 and 100 seconds"},
		{`{"action":"hold_key","text":"Right","duration":"1"}`, "duration must be a number"},
		{`{"action":"hold_key","text":"ctrl+","duration":1}`, "empty key name"},
		{`{"action":"wait","duration":-1}`, "duration must be between 0 and 100"},
		{`{"action":"scroll","scroll_direction":"sideways","scroll_amount":1}`, "scroll_direction must be up, down, left or right"},
		{`{"action":"scroll","scroll_direction":"up","scroll_amount":1.5}`, "scroll_amount must be an integer"},
		{`{"action":"scroll","scroll_direction":"up","scroll_amount":-1}`, "scroll_amount must be between 0 and 100"},
		{`{"action":"scroll","scroll_direction":"up"}`, "scroll_amount is required"},
		{`{"action":"type","text":""}`, "text must not be empty"},
		{`{"action":"type","text":"` + strings.Repeat("a", 10001) + `"}`, "the limit is 10000"},
		{`{"action":"screenshot"} {}`, "trailing data"},
	} {
		_, err := mapInput(json.RawMessage(tt.in), d)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%.80s: got %v, want %q", tt.in, err, tt.want)
		}
		if _, ok := err.(*inputError); err != nil && !ok {
			t.Errorf("%.80s: error is %T, want *inputError", tt.in, err)
		}
	}
}

// screens covers every target size and screens on both sides of each.
var screens = [][2]int{
	{640, 480}, {800, 600}, {1024, 768}, {1280, 800}, {1366, 768}, {1280, 720},
	{1280, 1024}, {1440, 900}, {1600, 900}, {1600, 1200}, {1680, 1050},
	{1920, 1080}, {1920, 1200}, {2560, 1440}, {2560, 1600}, {3840, 2160}, {2560, 1080},
}

// TestScalingExact checks the mapping at every target size, for every
// pixel of the model's display: it lands on the screen, inside the area
// the model pixel shows, and maps back to the same model pixel; one pixel
// past each edge is refused.
func TestScalingExact(t *testing.T) {
	for _, s := range screens {
		sw, sh := s[0], s[1]
		mw, mh := llm.ScaleFor(sw, sh)
		if mw > 1366 || mh > 800 {
			t.Errorf("%dx%d is shown at %dx%d, larger than the XGA-class targets", sw, sh, mw, mh)
		}
		d := newDisplay(sw, sh, mw, mh)
		for y := 0; y < mh; y++ {
			for x := 0; x < mw; x++ {
				sx, sy := d.toScreen(x, y)
				// The screen pixel holds the centre of the model pixel's area
				// [x*sw/mw, (x+1)*sw/mw), and its own centre lies in that area.
				if 2*sx*mw > (2*x+1)*sw || (2*x+1)*sw >= 2*(sx+1)*mw || 2*sy*mh > (2*y+1)*sh || (2*y+1)*sh >= 2*(sy+1)*mh {
					t.Fatalf("%dx%d→%dx%d: model (%d,%d) → screen (%d,%d), not the pixel at its centre", sw, sh, mw, mh, x, y, sx, sy)
				}
				if 2*x*sw > (2*sx+1)*mw || (2*sx+1)*mw >= 2*(x+1)*sw || 2*y*sh > (2*sy+1)*mh || (2*sy+1)*mh >= 2*(y+1)*sh {
					t.Fatalf("%dx%d→%dx%d: model (%d,%d) → screen (%d,%d), outside the area it shows", sw, sh, mw, mh, x, y, sx, sy)
				}
				if bx, by := d.toModel(sx, sy); bx != x || by != y {
					t.Fatalf("%dx%d→%dx%d: model (%d,%d) → screen (%d,%d) → model (%d,%d)", sw, sh, mw, mh, x, y, sx, sy, bx, by)
				}
			}
		}
		// Through the tool input: corners and centre, and just outside.
		for _, p := range [][2]int{{0, 0}, {mw - 1, 0}, {0, mh - 1}, {mw - 1, mh - 1}, {mw / 2, mh / 2}} {
			in := fmt.Sprintf(`{"action":"left_click","coordinate":[%d,%d]}`, p[0], p[1])
			pl, err := mapInput(json.RawMessage(in), d)
			if err != nil {
				t.Fatalf("%dx%d: %s: %v", sw, sh, in, err)
			}
			sx, sy := d.toScreen(p[0], p[1])
			if a := pl.actions[0]; *a.X != sx || *a.Y != sy {
				t.Errorf("%dx%d: %s → (%d,%d), want (%d,%d)", sw, sh, in, *a.X, *a.Y, sx, sy)
			}
		}
		for _, p := range [][2]int{{mw, 0}, {0, mh}, {-1, 0}, {0, -1}} {
			in := fmt.Sprintf(`{"action":"mouse_move","coordinate":[%d,%d]}`, p[0], p[1])
			if _, err := mapInput(json.RawMessage(in), d); err == nil || !strings.Contains(err.Error(), "outside") {
				t.Errorf("%dx%d: %s: got %v, want outside", sw, sh, in, err)
			}
		}
		// The screenshot the model gets has exactly the display's size.
		v, err := llm.ModelView(&observe.Frame{Width: sw, Height: sh, Pix: make([]byte, 4*sw*sh)})
		if err != nil {
			t.Fatal(err)
		}
		if v.Frame.Width != mw || v.Frame.Height != mh {
			t.Errorf("%dx%d: screenshot scaled to %dx%d, tool display %dx%d", sw, sh, v.Frame.Width, v.Frame.Height, mw, mh)
		}
		// The view's own mapping is the one used.
		for _, p := range [][2]int{{0, 0}, {mw - 1, mh - 1}, {mw / 3, mh / 3}} {
			ax, ay := v.ToScreen(p[0], p[1])
			bx, by := d.toScreen(p[0], p[1])
			if ax != bx || ay != by {
				t.Errorf("%dx%d: view maps (%d,%d) to (%d,%d), display to (%d,%d)", sw, sh, p[0], p[1], ax, ay, bx, by)
			}
		}
	}
}

// TestToModelOffScreen maps window corners that lie off the screen.
func TestToModelOffScreen(t *testing.T) {
	d := newDisplay(1920, 1080, 1366, 768)
	for _, tt := range []struct{ x, y, mx, my int }{
		{0, 0, 0, 0}, {1919, 1079, 1365, 767}, {1920, 1080, 1366, 768}, {-10, -10, -7, -7}, {960, 540, 683, 384},
	} {
		if mx, my := d.toModel(tt.x, tt.y); mx != tt.mx || my != tt.my {
			t.Errorf("toModel(%d,%d) = %d,%d want %d,%d", tt.x, tt.y, mx, my, tt.mx, tt.my)
		}
	}
}
