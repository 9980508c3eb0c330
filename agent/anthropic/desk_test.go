package anthropic

import (
	"fmt"
	"image"
	"image/color"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/agent/anthropic/anthropictest"
	"github.com/codegirl-games/agentbox/observe"
)

// desk is a fake environment where a container adds nothing: a screen with
// a green 40×40 square that moves right at 200 px/s while Right is held
// (like the mover demo), a pointer, and a log of what was performed.
type desk struct {
	// marks, when set, number the square on every screenshot.
	marks   bool
	w, h    int
	sq      image.Point // the square's top-left corner
	cursor  action.Point
	held    map[string]bool
	pressed map[action.Button]bool
	did     []action.Action
	clicks  []action.Point
	running bool
	output  []observe.LogLine
	// fail makes actions of a kind fail (result ok=false) with this error.
	fail map[action.Kind]string
	// secrets are the observations' Secrets (the vault's names).
	secrets []string
}

func newDesk(w, h int) *desk {
	return &desk{w: w, h: h, sq: image.Pt(41, 240), held: map[string]bool{}, pressed: map[action.Button]bool{}, running: true}
}

// frame draws the screen: dark background, green square. Every call makes
// a new frame, as every changed screenshot is.
func (d *desk) frame() *observe.Frame {
	img := image.NewRGBA(image.Rect(0, 0, d.w, d.h))
	bg := color.RGBA{0x20, 0x20, 0x20, 0xff}
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = bg.R, bg.G, bg.B, bg.A
	}
	for y := d.sq.Y; y < d.sq.Y+40 && y < d.h; y++ {
		for x := d.sq.X; x < d.sq.X+40 && x < d.w; x++ {
			img.SetRGBA(x, y, color.RGBA{0, 0xff, 0, 0xff})
		}
	}
	return &observe.Frame{Width: d.w, Height: d.h, Pix: img.Pix}
}

func (d *desk) act(a action.Action) action.Result {
	d.did = append(d.did, a)
	if msg, ok := d.fail[a.Kind]; ok {
		return action.Result{OK: false, Error: msg}
	}
	res := action.Result{OK: true}
	switch a.Kind {
	case action.KeyDown:
		d.held[a.Key] = true
		d.output = append(d.output, observe.LogLine{Stream: observe.Stdout, Text: "mover: key " + a.Key + " down"})
	case action.KeyUp:
		delete(d.held, a.Key)
	case action.Wait:
		if d.held["Right"] {
			d.sq.X += a.MS * 200 / 1000
		}
	case action.MouseMove:
		d.cursor = action.Point{X: *a.X, Y: *a.Y}
	case action.Click, action.Scroll:
		if a.X != nil {
			d.cursor = action.Point{X: *a.X, Y: *a.Y}
		}
		if a.Kind == action.Click {
			d.clicks = append(d.clicks, d.cursor)
		}
	case action.Drag:
		d.cursor = a.Path[len(a.Path)-1]
	case action.MouseDown:
		d.pressed[a.Button] = true
	case action.MouseUp:
		delete(d.pressed, a.Button)
	}
	c := d.cursor
	res.Cursor = &c
	return res
}

// drive runs the agent against the desk as the runtime does (observe,
// decide, validate, act) until done, an error or maxSteps.
func drive(t *testing.T, ag *Agent, d *desk, task string, maxSteps int) ([]agent.Decision, error) {
	t.Helper()
	ctx := t.Context()
	if err := ag.Start(ctx, agent.Task{Text: task, Width: d.w, Height: d.h, MaxSteps: maxSteps}); err != nil {
		return nil, err
	}
	var decisions []agent.Decision
	var last *action.Result
	limits := action.DefaultLimits(d.w, d.h)
	for step := 1; step <= maxSteps; step++ {
		obs := &observe.Observation{Step: step, Task: task, Screen: d.frame(), Cursor: d.cursor,
			Running: d.running, Output: d.output, Last: last,
			ScreenshotRef: fmt.Sprintf("screenshots/%06d.png", step),
			Windows:       []observe.Window{{ID: 1, Title: "mover", X: 1, Y: 20, Width: 640, Height: 480, Focused: true}}}
		obs.Secrets = d.secrets
		if d.marks {
			obs.Marks = []observe.Mark{{N: 1, ID: "1.2/3", Role: "push button", Name: "square", Bounds: action.Rect{d.sq.X, d.sq.Y, d.sq.X + 40, d.sq.Y + 40}}}
		}
		d.output = nil
		dec, err := ag.Decide(ctx, obs)
		if err != nil {
			return decisions, err
		}
		decisions = append(decisions, dec)
		if err := action.Validate(dec.Action, limits); err != nil {
			t.Fatalf("step %d: the agent decided an invalid action %v: %v", step, dec.Action, err)
		}
		if dec.Action.Kind == action.Done {
			return decisions, nil
		}
		r := d.act(dec.Action)
		last = &r
	}
	return decisions, fmt.Errorf("no done within %d steps", maxSteps)
}

// newAgent makes an agent talking to srv with the test key.
func newAgent(t *testing.T, srv *anthropictest.Server, opts agent.Options) *Agent {
	t.Helper()
	t.Setenv("ANTHROPIC_API_KEY", testKey)
	t.Setenv("ANTHROPIC_BASE_URL", "")
	t.Setenv("ANTHROPIC_MODEL", "")
	o := agent.Options{"base_url": srv.URL}
	for k, v := range opts {
		o[k] = v
	}
	ag, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ag.Close() })
	return ag
}

const testKey = "sk-ant-test-0123456789-SECRET"

func kinds(ds []agent.Decision) string {
	var s []string
	for _, d := range ds {
		s = append(s, d.Action.String())
	}
	return strings.Join(s, ", ")
}
