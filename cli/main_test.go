package cli

import (
	"os"
	"testing"

	"github.com/codegirl-games/agentbox/store"
)

// TestMain keeps the tests away from the user's index: commands run here
// write none unless a test names one (--index).
func TestMain(m *testing.M) {
	os.Setenv(store.EnvPath, store.Off)
	os.Exit(m.Run())
}
