package guestenv_test

import (
	"errors"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/observe"
)

// TestWatchScreen: a guest with DAMAGE sends screen events to every
// subscriber, whose channels close with the environment; one without
// says so (environment.ErrNoScreenEvents), for the watcher to poll.
func TestWatchScreen(t *testing.T) {
	for _, damage := range []bool{true, false} {
		t.Run(map[bool]string{true: "damage", false: "no damage"}[damage], func(t *testing.T) {
			ctx := t.Context()
			b := &guestenvtest.Backend{New: func() *guestenvtest.Guest { return &guestenvtest.Guest{Damage: damage} }}
			env, err := b.Create(ctx, environment.Config{Screen: observe.DefaultScreen})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { env.Close(t.Context()) })
			w, ok := env.(environment.ScreenWatcher)
			if !ok {
				t.Fatal("guestenv.Env is no environment.ScreenWatcher")
			}
			changed, stop, err := w.WatchScreen(ctx)
			if !damage {
				if !errors.Is(err, environment.ErrNoScreenEvents) {
					t.Fatalf("WatchScreen without DAMAGE: %v, want ErrNoScreenEvents", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			other, stopOther, err := w.WatchScreen(ctx)
			if err != nil {
				t.Fatal(err)
			}
			stopOther()
			if _, err := env.Act(ctx, action.Action{Kind: action.Wait, MS: 1}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-changed:
			case <-time.After(30 * time.Second):
				t.Fatal("no screen event after an action")
			}
			select {
			case <-other:
				t.Error("an unsubscribed channel received")
			default:
			}
			if err := env.Close(ctx); err != nil {
				t.Fatal(err)
			}
			deadline := time.After(30 * time.Second)
			for open := true; open; {
				select {
				case _, open = <-changed:
				case <-deadline:
					t.Fatal("the channel stayed open after Close")
				}
			}
		})
	}
}
