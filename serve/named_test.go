package serve

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"

	"github.com/codegirl-games/agentbox/environment/named"
	"github.com/codegirl-games/agentbox/serve/api"
)

// TestNamedEnvironment: an environment of a named sandbox holds the name
// from create to close — across its episodes' sandboxes, each made anew
// (never the pool's) — refuses relaunch and fork, and a second create of
// the name is refused with sandbox_in_use until it is closed.
func TestNamedEnvironment(t *testing.T) {
	root := t.TempDir()
	t.Setenv(named.EnvRoot, root)
	var broken atomic.Bool // the next guest breaks the protocol at launch
	h := newHarness(t, func() *guestenvtest.Guest {
		if broken.Swap(false) {
			return &guestenvtest.Guest{OnLaunch: func(w *guestenvtest.Writer) { w.Raw([]byte("not a frame")) }}
		}
		return &guestenvtest.Guest{}
	}, func(o *Options) { o.Pool = 1 })
	h.backend.Named = true

	for _, c := range []struct{ body, code, want string }{
		{`{"app": "game", "name": "Bad Name"}`, api.CodeInvalidRequest, "lower-case"},
		{`{"app": "game", "name": "n1", "reset_mode": "relaunch"}`, api.CodeInvalidRequest, "never reset in place"},
	} {
		a := h.do(req{method: "POST", path: "/v1/envs", body: []byte(c.body)})
		if a.errorCode() != c.code || !strings.Contains(string(a.body), c.want) {
			t.Errorf("create %s: %d %s, want %s naming %q", c.body, a.status, a.body, c.code, c.want)
		}
	}
	if _, err := named.Get(root, "n1"); err == nil {
		t.Fatal("a refused create left a record of its name")
	}

	e := h.create(testToken, `, "name": "n1"`)
	a := h.do(req{method: "POST", path: "/v1/envs", token: otherToken, body: []byte(`{"app": "game", "name": "n1"}`)})
	if a.status != 409 || a.errorCode() != api.CodeSandboxInUse || !strings.Contains(string(a.body), e.ID) {
		t.Fatalf("a second create of n1: %d %s, want 409 sandbox_in_use naming %s", a.status, a.body, e.ID)
	}
	if _, err := named.Acquire(root, "n1", "guestenvtest", "run-x"); err == nil {
		// the server lends the name to its own sandboxes only while none
		// holds it: the running episode's holds it now
		t.Fatal("another run took n1 while the environment's episode held it")
	}
	for _, body := range []string{`{"mode": "relaunch"}`} {
		a := h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/reset", body: []byte(body)})
		if a.errorCode() != api.CodeInvalidRequest || !strings.Contains(string(a.body), "named") {
			t.Errorf("reset %s: %d %s", body, a.status, a.body)
		}
	}
	a = h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/fork", body: []byte(`{"count": 1}`)})
	if a.errorCode() != api.CodeInvalidRequest || !strings.Contains(string(a.body), "named") {
		t.Errorf("fork: %d %s", a.status, a.body)
	}
	for range 2 { // fresh resets: a new sandbox each, the name held throughout
		a := h.do(req{method: "POST", path: "/v1/envs/" + e.ID + "/reset"})
		if a.status != 200 {
			t.Fatalf("reset: %d %s", a.status, a.body)
		}
		a = h.do(req{method: "POST", path: "/v1/envs", token: otherToken, body: []byte(`{"app": "game", "name": "n1"}`)})
		if a.errorCode() != api.CodeSandboxInUse {
			t.Fatalf("create of n1 after a reset: %d %s", a.status, a.body)
		}
	}
	if got := slices.DeleteFunc(h.backend.Names(), func(n string) bool { return n == "" }); len(got) != 3 {
		t.Fatalf("sandboxes made for n1: %q, want 3 (one per episode, none warm)", got)
	}
	if a := h.do(req{method: "DELETE", path: "/v1/envs/" + e.ID}); a.status != 200 {
		t.Fatalf("close: %d %s", a.status, a.body)
	}
	if got, err := named.Get(root, "n1"); err != nil || got.Holder != nil || got.Backend != "guestenvtest" {
		t.Fatalf("after close: %+v, %v", got, err)
	}
	// A failed start lets it go too.
	broken.Store(true)
	if a := h.do(req{method: "POST", path: "/v1/envs", body: []byte(`{"app": "game", "name": "n1"}`)}); a.status < 500 {
		t.Fatalf("create over a broken guest: %d %s", a.status, a.body)
	}
	// Released: taken by the next environment of the name.
	e2 := h.create(otherToken, `, "name": "n1"`)
	h.do(req{method: "DELETE", path: "/v1/envs/" + e2.ID, token: otherToken})
}
