package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/bench"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

// TestBenchFloor runs agentbox bench with small counts on each backend:
// the step at each screen size and the cold start are held against their
// floors measured in the same run (the primitives alone in the step's
// sandbox; the runtime running true), the ratios are printed and in the
// JSON, every floor and ratio positive; what was asked away is said to
// be skipped. Figures are not judged: the machine may be busy.
func TestBenchFloor(t *testing.T) {
	for name, need := range map[string]func(t *testing.T) []string{
		"docker": func(t *testing.T) []string {
			testenv.Require(t, testenv.Image(testenv.RuntimeImage))
			return []string{"--backend", "docker", "--image", testenv.RuntimeImage}
		},
		"local": func(t *testing.T) []string {
			requireLocal(t)
			return []string{"--backend", "local"}
		},
	} {
		t.Run(name, func(t *testing.T) {
			flags := need(t)
			out := filepath.Join(t.TempDir(), "bench.json")
			args := append([]string{"bench", "--app", moverApp(t, ""), "--cold", "1", "--samples", "5", "--floor-samples", "5",
				"--steps", "0", "--seed-steps", "0", "--remote-samples", "0", "--pool-resets", "0", "--pool-eval", "0", "--forks", "0",
				"--screens", "640x480", "--json", out}, flags...)
			r := agentbox(t, args...)
			if r.code != 0 {
				t.Fatalf("bench: %s", r)
			}
			for _, want := range []string{"machine: ", " CPUs", "load average", "× floor", "the runtime alone, the same sandbox running true",
				"step, screen unchanged:", "step, full frame:", "skipped: ", "the full run (--steps 0)"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("the report lacks %q:\n%s", want, r.stdout)
				}
			}
			for _, bad := range []string{"n=0", "0-step run"} {
				if strings.Contains(r.stdout, bad) {
					t.Errorf("the report says %q:\n%s", bad, r.stdout)
				}
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			var rep bench.Report
			if err := json.Unmarshal(data, &rep); err != nil {
				t.Fatalf("%v\n%s", err, data)
			}
			if rep.Machine.CPUs <= 0 || rep.ColdStart.N != 1 || rep.ColdFloor.N != 1 || rep.ColdFloor.P50 <= 0 || rep.ColdRatio <= 0 {
				t.Errorf("machine %+v, cold start %+v, its floor %+v, ratio %v", rep.Machine, rep.ColdStart, rep.ColdFloor, rep.ColdRatio)
			}
			if len(rep.Steps) != 1 || rep.Steps[0].Floor == nil {
				t.Fatalf("steps: %+v", rep.Steps)
			}
			// The unchanged screen's floor from its sandbox, the full
			// frame's from its own, a sample before each step.
			f := rep.Steps[0].Floor
			if f.FullFrame == nil || !f.Paired {
				t.Fatalf("floor: %+v", f)
			}
			ff := f.FullFrame
			for what, s := range map[string]bench.Stats{"ping": f.Ping, "motion": f.Motion, "unchanged floor": f.UnchangedFloor,
				"frame round trip": ff.FrameTrip, "full frame's motion": ff.Motion, "capture": ff.Capture, "hash": ff.Hash,
				"compress": ff.Encode, "decompress": ff.Decode, "PNG": ff.PNG, "full-frame floor": f.FullFloor} {
				if s.N != 5 || s.Max <= 0 {
					t.Errorf("the floor's %s: %+v", what, s)
				}
			}
			if ff.FrameBytes <= 0 || f.Unchanged <= 0 || f.Full <= 0 || f.UnchangedRatio <= 0 || f.FullRatio <= 0 {
				t.Errorf("floor: %+v", f)
			}
			if !strings.Contains(string(data), `"Skipped": [`) || strings.Contains(string(data), `"RunSteps"`) {
				t.Errorf("the JSON does not say what was skipped:\n%s", data)
			}
		})
	}
}
