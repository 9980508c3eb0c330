package environment_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/environment"
)

func TestCapabilities(t *testing.T) {
	all := environment.Capabilities{Images: true, OCIRuntime: true, Freeze: true, Reap: true,
		Limits: environment.Limits{CPU: true, Memory: true, PIDs: true}, SeedStep: true}
	for _, c := range []struct {
		name        string
		have, need  environment.Capabilities
		missing     []string
		haveStrings string
	}{
		{"nothing needed", environment.Capabilities{}, environment.Capabilities{}, nil, "none"},
		{"images lacking", environment.Capabilities{Reap: true}, environment.Capabilities{Images: true}, []string{"custom images"}, "reaping"},
		{"both lacking, in order", environment.Capabilities{}, environment.Capabilities{OCIRuntime: true, Images: true}, []string{"custom images", "OCI runtimes"}, "none"},
		{"a limit lacking", environment.Capabilities{Limits: environment.Limits{PIDs: true}}, environment.Capabilities{Limits: environment.Limits{Memory: true, PIDs: true}}, []string{"a memory limit"}, "a process limit"},
		{"everything there", all, all, nil, "custom images, OCI runtimes, freezing, reaping, a CPU limit, a memory limit, a process limit, the seed-style step"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.have.Missing(c.need); !slices.Equal(got, c.missing) {
				t.Errorf("Missing = %q, want %q", got, c.missing)
			}
			if got := c.have.String(); got != c.haveStrings {
				t.Errorf("String = %q, want %q", got, c.haveStrings)
			}
		})
	}
	if got := environment.CapabilitiesOf(&fakeBackend{name: "undeclared"}); got != (environment.Capabilities{}) {
		t.Errorf("a backend that declares nothing has %v", got)
	}
}

func TestResourcesValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		r    environment.Resources
		want string // "" is valid
	}{
		{"defaults", environment.Resources{}, ""},
		{"just below memory", environment.Resources{MemoryMB: 321, TmpfsMB: 256, ShmMB: 64}, ""},
		{"tmpfs + shm equal to memory", environment.Resources{MemoryMB: 320, TmpfsMB: 256, ShmMB: 64},
			"tmpfs (256 MiB) + shm (64 MiB) must stay below the memory limit (320 MiB): tmpfs pages count against it"},
		{"tmpfs above memory", environment.Resources{MemoryMB: 256, TmpfsMB: 256}, "must stay below the memory limit (256 MiB)"},
		{"a sum that overflows", environment.Resources{MemoryMB: 1024, TmpfsMB: math.MaxInt - 10, ShmMB: 64}, "must stay below the memory limit"},
		{"shm that overflows", environment.Resources{MemoryMB: 1024, TmpfsMB: 256, ShmMB: math.MaxInt - 10}, "must stay below the memory limit"},
		{"negative memory", environment.Resources{MemoryMB: -1}, "must be positive"},
		{"negative processes", environment.Resources{PIDs: -5}, "must be positive"},
		{"negative CPUs", environment.Resources{CPUs: -0.5}, "must be positive"},
		{"NaN CPUs", environment.Resources{CPUs: math.NaN()}, "must be positive"},
		{"negative shm", environment.Resources{ShmMB: -64}, "must be positive"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.r.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("Validate(%+v) = %v, want nil", c.r, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("Validate(%+v) = %v, want %q", c.r, err, c.want)
			}
		})
	}
}
