//go:build k8s

package kubernetes_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/images"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

// TestGuestBinaries: the guest image of agentbox with agentbox-guest of its
// build beside it (as make builds them) carries both, and its Pods run
// agentbox-guest; the guest image of agentbox alone carries it alone, and
// its Pods run agentbox itself. Both Pods serve a screenshot.
func TestGuestBinaries(t *testing.T) {
	c := newCluster(t, testenv.TestImage)
	data, err := os.ReadFile(c.bin)
	if err != nil {
		t.Fatal(err)
	}
	alone := filepath.Join(t.TempDir(), "agentbox")
	if err := os.WriteFile(alone, data, 0o755); err != nil {
		t.Fatal(err)
	}
	loadGuestImage(t, alone, testenv.TestImage)
	for _, tc := range []struct{ name, bin, command string }{
		{"agentbox and agentbox-guest", c.bin, images.GuestSmallPath},
		{"agentbox alone", alone, images.GuestPath},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, p := c.observedPod(t, environment.Config{Image: testenv.TestImage, GuestBinary: tc.bin})
			id, _ := guestKey(tc.bin)
			ctr := p.Spec.Containers[0]
			if len(ctr.Command) == 0 || ctr.Command[0] != tc.command || ctr.Image != images.GuestRef(testenv.TestImage, id) {
				t.Errorf("the Pod runs %v of %s; want %s of %s", ctr.Command, ctr.Image, tc.command, images.GuestRef(testenv.TestImage, id))
			}
			t.Logf("timings (ms): %v", env.Info().Timings)
		})
	}
}
