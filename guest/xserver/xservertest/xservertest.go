// Package xservertest starts real X servers and window managers for tests.
//
// A missing executable (Xvfb, openbox, xev, …) skips the test with a clear
// message, except under CI=true, where it fails it: CI must run every tier.
package xservertest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/guest/xserver"
)

// StartTimeout bounds the start of a server or window manager in tests. A
// cold first start of Xvfb (fonts, xkbcomp) can take a few seconds on a
// loaded machine.
const StartTimeout = 20 * time.Second

// CI reports whether the tests run under CI (CI=true), where missing tools are
// failures rather than skips.
func CI() bool { return os.Getenv("CI") == "true" }

// Require skips the test (fails it under CI=true) unless every named
// executable is in PATH.
func Require(t testing.TB, bins ...string) {
	t.Helper()
	var missing []string
	for _, b := range bins {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := "needs " + strings.Join(missing, ", ") + " in PATH (Debian: xvfb, openbox, x11-utils, xterm)"
	if CI() {
		t.Fatal(msg + "; CI=true, so this is a failure, not a skip")
	}
	t.Skip(msg)
}

// Start starts Xvfb with cfg (after Require(t, "Xvfb")) and stops it when the
// test ends. Its stderr is logged if the test fails.
func Start(t testing.TB, cfg xserver.Config) *xserver.Server {
	t.Helper()
	Require(t, "Xvfb")
	var logbuf syncBuffer
	if cfg.Stderr == nil {
		cfg.Stderr = &logbuf
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
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

// StartWM starts Openbox on display (after Require(t, "openbox")) and stops
// it when the test ends.
func StartWM(t testing.TB, display string) *xserver.WM {
	t.Helper()
	Require(t, "openbox")
	var logbuf syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
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

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
