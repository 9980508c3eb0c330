package replay

import (
	"context"
	"image/color"
	"path/filepath"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/mask"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

func frameOf(c color.RGBA, hash uint64) *observe.Frame {
	img := solid(64, 48, c)
	return &observe.Frame{Width: 64, Height: 48, Pix: img.Pix, Hash: hash}
}

// recording writes a 3-step trace: key_down, wait, done, each on its own
// colour, 50 ms apart.
func recording(t *testing.T) *trace.Trace {
	t.Helper()
	return recordingBy(t, "")
}

// recordingBy is recording with the steps' actor.
func recordingBy(t *testing.T, actor string) *trace.Trace {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "rec")
	tw, err := trace.Create(dir, trace.Run{ID: "rec"}, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	acts := []action.Action{{Kind: action.KeyDown, Key: "Right"}, {Kind: action.Wait, MS: 10}, {Kind: action.Done}}
	for i, a := range acts {
		f := frameOf(color.RGBA{uint8(50 * i), 0, 0, 255}, uint64(i+1))
		a := a
		tw.Record(trace.Record{Type: trace.TypeStep, Step: i + 1, TMS: 100 + 50*float64(i),
			Observation: &trace.Observation{Screenshot: tw.Screenshot(i+1, f), FrameHash: trace.FrameHash(f.Hash), Width: 64, Height: 48, Running: true},
			Decision:    &trace.Decision{LatencyMS: 1}, Action: &a, Actor: actor})
	}
	if err := tw.Finish(func(r *trace.Run) { r.Outcome = trace.Success }); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func obs(step int, f *observe.Frame) *observe.Observation {
	return &observe.Observation{Step: step, Screen: f, Running: true}
}

func TestAgentMatches(t *testing.T) {
	tr := recording(t)
	a := NewAgent(tr, DefaultRules(), TimingRecorded)
	ctx := t.Context()
	t0 := time.Now()
	var kinds []action.Kind
	for i := 0; i < 3; i++ {
		// Same pixels, another hash: compared pixel by pixel.
		d, err := a.Decide(ctx, obs(i+1, frameOf(color.RGBA{uint8(50 * i), 0, 0, 255}, uint64(100+i))))
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, d.Action.Kind)
		if i == 2 && (!d.Action.Succeeded() || d.Reason != "") {
			t.Errorf("last decision %+v, want a successful done", d)
		}
	}
	if el := time.Since(t0); el < 95*time.Millisecond {
		t.Errorf("recorded timing: 3 actions 50 ms apart took %v", el)
	}
	if kinds[0] != action.KeyDown || kinds[1] != action.Wait || kinds[2] != action.Done {
		t.Errorf("actions %v", kinds)
	}
	if a.Divergence != nil || a.Replayed != 3 || !a.Finished || len(a.Comparisons) != 3 {
		t.Errorf("divergence %v replayed %d finished %v comparisons %d", a.Divergence, a.Replayed, a.Finished, len(a.Comparisons))
	}
}

func TestAgentDiverges(t *testing.T) {
	tr := recording(t)
	a := NewAgent(tr, DefaultRules(), TimingFast)
	ctx := t.Context()
	if d, _ := a.Decide(ctx, obs(1, frameOf(color.RGBA{0, 0, 0, 255}, 1))); d.Action.Kind != action.KeyDown {
		t.Fatalf("step 1: %+v", d)
	}
	// Step 2's screen differs: its action still goes out (the comparison
	// runs while it plays), and the next decision ends the run.
	if d, _ := a.Decide(ctx, obs(2, frameOf(color.RGBA{0, 200, 0, 255}, 77))); d.Action.Kind != action.Wait {
		t.Fatalf("step 2: %+v", d)
	}
	d, _ := a.Decide(ctx, obs(3, frameOf(color.RGBA{100, 0, 0, 255}, 3)))
	if d.Action.Kind != action.Done || d.Action.Succeeded() || d.Reason != agent.ReasonDiverged {
		t.Fatalf("step 3: %+v, want done, diverged", d)
	}
	if a.Divergence == nil || a.Divergence.Step != 2 || a.Divergence.Kind != "screen" || a.Divergence.Diff.Pixels != 64*48-16*16 { // less the pointer's square at (0,0)
		t.Fatalf("divergence %+v", a.Divergence)
	}
}

func TestAgentAppState(t *testing.T) {
	tr := recording(t)
	a := NewAgent(tr, DefaultRules(), TimingFast)
	o := obs(1, frameOf(color.RGBA{0, 0, 0, 255}, 1))
	o.Running = false
	a.Decide(t.Context(), o)
	d, _ := a.Decide(t.Context(), obs(2, frameOf(color.RGBA{50, 0, 0, 255}, 2)))
	if d.Reason != agent.ReasonDiverged || a.Divergence == nil || a.Divergence.Kind != "app_state" || a.Divergence.Step != 1 {
		t.Fatalf("%+v %+v", d, a.Divergence)
	}
}

// TestAgentPersonsScreen: a person's step was recorded with the screen
// they saw when they acted, after the app had answered their previous
// action; the replay's own observation comes right after that action,
// before the app answered. With Peek the replay looks again at the
// recorded moment and matches; without, it diverges (the positive
// control: the stale screens do differ).
func TestAgentPersonsScreen(t *testing.T) {
	for _, tc := range []struct {
		name     string
		peek     bool
		diverged bool
	}{{"looks again", true, false}, {"without peek", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			tr := recordingBy(t, trace.ActorHuman)
			a := NewAgent(tr, DefaultRules(), TimingRecorded)
			step := 0
			if tc.peek {
				a.Peek = func(context.Context) (*observe.Frame, environment.State, error) {
					return frameOf(color.RGBA{uint8(50 * step), 0, 0, 255}, uint64(200+step)), environment.State{Running: true}, nil
				}
			}
			for step = 0; step < 3; step++ {
				stale := frameOf(color.RGBA{uint8(50 * max(step-1, 0)), 0, 0, 255}, uint64(100+step))
				d, err := a.Decide(t.Context(), obs(step+1, stale))
				if err != nil {
					t.Fatal(err)
				}
				if d.Reason == agent.ReasonDiverged {
					break
				}
			}
			a.Close()
			if got := a.Divergence != nil; got != tc.diverged {
				t.Fatalf("diverged %v (%+v), want %v", got, a.Divergence, tc.diverged)
			}
			if !tc.diverged && (!a.Finished || a.Replayed != 3) {
				t.Errorf("finished %v, replayed %d", a.Finished, a.Replayed)
			}
		})
	}
}

// TestAgentKeepsDenials: a step the recording's policy gate refused is not
// performed by the replay (which has no gate): a wait takes its place.
func TestAgentKeepsDenials(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	tw, err := trace.Create(dir, trace.Run{ID: "rec"}, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	acts := []action.Action{{Kind: action.Click, X: action.Int(5), Y: action.Int(5)}, {Kind: action.Done}}
	for i, a := range acts {
		f := frameOf(color.RGBA{0, 0, 0, 255}, 1)
		a := a
		r := trace.Record{Type: trace.TypeStep, Step: i + 1, TMS: 100,
			Observation: &trace.Observation{Screenshot: tw.Screenshot(i+1, f), FrameHash: trace.FrameHash(f.Hash), Width: 64, Height: 48, Running: true},
			Decision:    &trace.Decision{LatencyMS: 1}, Action: &a}
		if i == 0 {
			r.Policy = &trace.PolicyDecision{Rule: "deleting asks", Decision: "ask", Allowed: false}
		}
		tw.Record(r)
	}
	if err := tw.Finish(func(r *trace.Run) { r.Outcome = trace.Success }); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := NewAgent(tr, DefaultRules(), TimingFast)
	d, err := a.Decide(t.Context(), obs(1, frameOf(color.RGBA{0, 0, 0, 255}, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if d.Action.Kind != action.Wait {
		t.Errorf("the denied click was replayed: %+v", d.Action)
	}
}

// TestAgentComparesMasked: what the recording painted over (a masked
// password field) is painted alike on the replay's screen before it is
// compared: a replay without the recording's vault or policy does not
// diverge on pixels nobody saw.
func TestAgentComparesMasked(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	tw, err := trace.Create(dir, trace.Run{ID: "rec"}, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	area := action.Rect{8, 8, 56, 40}
	red := color.RGBA{200, 0, 0, 255}
	rec := mask.Paint(frameOf(red, 1), []mask.Area{{Rect: area}})
	done := action.Action{Kind: action.Done}
	tw.Record(trace.Record{Type: trace.TypeStep, Step: 1, TMS: 100,
		Observation: &trace.Observation{Screenshot: tw.Screenshot(1, rec), FrameHash: trace.FrameHash(rec.Hash), Width: 64, Height: 48, Running: true,
			Masked: []trace.MaskedArea{{Rect: area, Why: string(mask.WhyPassword)}}},
		Decision: &trace.Decision{LatencyMS: 1}, Action: &done})
	if err := tw.Finish(func(r *trace.Run) { r.Outcome = trace.Success }); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The replay shows the field's content (green) where the recording
	// was painted, and the same red elsewhere.
	shown := frameOf(red, 2)
	img := shown.Image()
	for y := area[1]; y < area[3]; y++ {
		for x := area[0]; x < area[2]; x++ {
			img.Set(x, y, color.RGBA{0, 200, 0, 255})
		}
	}
	a := NewAgent(tr, DefaultRules(), TimingFast)
	if d, _ := a.Decide(t.Context(), obs(1, shown)); d.Action.Kind != action.Done || a.Divergence != nil {
		t.Fatalf("decision %+v, divergence %+v: want the masked area left out", d, a.Divergence)
	}
}
