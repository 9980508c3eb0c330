package plot

import (
	"bytes"
	"image/png"
	"testing"

	"github.com/codegirl-games/agentbox/bench"
	"github.com/codegirl-games/agentbox/observe"
)

// TestPlot draws both panels, one of them empty, into a PNG of the
// stated size.
func TestPlot(t *testing.T) {
	st := func(p50 float64) bench.Stats { return bench.Stats{N: 10, P50: p50, P95: 2 * p50} }
	full := &bench.Report{
		Steps: []bench.StepStats{
			{Screen: observe.Screen{Width: 640, Height: 480}, Unchanged: st(0.7), Full: st(2.5)},
			{Screen: observe.Screen{Width: 3840, Height: 2160}, Unchanged: st(4), Full: st(60)},
		},
		Scale: []bench.ScalePoint{{Envs: 1, Step: st(0.8)}, {Envs: 8, Step: st(5)}, {Envs: 64, Step: st(40)}},
	}
	sizesOnly := &bench.Report{Steps: full.Steps}
	for name, runs := range map[string][]Run{
		"both":       {{Backend: "docker", Report: full}, {Backend: "local", Report: sizesOnly}},
		"none":       {{Backend: "docker", Report: &bench.Report{}}},
		"one screen": {{Backend: "docker", Report: &bench.Report{Steps: full.Steps[:1]}}},
	} {
		var b bytes.Buffer
		if err := Plot(&b, runs); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		img, err := png.Decode(&b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if sz := img.Bounds().Size(); sz.X != 1280 || sz.Y != 600 {
			t.Errorf("%s: %v", name, sz)
		}
	}
}

func TestNiceCeil(t *testing.T) {
	for _, tt := range []struct{ in, want float64 }{{0, 1}, {0.7, 1}, {1.2, 2}, {3, 5}, {7, 10}, {40, 50}, {120, 200}} {
		if got := niceCeil(tt.in); got != tt.want {
			t.Errorf("niceCeil(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
