package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/internal/testenv"
)

// TestFiguresGateMask measures the policy gate's cost per step and
// masking's cost per frame on a real app — the test image's zenity
// dialog in Docker, with --a11y — at 640×480 and 1920×1080: the same
// script of clicks run with the dialog's policy (gated: the tree read,
// the element under the point, the rules; masked: the tree read, the
// areas, the paint) and without any (the reference). It reads the
// trace's gate_ms, tree_ms and mask_ms, and each step's wall time (its
// t_ms from the previous step's), and logs their p50 and p95. Off unless
// AGENTBOX_FIGURES=1 (docs/measurements.md):
//
//	AGENTBOX_FIGURES=1 go test -count=1 -run TestFiguresGateMask -v -timeout 30m ./e2e/
func TestFiguresGateMask(t *testing.T) {
	if os.Getenv("AGENTBOX_FIGURES") != "1" {
		t.Skip("figures: set AGENTBOX_FIGURES=1")
	}
	testenv.Require(t, testenv.Image(a11yImage()))
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(pol, []byte(deletePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	const clicks = 60
	for _, sc := range []struct{ w, h int }{{640, 480}, {1920, 1080}} {
		var script strings.Builder
		script.WriteString(deleteScriptHead)
		for range clicks {
			// The centre: the dialog's text, or the desktop; either way
			// not Delete, so the gate lets it run.
			fmt.Fprintf(&script, "  - {action: click, x: %d, y: %d}\n", sc.w/2, sc.h/2-40)
		}
		file := writeScript(t, script.String())
		for _, governed := range []bool{false, true} {
			args := []string{"run", appDir(t, deleteManifest), "--script", file, "--a11y",
				"--timeout", "10m", "--screen", fmt.Sprintf("%dx%d", sc.w, sc.h), "--backend", "docker", "--image", a11yImage()}
			if governed {
				args = append(args, "--policy", pol, "--approve", "deny")
			}
			r := agentbox(t, args...)
			if r.code != 0 {
				t.Fatalf("%v: %s", args, r)
			}
			tr := openTrace(t, r.dir)
			var step, gate, tree, maskMS []float64
			prev := -1.0
			for _, s := range tr.Steps {
				if prev >= 0 && s.Action != nil && s.Action.Kind == "click" {
					step = append(step, s.TMS-prev)
				}
				prev = s.TMS
				if s.Action == nil || s.Action.Kind != "click" {
					continue
				}
				if pd := s.Policy; pd != nil {
					gate = append(gate, pd.GateMS)
					tree = append(tree, pd.TreeMS)
				}
				if o := s.Observation; o != nil && governed {
					maskMS = append(maskMS, o.MaskMS)
				}
			}
			name := "reference (no policy)"
			if governed {
				name = "--policy (gate and mask)"
			}
			t.Logf("%dx%d %s: %d clicks; step wall time %s", sc.w, sc.h, name, len(step), pcts(step))
			if governed {
				t.Logf("%dx%d   gate_ms %s (of which tree_ms %s); mask_ms per frame %s", sc.w, sc.h, pcts(gate), pcts(tree), pcts(maskMS))
				if len(gate) < clicks || len(maskMS) < clicks {
					t.Errorf("%d gated steps, %d masked frames; want %d", len(gate), len(maskMS), clicks)
				}
			}
		}
	}
}

// pcts is "p50 X ms, p95 Y ms" of xs.
func pcts(xs []float64) string {
	if len(xs) == 0 {
		return "(none)"
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	at := func(p float64) float64 { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return fmt.Sprintf("p50 %.2f ms, p95 %.2f ms", at(0.50), at(0.95))
}
