package session

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
)

// clockBackend is a backend that declares (or not) a virtual clock.
type clockBackend struct{ virtual bool }

func (clockBackend) Name() string { return "stub" }
func (clockBackend) Create(context.Context, environment.Config) (environment.Environment, error) {
	return nil, errors.New("not here")
}
func (b clockBackend) Capabilities() environment.Capabilities {
	return environment.Capabilities{VirtualClock: b.virtual}
}

// TestClockOf: the modes and steps run, eval, serve and suites accept,
// and the ones they refuse, each naming why.
func TestClockOf(t *testing.T) {
	for _, c := range []struct {
		mode    string
		step    time.Duration
		virtual bool
		err     string
	}{
		{"", 0, false, ""},
		{"wall", 0, false, ""},
		{"virtual", 0, true, ""},
		{"virtual", 250 * time.Millisecond, true, ""},
		{"fast", 0, false, `clock "fast": want wall or virtual`},
		{"wall", time.Second, false, "applies to the virtual clock only"},
		{"", time.Second, false, "applies to the virtual clock only"},
		{"virtual", -time.Second, false, "must not be negative"},
		{"virtual", 2 * time.Hour, false, "at most 1h0m0s"},
	} {
		got, err := ClockOf(c.mode, c.step)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ClockOf(%q, %v) = %v, want an error naming %q", c.mode, c.step, err, c.err)
			}
			continue
		}
		if err != nil || got.Virtual != c.virtual || got.Step != c.step {
			t.Errorf("ClockOf(%q, %v) = %+v, %v", c.mode, c.step, got, err)
		}
	}
}

// TestCheckClock: a virtual clock is refused, before anything starts, of
// a backend without the capability and of a staged static executable or
// Go program (this test binary is one); a script of a dynamically linked
// shell and a program of the image (checked at launch) pass; the wall
// clock is never refused.
func TestCheckClock(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bundle := func(name string, write func(path string)) *app.Bundle {
		dir := t.TempDir()
		write(filepath.Join(dir, name))
		if err := os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command":"`+name+`","wait_for_window":false}`), 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := app.Load(dir, app.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	script := bundle("app.sh", func(p string) { os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), 0o755) })
	goProgram := bundle("app", func(p string) {
		in, err := os.Open(self)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		out, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
	})
	virtual := Clock{Virtual: true}
	for _, c := range []struct {
		name    string
		clock   Clock
		backend clockBackend
		bundle  *app.Bundle
		err     string
	}{
		{"wall clock, no capability", Clock{}, clockBackend{}, goProgram, ""},
		{"no capability", virtual, clockBackend{}, script, "the stub backend has no virtual clock"},
		{"a script", virtual, clockBackend{true}, script, ""},
		{"a Go program", virtual, clockBackend{true}, goProgram, "cannot run on a virtual clock"},
		{"a program of the image", virtual, clockBackend{true}, &app.Bundle{InImage: true}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckClock(c.clock, c.backend, c.bundle)
			if c.err == "" {
				if err != nil {
					t.Fatalf("CheckClock = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrNoClock) || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("CheckClock = %v, want ErrNoClock naming %q", err, c.err)
			}
		})
	}
}
