package client_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/serve/api"
)

// TestForkOverARealServer: Env.Fork returns environments in the
// parent's state (the first observation of each is the parent's screen),
// independent from then on; a bad count is the server's error.
func TestForkOverARealServer(t *testing.T) {
	c, dir := server(t)
	ctx := t.Context()
	// The mover with --step: each key press moves it 7 px whatever the
	// time (by default it moves by time × speed, and a wall-clock fork of
	// it may diverge: TestForkFifty).
	step := t.TempDir()
	bin, err := os.ReadFile(filepath.Join(dir, "mover"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(step, "mover"), bin, 0o755)
	os.WriteFile(filepath.Join(step, "agentbox.json"), []byte(`{"command": "mover", "args": ["--step", "7"], "window_title": "mover", "ready_output": "mover: ready", "ready_timeout": "30s"}`), 0o644)
	up, err := c.Upload(ctx, step)
	if err != nil {
		t.Fatal(err)
	}
	env, err := c.Create(ctx, api.CreateRequest{Upload: up.ID})
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
	parent, err := env.Observe(ctx) // its screen now: the one the forks were checked against
	if err != nil {
		t.Fatal(err)
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
