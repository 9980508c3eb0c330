package xserver_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/guest/xserver"
	"github.com/codegirl-games/agentbox/guest/xserver/xservertest"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

// BenchmarkStartup starts Xvfb and then Openbox b.N times and reports the
// median time to readiness of each (run with -benchtime=10x for "p50 of 10
// starts").
func BenchmarkStartup(b *testing.B) {
	testenv.Require(b, testenv.Programs("Xvfb", "openbox"))
	var xvfb, wm []time.Duration
	for b.Loop() {
		ctx, cancel := context.WithTimeout(b.Context(), xservertest.StartTimeout)
		s, err := xserver.Start(ctx, xserver.Config{})
		if err != nil {
			b.Fatal(err)
		}
		w, err := xserver.StartWM(ctx, s.Display(), xserver.WMConfig{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		xvfb = append(xvfb, s.ReadyAfter())
		wm = append(wm, w.ReadyAfter())
		_ = w.Stop(ctx)
		_ = s.Stop(ctx)
		cancel()
	}
	b.ReportMetric(p50(xvfb), "xvfb-p50-ms")
	b.ReportMetric(p50(wm), "openbox-p50-ms")
}

func p50(d []time.Duration) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[len(s)/2].Microseconds()) / 1000
}
