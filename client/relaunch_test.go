package client_test

import (
	"context"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/client"
	"github.com/codegirl-games/agentbox/serve/api"
	"github.com/codegirl-games/agentbox/trace"
)

// TestRelaunchOverARealServer: with ResetMode relaunch, Reset starts
// the next episode in the same sandbox (the same container) with the
// mover launched again — its square back at the start — and a new trace,
// over the WebSocket and over HTTP.
func TestRelaunchOverARealServer(t *testing.T) {
	c, _ := server(t)
	ctx := t.Context()
	for _, transport := range []string{client.WebSocket, client.HTTP} {
		t.Run(transport, func(t *testing.T) {
			env, err := c.Create(ctx, api.CreateRequest{App: "mover"})
			if err != nil {
				t.Fatal(err)
			}
			defer env.Close(context.WithoutCancel(ctx))
			env.Transport, env.ResetMode = transport, api.ResetRelaunch
			var traces []string
			var x0s []float64
			for episode := 1; episode <= 3; episode++ {
				obs, info, err := env.Reset(ctx)
				if err != nil {
					t.Fatalf("reset %d: %v", episode, err)
				}
				d, err := env.Info(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if info.Episode != episode || !obs.Running || d.Relaunched != (episode > 1) || d.ResetMode != api.ResetRelaunch && episode > 1 {
					t.Fatalf("reset %d: %+v, %+v", episode, info, d)
				}
				x0, n := greenX(obs.Screen)
				if n == 0 {
					t.Fatalf("episode %d: no green square", episode)
				}
				traces, x0s = append(traces, info.Trace), append(x0s, x0)
				for _, a := range []action.Action{{Kind: action.KeyDown, Key: "Right"}, {Kind: action.Wait, MS: 400}} {
					if _, _, _, _, _, err := env.Step(ctx, a); err != nil {
						t.Fatal(err)
					}
				}
			}
			for i := 1; i < len(x0s); i++ {
				if x0s[i] != x0s[0] {
					t.Errorf("episode %d starts with the square at %.1f, the first at %.1f: the relaunched app did not start afresh", i+1, x0s[i], x0s[0])
				}
			}
			if _, err := env.Close(ctx); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, dir := range traces {
				tr, err := trace.Open(dir)
				if err != nil || tr.Incomplete {
					t.Fatalf("%s: %v, %+v", dir, err, tr)
				}
				ids = append(ids, tr.Run.Env.ID)
			}
			if ids[0] == "" || ids[1] != ids[0] || ids[2] != ids[0] {
				t.Errorf("the episodes' sandboxes: %q; want one", ids)
			}
		})
	}
}
