package serve

import (
	"os"
	"testing"

	"github.com/codegirl-games/agentbox/internal/lockrank"
)

// TestMain checks session's lock order (session/lockorder.go) under every
// serve test: environments stepped, reset, watched and closed at once.
func TestMain(m *testing.M) {
	lockrank.Enable()
	os.Exit(m.Run())
}
