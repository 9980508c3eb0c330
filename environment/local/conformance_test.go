package local_test

import (
	"os"
	"testing"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/envtest"
	"github.com/codegirl-games/agentbox/environment/local"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.CleanupBuilds()
	os.Exit(code)
}

// requireHost needs what the local backend needs: bubblewrap able to make
// a sandbox here, and the host's Xvfb, Openbox and the suite's apps (xev,
// xterm, xcalc).
func requireHost(t *testing.T, apps ...string) {
	t.Helper()
	testenv.Require(t, testenv.Probe("the local backend (see `agentbox doctor`)", (&local.Backend{}).Probe),
		testenv.Programs(append([]string{"Xvfb", "openbox"}, apps...)...))
}

// TestConformance runs the backend conformance suite against bubblewrap on
// this host, with the host's xev, xterm and xcalc.
func TestConformance(t *testing.T) {
	requireHost(t, "xev", "xterm", "xcalc")
	envtest.Run(t, envtest.Options{
		Backend: &local.Backend{},
		Config: environment.Config{
			GuestBinary: guestBinary(t),
			GuestLog: func(l string) {
				if os.Getenv("AGENTBOX_TEST_GUESTLOG") != "" {
					os.Stderr.WriteString("guest: " + l + "\n")
				}
			},
		},
		Mover:     testenv.Build(t, "./examples/mover"),
		Gone:      local.Gone,
		Leftovers: local.Leftovers,
		Posture:   envtest.Posture{UserNamespace: true, GuestSurvivesForkBomb: true},
	})
}

// guestBinary is $AGENTBOX_GUEST_BINARY when set (a prebuilt agentbox),
// else the guest make builds beside agentbox (cmd/agentbox-guest), built
// from this tree.
func guestBinary(t *testing.T) string {
	if p := os.Getenv("AGENTBOX_GUEST_BINARY"); p != "" {
		return p
	}
	return testenv.Build(t, "./cmd/agentbox-guest")
}
