package openai

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/observe"
)

// testKey is the API key of the unit tests; it must never be recorded.
const testKey = "sk-test-0123456789abcdefSECRET"

// sim is a fake environment for unit tests: the mover demo without X11.
// A green 40×40 square on a dark background moves 3 px right per key press
// of Right (a quick tap in the real demo moves it about as far).
type sim struct {
	w, h int
	x    int
	step int
	last *action.Result
	acts []action.Action
}

func newSim(w, h int) *sim { return &sim{w: w, h: h, x: 41} }

func (s *sim) frame() *observe.Frame {
	pix := make([]byte, 4*s.w*s.h)
	for i := 0; i < len(pix); i += 4 {
		pix[i], pix[i+1], pix[i+2], pix[i+3] = 0x20, 0x20, 0x20, 0xff
	}
	for y := 240; y < 280 && y < s.h; y++ {
		for x := s.x; x < s.x+40 && x < s.w; x++ {
			i := 4 * (y*s.w + x)
			pix[i], pix[i+1], pix[i+2] = 0, 0xff, 0
		}
	}
	return &observe.Frame{Width: s.w, Height: s.h, Pix: pix, Hash: uint64(s.x)}
}

func (s *sim) observe() *observe.Observation {
	s.step++
	return &observe.Observation{
		Step: s.step, Task: "Move the character right.", Screen: s.frame(),
		ScreenshotRef: fmt.Sprintf("screenshots/%06d.png", s.step), Running: true, Last: s.last,
		Output:  []observe.LogLine{{Stream: observe.Stdout, Text: "mover: ready 640x480"}},
		Windows: []observe.Window{{ID: 1, Title: "mover", Width: 640, Height: 480, Focused: true}},
	}
}

// act performs a validated action.
func (s *sim) act(t testing.TB, a action.Action) {
	t.Helper()
	if err := action.Validate(a, action.DefaultLimits(s.w, s.h)); err != nil {
		t.Fatalf("the agent decided an invalid action %s: %v", a, err)
	}
	s.acts = append(s.acts, a)
	if a.Kind == action.Key && strings.EqualFold(a.Keys, "right") {
		s.x += 3
	}
	s.last = &action.Result{OK: true}
}

// run drives an agent like the runtime does until done, an error or
// maxSteps; it returns the decisions.
func (s *sim) run(t testing.TB, ag agent.Agent, maxSteps int) ([]agent.Decision, error) {
	t.Helper()
	ctx := t.Context()
	if st, ok := ag.(agent.Starter); ok {
		if err := st.Start(ctx, agent.Task{Text: "Move the character right.", Width: s.w, Height: s.h, MaxSteps: maxSteps}); err != nil {
			t.Fatal(err)
		}
	}
	var ds []agent.Decision
	for i := 0; i < maxSteps; i++ {
		d, err := ag.Decide(ctx, s.observe())
		if err != nil {
			return ds, err
		}
		ds = append(ds, d)
		if d.Action.Kind == action.Done {
			return ds, nil
		}
		s.act(t, d.Action)
	}
	t.Fatalf("no done within %d steps", maxSteps)
	return ds, nil
}

// assertNoKey fails if the key appears in any decision's meta or files.
func assertNoKey(t *testing.T, ds []agent.Decision) {
	t.Helper()
	for i, d := range ds {
		if strings.Contains(fmt.Sprint(d.Meta), testKey) {
			t.Errorf("decision %d: the key is in the meta", i)
		}
		for name, data := range d.Files {
			if strings.Contains(string(data), testKey) {
				t.Errorf("decision %d: the key is in %s", i, name)
			}
		}
	}
}

func setKey(t testing.TB) {
	t.Setenv(KeyEnv, testKey)
	t.Setenv(URLEnv, "")
	os.Unsetenv(URLEnv)
}
