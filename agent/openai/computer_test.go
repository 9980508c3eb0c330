package openai

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/keysym"
	"github.com/codegirl-games/agentbox/observe"
)

func testMapping(w, h, maxWidth int) mapping {
	f := &observe.Frame{Width: w, Height: h, Pix: make([]byte, 4*w*h)}
	v := observe.FullView(f)
	if w > maxWidth {
		v, _ = observe.NewView(f, nil, 0, maxWidth, 0)
	}
	return mapping{view: v, limits: action.DefaultLimits(w, h), waitMS: 1000, maxShift: 10}
}

// TestMapComputerAction is the mapping table of docs and README: each
// OpenAI computer action and the agentbox actions it becomes.
func TestMapComputerAction(t *testing.T) {
	m := testMapping(640, 480, 1280)
	for _, tt := range []struct{ in, want string }{
		{`{"type":"click","button":"left","x":10,"y":20}`, `{"action":"click","x":10,"y":20,"button":"left"}`},
		{`{"type":"click","button":"right","x":10,"y":20}`, `{"action":"click","x":10,"y":20,"button":"right"}`},
		{`{"type":"click","button":"wheel","x":10,"y":20}`, `{"action":"click","x":10,"y":20,"button":"middle"}`},
		{`{"type":"click","button":"back","x":10,"y":20}`, `{"action":"click","x":10,"y":20,"button":"back"}`},
		{`{"type":"click","button":"forward","x":10,"y":20}`, `{"action":"click","x":10,"y":20,"button":"forward"}`},
		{`{"type":"click","button":"left","x":10,"y":20,"keys":["CTRL"]}`, `{"action":"click","x":10,"y":20,"button":"left","keys":"CTRL"}`},
		{`{"type":"double_click","x":639,"y":479,"keys":[]}`, `{"action":"click","x":639,"y":479,"count":2}`},
		{`{"type":"drag","path":[{"x":1,"y":2},{"x":3,"y":4},{"x":5,"y":6}]}`, `{"action":"drag","path":[[1,2],[3,4],[5,6]]}`},
		{`{"type":"drag","path":[{"x":1,"y":2},{"x":3,"y":4}],"keys":["SHIFT"]}`, `{"action":"key_down","key":"SHIFT"} {"action":"drag","path":[[1,2],[3,4]]} {"action":"key_up","key":"SHIFT"}`},
		{`{"type":"keypress","keys":["RIGHT"]}`, `{"action":"key","keys":"RIGHT"}`},
		{`{"type":"keypress","keys":["CTRL","C"]}`, `{"action":"key","keys":"CTRL+c"}`},
		{`{"type":"keypress","keys":["SHIFT","A"]}`, `{"action":"key","keys":"SHIFT+A"}`},
		{`{"type":"keypress","keys":["A"]}`, `{"action":"key","keys":"A"}`},
		{`{"type":"keypress","keys":["CTRL","ALT","DELETE"]}`, `{"action":"key","keys":"CTRL+ALT+DELETE"}`},
		{`{"type":"keypress","keys":["CTRL","+"]}`, `{"action":"key","keys":"CTRL+plus"}`},
		{`{"type":"keypress","keys":[" "]}`, `{"action":"key","keys":"space"}`},
		{`{"type":"move","x":5,"y":6}`, `{"action":"mouse_move","x":5,"y":6}`},
		{`{"type":"move","x":5,"y":6,"keys":["CTRL","SHIFT"]}`, `{"action":"key_down","key":"CTRL"} {"action":"key_down","key":"SHIFT"} {"action":"mouse_move","x":5,"y":6} {"action":"key_up","key":"SHIFT"} {"action":"key_up","key":"CTRL"}`},
		{`{"type":"scroll","x":100,"y":200,"scroll_x":0,"scroll_y":3}`, `{"action":"scroll","x":100,"y":200,"dy":3}`},
		{`{"type":"scroll","x":100,"y":200,"scroll_x":-2,"scroll_y":0}`, `{"action":"scroll","x":100,"y":200,"dx":-2}`},
		{`{"type":"scroll","x":100,"y":200,"scroll_x":0,"scroll_y":-700}`, `{"action":"scroll","x":100,"y":200,"dy":-10}`},
		{`{"type":"scroll","x":100,"y":200,"scroll_x":0,"scroll_y":0}`, `{"action":"scroll","x":100,"y":200,"dy":0}`},
		{`{"type":"scroll","x":1,"y":2,"scroll_x":1,"scroll_y":1,"keys":["SHIFT"]}`, `{"action":"scroll","x":1,"y":2,"dx":1,"dy":1,"keys":"SHIFT"}`},
		{`{"type":"type","text":"héllo ✓\n"}`, `{"action":"type","text":"héllo ✓\n"}`},
		{`{"type":"wait"}`, `{"action":"wait","ms":1000}`},
		{`{"type":"screenshot"}`, `{"action":"screenshot"}`},
	} {
		acts, err := mapComputerAction([]byte(tt.in), m)
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		var got []string
		for _, a := range acts {
			b, _ := json.Marshal(a)
			got = append(got, string(b))
		}
		if g := strings.Join(got, " "); g != tt.want {
			t.Errorf("%s\n got %s\nwant %s", tt.in, g, tt.want)
		}
	}
}

func TestMapComputerActionErrors(t *testing.T) {
	m := testMapping(640, 480, 1280)
	for _, tt := range []struct{ in, want string }{
		{`{"type":"click","button":"left","x":640,"y":0}`, "outside the 640x480 screenshot"},
		{`{"type":"click","button":"left","x":-1,"y":0}`, "outside"},
		{`{"type":"click","button":"left"}`, "needs x and y"},
		{`{"type":"click","button":"thumb","x":1,"y":1}`, `unknown button "thumb"`},
		{`{"type":"click","button":"left","x":1.5,"y":1}`, "not a computer action object"},
		{`{"type":"click","x":1,"y":1,"keys":["A"]}`, "not a modifier"},
		{`{"type":"keypress","keys":[]}`, "no keys"},
		{`{"type":"keypress","keys":["NOTAKEY"]}`, `unknown key "NOTAKEY"`},
		{`{"type":"keypress","keys":[""]}`, "empty"},
		{`{"type":"drag","path":[{"x":1,"y":2}]}`, "at least two points"},
		{`{"type":"drag","path":[{"x":1},{"x":3,"y":4}]}`, "path[0] needs x and y"},
		{`{"type":"scroll","x":1,"y":2}`, "scroll_x or scroll_y"},
		{`{"type":"type","text":""}`, "needs text"},
		{`{"type":"type","text":"\u0001"}`, "cannot be typed"},
		{`{"type":"jump"}`, `unknown computer action "jump"`},
		{`{}`, "no type"},
		{`[1]`, "not a computer action object"},
	} {
		_, err := mapComputerAction([]byte(tt.in), m)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.in, err, tt.want)
		}
	}
}

// TestMapScaled: with a 1920×1080 screen shown at 1280×720, every pixel the
// model can name maps to the screen pixel at the centre of what it saw.
func TestMapScaled(t *testing.T) {
	m := testMapping(1920, 1080, 1280)
	if m.view.Frame.Width != 1280 || m.view.Frame.Height != 720 {
		t.Fatalf("view %dx%d", m.view.Frame.Width, m.view.Frame.Height)
	}
	for _, p := range [][2]int{{0, 0}, {1, 1}, {640, 360}, {1279, 719}} {
		acts, err := mapComputerAction([]byte(`{"type":"move","x":`+itoa(p[0])+`,"y":`+itoa(p[1])+`}`), m)
		if err != nil {
			t.Fatal(err)
		}
		x, y := *acts[0].X, *acts[0].Y
		if wx, wy := (3*p[0]*2+3)/4, (3*p[1]*2+3)/4; x != wx || y != wy {
			t.Errorf("(%d,%d) → (%d,%d), want (%d,%d)", p[0], p[1], x, y, wx, wy)
		}
		if bx, by, ok := m.view.FromScreen(x, y); !ok || bx != p[0] || by != p[1] {
			t.Errorf("(%d,%d) does not map back: (%d,%d)", p[0], p[1], bx, by)
		}
	}
	if _, err := mapComputerAction([]byte(`{"type":"move","x":1280,"y":0}`), m); err == nil || !strings.Contains(err.Error(), "1280x720 screenshot") {
		t.Errorf("x=1280 in a 1280-wide screenshot: %v", err)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestOpenAIKeyNames: every key name OpenAI's computer-use models send
// (the upper-case names of its sample computers' key maps) is accepted by
// agentbox as the key it means.
func TestOpenAIKeyNames(t *testing.T) {
	for name, want := range map[string]string{
		"CTRL": "Control_L", "CONTROL": "Control_L", "ALT": "Alt_L", "OPTION": "Alt_L", "SHIFT": "Shift_L",
		"CMD": "Super_L", "SUPER": "Super_L", "WIN": "Super_L", "META": "Super_L",
		"ENTER": "Return", "RETURN": "Return", "ESC": "Escape", "ESCAPE": "Escape", "SPACE": "space", "TAB": "Tab",
		"BACKSPACE": "BackSpace", "DELETE": "Delete", "INSERT": "Insert", "HOME": "Home", "END": "End",
		"PAGEUP": "Prior", "PAGEDOWN": "Next", "CAPSLOCK": "Caps_Lock",
		"ARROWLEFT": "Left", "ARROWRIGHT": "Right", "ARROWUP": "Up", "ARROWDOWN": "Down",
		"LEFT": "Left", "RIGHT": "Right", "UP": "Up", "DOWN": "Down",
		"F1": "F1", "F5": "F5", "F12": "F12", "/": "slash", "\\": "backslash", "-": "minus", "a": "a", "A": "A",
	} {
		k, err := keysym.Lookup(keyName(name, false))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := keysym.Name(k); got != want && !(want == "Prior" && got == "Page_Up") && !(want == "Next" && got == "Page_Down") {
			t.Errorf("%s is %s, want %s", name, got, want)
		}
		a := action.Action{Kind: action.Key, Keys: keyName(name, false)}
		if err := action.Validate(a, action.DefaultLimits(640, 480)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
