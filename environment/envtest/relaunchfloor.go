package envtest

import (
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/environment"
)

// testRelaunchFloor: a backend that relaunches in place times the least a
// relaunch costs in its sandbox (environment.RelaunchFloorer, for
// agentbox bench): before a launch it refuses, naming why; after one,
// each call kills the app (the first time the launched one, then its own
// start of it), starts the same command again and finds its window, and
// reports every part; the mover's window is up after each.
func (s *suite) testRelaunchFloor(t *testing.T) {
	capable, _ := s.o.Backend.(environment.Capable)
	if capable == nil || !capable.Capabilities().Relaunch {
		t.Skip("the backend does not relaunch in place (Capabilities.Relaunch)")
	}
	b := s.newBox(t)
	f, ok := b.env.(environment.RelaunchFloorer)
	if !ok {
		t.Fatal("the backend relaunches in place, and its environment cannot time a relaunch's floor (environment.RelaunchFloorer)")
	}
	if _, err := f.RelaunchFloor(b.ctx); err == nil || !strings.Contains(err.Error(), "no app was launched") {
		t.Errorf("before a launch: %v, want an error saying no app was launched", err)
	}
	if _, err := b.staged(s.moverDir(t, ""), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		fl, err := f.RelaunchFloor(b.ctx)
		if err != nil {
			t.Fatalf("floor %d: %v", i+1, err)
		}
		t.Logf("floor %d: kill %v, start %v, capture %v", i+1, fl.Kill, fl.Start, fl.Capture)
		if fl.Kill <= 0 || fl.Start <= 0 || fl.Capture <= 0 || fl.Total() != fl.Kill+fl.Start+fl.Capture {
			t.Errorf("floor %d: %+v", i+1, fl)
		}
		_, st := b.observe()
		if len(st.Windows) != 1 || st.Windows[0].Title != "mover" {
			t.Errorf("after floor %d: windows %+v, want the mover's one", i+1, st.Windows)
		}
	}
	// The launched app was killed by the first: its exit is reported as
	// any other, a kill.
	if e := b.sink.exited(); e == nil || e.Signal != "SIGKILL" {
		t.Errorf("the launched app's exit: %+v, want SIGKILL", e)
	}
}
