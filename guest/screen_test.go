package guest

import (
	"io"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

// TestStartRefusesScreens: the guest holds a start request to the same
// screen bound as the host (observe.Screen.Validate), before it starts
// anything; it used to take up to 8192x8192 at any depth.
func TestStartRefusesScreens(t *testing.T) {
	for _, s := range []observe.Screen{
		{},
		{Width: 640, Height: 480},
		{Width: 640, Height: 480, Depth: 16},
		{Width: 8000, Height: 8000, Depth: 24},
		{Width: 32, Height: 32, Depth: 24},
	} {
		g := &Guest{logw: io.Discard}
		_, err := g.start(t.Context(), wire.StartRequest{Screen: s, Home: t.TempDir()})
		if !wire.IsCode(err, wire.CodeInvalid) || !strings.Contains(err.Error(), "bad screen") {
			t.Errorf("start at %v: %v; want an invalid request", s, err)
		}
		if g.server != nil {
			t.Errorf("start at %v started Xvfb", s)
			g.server.Stop(t.Context())
		}
	}
}
