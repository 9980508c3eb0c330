//go:build k8s

package kubernetes_test

import (
	"testing"

	"github.com/codegirl-games/agentbox/environment/envtest"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

// TestConformance runs the backend conformance suite against a real
// cluster (scripts/k8s-cluster.sh's one node) with the test image (xev,
// xterm, xcalc) carrying the test's own agentbox as the guest.
func TestConformance(t *testing.T) {
	c := newCluster(t, testenv.TestImage)
	envtest.Run(t, envtest.Options{
		Backend:   c.backend(),
		Config:    c.config(),
		Mover:     testenv.Build(t, "./examples/mover"),
		Gone:      c.gone,
		Leftovers: c.leftovers,
		Posture:   envtest.Posture{Seccomp: true, PodInterface: true},
		PIDs:      podPIDs,
	})
}
