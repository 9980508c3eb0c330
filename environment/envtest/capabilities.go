package envtest

import (
	"context"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/environment"
)

// testCapabilities: the backend declares what it can do
// (environment.Capable), and does what it declares: Reap iff it is a
// Reaper, SeedStep iff it is a SeedStepper (and the step works in one of
// its environments), and a configuration asking for what it lacks (an
// image, an OCI runtime) is refused with nothing left behind. Freeze is
// held to its declaration by FreezeThaw.
func (s *suite) testCapabilities(t *testing.T) {
	capable, ok := s.o.Backend.(environment.Capable)
	if !ok {
		t.Fatal("the backend does not declare its capabilities (environment.Capable)")
	}
	c := capable.Capabilities()
	t.Logf("capabilities: %s", c)
	_, reaper := s.o.Backend.(environment.Reaper)
	stepper, seeds := s.o.Backend.(environment.SeedStepper)
	for _, k := range []struct {
		name           string
		declared, does bool
	}{
		{"Reap (environment.Reaper)", c.Reap, reaper},
		{"SeedStep (environment.SeedStepper)", c.SeedStep, seeds},
	} {
		if k.declared != k.does {
			t.Errorf("%s: declared %v, implemented %v", k.name, k.declared, k.does)
		}
	}

	t.Run("Refusals", func(t *testing.T) {
		for _, k := range []struct {
			name string
			has  bool
			set  func(*environment.Config)
		}{
			{"Image", c.Images, func(cfg *environment.Config) { cfg.Image = "agentbox/envtest-no-such-image:none" }},
			{"Runtime", c.OCIRuntime, func(cfg *environment.Config) { cfg.Runtime = "envtest-no-such-runtime" }},
		} {
			if k.has {
				continue
			}
			cfg := s.config(t)
			k.set(&cfg)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			env, err := s.o.Backend.Create(ctx, cfg)
			cancel()
			if err == nil {
				cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
				env.Close(cctx)
				ccancel()
				t.Errorf("Config.%s given to a backend without the capability: Create succeeded", k.name)
				continue
			}
			t.Logf("Config.%s: %v", k.name, err)
			if s.o.Leftovers != nil {
				if left, err := s.o.Leftovers(context.Background(), cfg.RunID); err != nil || len(left) > 0 {
					t.Errorf("Config.%s refused, but left %v behind (%v)", k.name, left, err)
				}
			}
		}
	})

	if seeds {
		t.Run("SeedStep", func(t *testing.T) {
			b := s.newBox(t)
			n, err := stepper.SeedStep(b.ctx, b.env, 10, 10)
			if err != nil || n <= 0 {
				t.Errorf("SeedStep = %d bytes, %v", n, err)
			}
		})
	}
}
