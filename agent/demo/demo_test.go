package demo

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/observe"
)

func TestOptionsChecked(t *testing.T) {
	for _, tt := range []struct {
		opts agent.Options
		want string // "" is accepted
	}{
		{agent.Options{"key": "Left", "hold_ms": "60000", "min_px": "-5"}, ""},
		{agent.Options{"key": "Rigth"}, "option key: want one key name"},
		{agent.Options{"key": ""}, "option key"},
		{agent.Options{"hold_ms": "60001"}, "option hold_ms: want 0–60000"},
		{agent.Options{"min_px": "NaN"}, "option min_px: want a number"},
		{agent.Options{"speed": "1"}, "unknown option \"speed\""},
	} {
		_, err := New(tt.opts)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%v: %v, want %q", tt.opts, err, tt.want)
		}
	}
}

// square is a frame with the mover's green square at x.
func square(x int) *observe.Frame {
	w, h := 640, 480
	pix := make([]byte, 4*w*h)
	for y := 220; y < 260; y++ {
		for i := x; i < x+40; i++ {
			pix[4*(y*w+i)+1] = 255
		}
	}
	return &observe.Frame{Width: w, Height: h, Pix: pix}
}

// TestNoSuccessOverAFailedAction: whichever of the demo's actions fails,
// it ends in failure naming it — after releasing the key when it was
// held — even though the square moved.
func TestNoSuccessOverAFailedAction(t *testing.T) {
	ok := &action.Result{OK: true}
	bad := &action.Result{OK: false, Error: "the guest said no"}
	for _, tt := range []struct {
		name  string
		fail  int    // which result (1: key_down's, 2: the wait's, 3: key_up's; 0: none)
		kinds string // the actions decided
		msg   string
	}{
		{"none", 0, "key_down wait key_up done", "the square moved +200 px"},
		{"key_down", 1, "key_down done", "holding Right failed: the guest said no"},
		{"wait", 2, "key_down wait key_up done", "the wait failed: the guest said no"},
		{"key_up", 3, "key_down wait key_up done", "releasing Right failed: the guest said no"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := New(nil)
			var kinds []string
			var last *action.Result
			var d agent.Decision
			for i := 1; i <= 5; i++ {
				x := 60
				if i >= 3 {
					x = 260
				}
				d, _ = a.Decide(context.Background(), &observe.Observation{Step: i, Running: true, Screen: square(x), Last: last})
				kinds = append(kinds, string(d.Action.Kind))
				if d.Action.Kind == action.Done {
					break
				}
				last = ok
				if i == tt.fail {
					last = bad
				}
			}
			if got := strings.Join(kinds, " "); got != tt.kinds {
				t.Errorf("actions %q, want %q", got, tt.kinds)
			}
			if d.Action.Succeeded() != (tt.fail == 0) || !strings.Contains(d.Action.Message, tt.msg) {
				t.Errorf("done success=%v %q, want %q", d.Action.Succeeded(), d.Action.Message, tt.msg)
			}
		})
	}
}

// TestVerdictAddsUp: the verdict's distance is the difference of the two
// positions it prints, whatever half pixels the centroids fall on (a
// square 40 px wide at x has its centroid at x+19.5), and success is
// judged on that distance.
func TestVerdictAddsUp(t *testing.T) {
	for _, tt := range []struct {
		from, to int // the square's left edge before and after
		minPx    string
		success  bool
	}{
		{41, 245, "204", true}, // 60.5 → 264.5: half to even printed 60 and 264 beside +204
		{40, 244, "204", true},
		{41, 244, "204", false}, // 60.5 → 263.5
		{42, 245, "203.5", false},
		{41, 245, "203.5", true},
	} {
		t.Run(fmt.Sprintf("%d-%d", tt.from, tt.to), func(t *testing.T) {
			a, _ := New(agent.Options{"min_px": tt.minPx})
			var d agent.Decision
			for i := 1; i <= 4; i++ {
				x := tt.from
				if i >= 3 {
					x = tt.to
				}
				d, _ = a.Decide(context.Background(), &observe.Observation{Step: i, Running: true, Screen: square(x), Last: &action.Result{OK: true}})
			}
			if d.Action.Kind != action.Done {
				t.Fatalf("the fourth action is %s, want done", d.Action.Kind)
			}
			var moved, x0, x1 int
			if _, err := fmt.Sscanf(d.Action.Message, "the square moved %d px (from x=%d to x=%d;", &moved, &x0, &x1); err != nil {
				t.Fatalf("%q: %v", d.Action.Message, err)
			}
			if x1-x0 != moved {
				t.Errorf("%q: %d − %d is not %d", d.Action.Message, x1, x0, moved)
			}
			if d.Action.Succeeded() != tt.success || !strings.Contains(d.Action.Message, "need ≥ "+tt.minPx+")") {
				t.Errorf("%q: success %v, want %v", d.Action.Message, d.Action.Succeeded(), tt.success)
			}
		})
	}
}
