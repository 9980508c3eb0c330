package replay

import (
	"context"
	"image/color"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/observe"
)

// nextAgent is the run's own agent after the seam: it counts its
// decisions and answers with a wait.
type nextAgent struct{ steps []int }

func (n *nextAgent) Decide(_ context.Context, o *observe.Observation) (agent.Decision, error) {
	n.steps = append(n.steps, o.Step)
	return agent.Decision{Action: action.Action{Kind: action.Wait, MS: 1}}, nil
}

// TestResumeAgent: steps up to the seam are the recording's actions;
// the seam's screen is compared; then the run's agent decides. A screen
// that differs ends the run (diverged) unless Force.
func TestResumeAgent(t *testing.T) {
	tr := recording(t) // key_down, wait, done on three colours
	same := func(step int) *observe.Frame {
		return frameOf(color.RGBA{uint8(50 * (step - 1)), 0, 0, 255}, uint64(step))
	}
	other := frameOf(color.RGBA{0, 255, 255, 255}, 99)
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		seam     *observe.Frame
		force    bool
		diverged bool
	}{
		{"matching", same(2), false, false},
		{"diverged", other, false, true},
		{"forced", other, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			next := &nextAgent{}
			seamed := false
			ra := NewResumeAgent(tr, 1, Rules{Area: AreaScreen, Tolerance: DefaultTolerance, MaxDiff: DefaultMaxDiff}, TimingFast, next)
			ra.Force = c.force
			ra.Seam = func() error { seamed = true; return nil }
			d, err := ra.Decide(ctx, obs(1, same(1)))
			if err != nil || d.Action.Kind != action.KeyDown || d.Meta["resumed"] != "replayed" {
				t.Fatalf("step 1: %+v, %v", d, err)
			}
			d, err = ra.Decide(ctx, obs(2, c.seam))
			if err != nil {
				t.Fatal(err)
			}
			if c.diverged {
				if d.Reason != agent.ReasonDiverged || ra.Divergence == nil || seamed || len(next.steps) > 0 {
					t.Fatalf("seam: %+v (divergence %v, seam %v, next %v)", d, ra.Divergence, seamed, next.steps)
				}
				return
			}
			if d.Action.Kind != action.Wait || !seamed || len(next.steps) != 1 || next.steps[0] != 2 {
				t.Fatalf("seam: %+v (seam %v, next %v)", d, seamed, next.steps)
			}
			if c.force != (len(ra.Forced) == 1) {
				t.Fatalf("forced: %v", ra.Forced)
			}
			if _, err := ra.Decide(ctx, obs(3, same(3))); err != nil || len(next.steps) != 2 {
				t.Fatalf("after the seam: next %v, %v", next.steps, err)
			}
		})
	}
}
