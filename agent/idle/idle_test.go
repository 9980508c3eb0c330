package idle

import (
	"context"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/observe"
)

func TestOptionsInRange(t *testing.T) {
	for _, tt := range []struct {
		ms   string
		want string // "" is accepted
	}{
		{"0", ""}, {"1000", ""}, {"120000", ""},
		{"120001", "option ms: want 0–120000 (one wait), got \"120001\""},
		{"150000", "option ms: want 0–120000 (one wait), got \"150000\""},
		{"-1", "option ms: want 0–120000"},
		{"1s", "option ms: want 0–120000"},
	} {
		_, err := New(agent.Options{"ms": tt.ms})
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("ms=%s: %v, want %q", tt.ms, err, tt.want)
		}
	}
	// The longest watch is one valid wait.
	a, _ := New(agent.Options{"ms": "120000"})
	d, _ := a.Decide(context.Background(), &observe.Observation{Running: true})
	if err := action.Validate(d.Action, action.DefaultLimits(640, 480)); err != nil {
		t.Errorf("the longest watch is not a valid action: %v", err)
	}
}

// TestNoSuccessOverAFailedWait: the watch's wait failed (or was refused),
// so the idle agent does not report success.
func TestNoSuccessOverAFailedWait(t *testing.T) {
	a, _ := New(agent.Options{"ms": "500"})
	ctx := context.Background()
	d, _ := a.Decide(ctx, &observe.Observation{Step: 1, Running: true})
	if d.Action.Kind != action.Wait {
		t.Fatalf("first decision %v", d.Action)
	}
	d, _ = a.Decide(ctx, &observe.Observation{Step: 2, Running: true, Last: &action.Result{OK: false, Error: "wait: ms: must be between 0 and 120000"}})
	if d.Action.Kind != action.Done || d.Action.Succeeded() || !strings.Contains(d.Action.Message, "watching failed: wait: ms") {
		t.Errorf("after a failed wait: %v (%s)", d.Action, d.Action.Message)
	}
	// Positive control: the wait held.
	a, _ = New(agent.Options{"ms": "500"})
	a.Decide(ctx, &observe.Observation{Step: 1, Running: true})
	d, _ = a.Decide(ctx, &observe.Observation{Step: 2, Running: true, Last: &action.Result{OK: true}})
	if d.Action.Kind != action.Done || !d.Action.Succeeded() {
		t.Errorf("after a wait that held: %v", d.Action)
	}
}
