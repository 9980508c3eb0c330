package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/serve/api"
)

// TestForkOverARealServer: Env.Fork returns environments in the
// parent's state (the first observation of each is the parent's screen),
// independent from then on; a bad count is the server's error.
func TestForkOverARealServer(t *testing.T) {
	c, _ := server(t)
	ctx := t.Context()
	env, err := c.Create(ctx, api.CreateRequest{App: "mover"})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close(context.WithoutCancel(ctx))
	if _, _, err := env.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, _, _, _, _, err := env.Step(ctx, action.Action{Kind: action.Key, Keys: "Right"}); err != nil {
			t.Fatal(err)
		}
	}
	parent, err := env.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ae *api.Error
	if _, err := env.Fork(ctx, 0); !errors.As(err, &ae) || ae.Code != api.CodeInvalidRequest {
		t.Fatalf("fork into 0: %v", err)
	}
	forks, err := env.Fork(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range forks {
		defer f.Close(context.WithoutCancel(ctx))
	}
	if len(forks) != 2 {
		t.Fatalf("%d forks", len(forks))
	}
	px, _ := greenX(parent.Screen)
	var after []float64
	for i, f := range forks {
		obs, info, err := f.Reset(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if x, n := greenX(obs.Screen); n == 0 || x != px || info.Episode != 1 {
			t.Fatalf("fork %d: first screen's square at %.1f (%d px), the parent's at %.1f; %+v", i, x, n, px, info)
		}
		key := []string{"Left", "Down"}[i]
		for range 3 {
			if _, _, _, _, _, err := f.Step(ctx, action.Action{Kind: action.Key, Keys: key}); err != nil {
				t.Fatal(err)
			}
		}
		obs, err = f.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		x, _ := greenX(obs.Screen)
		after = append(after, x)
	}
	if after[0] >= px || after[1] != px {
		t.Fatalf("after Left in one fork and Down in the other: %v (the parent at %.1f)", after, px)
	}
}
