package x11

import (
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/guest/xserver"
	"github.com/codegirl-games/agentbox/guest/xserver/xservertest"
)

// TestClaimKeyboard: the first XTEST key event switches the core
// keyboard's source device, and the server tells every client that the
// keyboard changed at that very key — an app reloading its keyboard state
// then can lose the first keys typed into it. ClaimKeyboard makes that
// switch before any app runs: afterwards typing tells clients nothing.
func TestClaimKeyboard(t *testing.T) {
	t.Run("unclaimed", func(t *testing.T) {
		e := newEnv(t, xserver.Config{}, false)
		w := xservertest.WatchKeyboard(t, e.srv.Display())
		w.Changes(t)
		if err := e.c.TypeText(testCtx(t, 10*time.Second), "ab", 0); err != nil {
			t.Fatal(err)
		}
		if n := w.Changes(t); n == 0 {
			t.Errorf("typing on an unclaimed keyboard: no MappingNotify; the server no longer switches the source at the first key, and ClaimKeyboard may be moot")
		}
	})
	t.Run("claimed", func(t *testing.T) {
		e := newEnv(t, xserver.Config{}, false)
		w := xservertest.WatchKeyboard(t, e.srv.Display())
		ctx := testCtx(t, 10*time.Second)
		if err := e.c.ClaimKeyboard(ctx); err != nil {
			t.Fatal(err)
		}
		if n := w.Changes(t); n == 0 {
			t.Errorf("claiming: no MappingNotify")
		}
		for _, text := range []string{"ab", "Ada Lovelace"} {
			if err := e.c.TypeText(ctx, text, 0); err != nil {
				t.Fatal(err)
			}
			if n := w.Changes(t); n > 0 {
				t.Errorf("typing %q after the claim: %d MappingNotify events", text, n)
			}
		}
	})
}
