package envtest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
)

// testVirtualClock: a backend that declares VirtualClock runs the app on
// the clock LaunchSpec.Clock sets, and the clock moves only when
// SetClock moves it: a shell loop printing `date +%s` prints the start
// time, and the later time once it is set, whatever the wall clock does.
// A backend that does not declare it refuses the launch (ErrAppStart),
// saying why. A static executable (this suite's probe, a static Go
// program) is refused, by name.
func (s *suite) testVirtualClock(t *testing.T) {
	c := environment.CapabilitiesOf(s.o.Backend)
	start := time.Unix(1_000_000_000, 0) // 2001-09-09, far from any wall clock
	script := "#!/bin/sh\nwhile :; do date +%s; sleep 0.1; done\n"
	dir := writeApp(t, `{"command":"clock.sh","wait_for_window":false}`, map[string]string{"clock.sh": script})
	b := s.newBox(t)
	bundle, err := app.Load(dir, app.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bundle.Close() })
	_, err = b.env.Launch(b.ctx, environment.LaunchSpec{App: bundle, ReadyTimeout: 10 * time.Second, LogCap: 1 << 20, Clock: start})
	if !c.VirtualClock {
		if err == nil || !errors.Is(err, environment.ErrAppStart) {
			t.Fatalf("a backend without VirtualClock launched an app with LaunchSpec.Clock: %v", err)
		}
		t.Logf("refused as it should be: %v", err)
		return
	}
	if err != nil {
		t.Fatalf("launch on a virtual clock: %v\nstderr: %s", err, b.sink.stderr())
	}
	clocked, ok := b.env.(environment.Clocked)
	if !ok {
		t.Fatal("VirtualClock declared, but the environment is not environment.Clocked")
	}
	has := func(sec int64) func() bool {
		return func() bool { return strings.Contains(b.sink.stdout(), fmt.Sprintf("%d\n", sec)) }
	}
	if !b.sink.waitFor(20*time.Second, has(start.Unix())) {
		t.Fatalf("the app never printed its start time %d; stdout:\n%s\nstderr:\n%s", start.Unix(), tail(b.sink.stdout(), 400), b.sink.stderr())
	}
	time.Sleep(1500 * time.Millisecond) // the wall clock moves on; the app's does not
	if has(start.Unix() + 1)() {
		t.Fatalf("the app's clock moved by itself:\n%s", tail(b.sink.stdout(), 400))
	}
	later := start.Add(time.Hour)
	if err := clocked.SetClock(b.ctx, later); err != nil {
		t.Fatalf("SetClock: %v", err)
	}
	if !b.sink.waitFor(20*time.Second, has(later.Unix())) {
		t.Fatalf("the app never printed the time it was set to, %d:\n%s", later.Unix(), tail(b.sink.stdout(), 400))
	}
	if err := clocked.SetClock(b.ctx, start); err == nil {
		t.Error("SetClock moved the clock backwards")
	}

	t.Run("StaticGoProgram", func(t *testing.T) {
		b := s.newBox(t)
		bundle, err := app.Load(s.probeApp(t, "posture"), app.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bundle.Close() })
		_, err = b.env.Launch(b.ctx, environment.LaunchSpec{App: bundle, ReadyTimeout: 10 * time.Second, Clock: start})
		if err == nil || !errors.Is(err, environment.ErrAppStart) || !strings.Contains(err.Error(), "statically linked") {
			t.Fatalf("a static Go program launched on a virtual clock: %v (want ErrAppStart naming it statically linked)", err)
		}
	})
}
