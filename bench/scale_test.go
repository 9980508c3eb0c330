package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/observe"
)

// TestScaleScriptedGuest measures the step with 1 and 3 environments
// stepping at once against guests on in-process pipes: every sample
// counted, every environment closed, the report's lines printed.
func TestScaleScriptedGuest(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "game"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command": "game", "window_title": "fake"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	backend := &guestenvtest.Backend{New: func() *guestenvtest.Guest { return &guestenvtest.Guest{} }}
	var progress bytes.Buffer
	o := Options{Backend: backend, App: dir, Concurrency: []int{1, 3}, ScaleSteps: 7, Progress: &progress}
	rep, err := Run(t.Context(), o)
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	if len(rep.Scale) != 2 {
		t.Fatalf("scale points: %+v", rep.Scale)
	}
	for i, n := range []int{1, 3} {
		p := rep.Scale[i]
		if p.Envs != n || p.Step.N != 7*n || p.StepsPerSecond <= 0 || p.Screen != observe.DefaultScreen {
			t.Errorf("point %d: %+v", i, p)
		}
	}
	errs, closed := backend.GuestErrors()
	if closed != 4 || len(errs) != 4 {
		t.Errorf("%d environments closed, %d guests ended; want 4", closed, len(errs))
	}
	var out bytes.Buffer
	rep.Print(&out, o)
	if !strings.Contains(out.String(), "  3 at once:  p50 ") {
		t.Errorf("report:\n%s", out.String())
	}
}
