// Package xservertest starts real X servers and window managers for tests.
// What they need is stated with testenv.Require: skipped under -short, and
// when missing, skipped locally and failed under CI=true.
package xservertest

import (
	"context"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/guest/xserver"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

// StartTimeout bounds the start of a server or window manager in tests. A
// cold first start of Xvfb (fonts, xkbcomp) can take a few seconds on a
// loaded machine.
const StartTimeout = 20 * time.Second

// Start starts Xvfb with cfg and stops it when the test ends. Its stderr is
// logged if the test fails.
func Start(t testing.TB, cfg xserver.Config) *xserver.Server {
	t.Helper()
	testenv.Require(t, testenv.Programs("Xvfb"))
	var logbuf testenv.Buffer
	if cfg.Stderr == nil {
		cfg.Stderr = &logbuf
	}
	ctx, cancel := context.WithTimeout(t.Context(), StartTimeout)
	defer cancel()
	s, err := xserver.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start Xvfb: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("stop Xvfb: %v", err)
		}
		if t.Failed() && logbuf.Len() > 0 {
			t.Logf("Xvfb %s stderr:\n%s", s.Display(), logbuf.String())
		}
	})
	return s
}

// StartWM starts Openbox on display and stops it when the test ends.
func StartWM(t testing.TB, display string) *xserver.WM {
	t.Helper()
	testenv.Require(t, testenv.Programs("openbox"))
	var logbuf testenv.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), StartTimeout)
	defer cancel()
	wm, err := xserver.StartWM(ctx, display, xserver.WMConfig{Dir: t.TempDir(), Stderr: &logbuf})
	if err != nil {
		t.Fatalf("start openbox: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := wm.Stop(ctx); err != nil {
			t.Errorf("stop openbox: %v", err)
		}
		if t.Failed() && logbuf.Len() > 0 {
			t.Logf("openbox stderr:\n%s", logbuf.String())
		}
	})
	return wm
}
