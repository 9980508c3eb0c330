package report

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// TestObserverInReport: the trusted observer's events are lines of the
// step whose action ran when they were seen (not of the observation that
// carried them), counted in its summary; the trace validates.
func TestObserverInReport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	start := time.Now()
	tw, err := trace.Create(dir, trace.Run{ID: "r1", Started: start, Settings: &trace.Settings{Observe: true}}, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &observe.Frame{Width: 8, Height: 8, Pix: make([]byte, 8*8*4), Hash: 1}
	a := action.Action{Kind: action.Wait, MS: 1}
	for n, act := range [][]observe.ActivityEvent{
		nil,
		{
			{Time: start.Add(150 * time.Millisecond), Kind: observe.ActExec, PID: 7, Argv: []string{"sh", "-c", "echo <b> > ~/out.txt"}},
			{Time: start.Add(160 * time.Millisecond), Kind: observe.ActFile, Path: "~/out.txt", Ops: []string{"created", "written"},
				SHA256: strings.Repeat("ab", 32), Size: 4},
			{Time: start.Add(199 * time.Millisecond), Kind: observe.ActOverflow, N: 3, Reason: "the kernel's file event queue overflowed: file changes were lost"},
		},
	} {
		tw.Record(trace.Record{Type: trace.TypeStep, Step: n + 1, TMS: float64(100 * (n + 1)),
			Observation: &trace.Observation{Screenshot: tw.Screenshot(n+1, f), FrameHash: "1", Width: 8, Height: 8, Running: true, Activity: act},
			Decision:    &trace.Decision{LatencyMS: 1}, Action: &a})
		tw.Record(trace.Record{Type: trace.TypeResult, Step: n + 1, Result: &action.Result{OK: true}})
	}
	if err := tw.Finish(func(r *trace.Run) { r.Outcome = trace.Success; r.Steps = 2 }); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if bad := trace.Validate(tr); len(bad) > 0 {
		t.Fatalf("Validate: %v", bad)
	}
	p := pageData(t, mustRender(t, tr))
	if len(p.Steps) != 2 {
		t.Fatalf("%d steps", len(p.Steps))
	}
	// Each on the step whose action ran when it was seen (the writer's
	// clock places the steps; none after the observation carrying it).
	var out []lineData
	for _, st := range p.Steps {
		out = append(out, st.Out...)
	}
	if len(out) != 3 || out[0].K != "a" || out[0].X != `observer: exec [sh -c "echo <b> > ~/out.txt"] (pid 7)` ||
		!strings.HasPrefix(out[1].X, "observer: file ~/out.txt created, written (4 bytes, sha256 abababababab") ||
		out[2].X != "observer: overflow: the kernel's file event queue overflowed: file changes were lost (3 lost)" {
		t.Fatalf("the steps' lines: %+v", out)
	}
	if sum := p.Steps[0].Sum + "|" + p.Steps[1].Sum; !strings.Contains(sum, "observed process or file event") {
		t.Errorf("the steps' summaries %q", sum)
	}
}

// TestValidateActivity: trace.Validate names a malformed observer event.
func TestValidateActivity(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	tw, err := trace.Create(dir, trace.Run{ID: "r1", Started: time.Now()}, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &observe.Frame{Width: 8, Height: 8, Pix: make([]byte, 8*8*4), Hash: 1}
	tw.Record(trace.Record{Type: trace.TypeFinal, Step: 0, Observation: &trace.Observation{Screenshot: tw.Screenshot(0, f), FrameHash: "1", Width: 8, Height: 8,
		Activity: []observe.ActivityEvent{{Kind: "file", Path: "~/x", Ops: []string{"touched"}}, {Kind: "spawn"}, {Kind: "overflow"}}}})
	if err := tw.Finish(func(r *trace.Run) { r.Outcome = trace.Success }); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(trace.Validate(tr), "\n")
	for _, want := range []string{
		`activity 1: file event ~/x: unknown operation "touched"`,
		`activity 2: unknown kind "spawn" (known: exec, exit, file, unseen, overflow)`,
		`activity 3: overflow event without a reason`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Validate lacks %q:\n%s", want, got)
		}
	}
}
