package kubernetes_test

import (
	"os"
	"testing"

	"github.com/codegirl-games/agentbox/internal/testenv"
)

// TestMain removes what testenv.Build made, with the k8s tag or without
// (TestUnreachable and TestGuestImage build agentbox too).
func TestMain(m *testing.M) {
	code := m.Run()
	testenv.CleanupBuilds()
	os.Exit(code)
}
