package environment_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/observe"
)

// An environment's life: a backend creates the sandbox with its display,
// Launch starts the app, Observe and Act are the agent's eyes and hands,
// and Close — always, under a context that cannot be cancelled — removes
// everything. Callers choose behaviour by what a backend declares it can
// do (CapabilitiesOf), never by its name.
//
// This example uses guestenvtest's scripted guest (the real host side of
// the protocol, a blank screen) so it runs anywhere; a real program takes
// its backend from environment.Lookup("docker") (or "local",
// "kubernetes") after importing the backend's package.
func Example() {
	ctx := context.Background()
	var backend environment.Backend = &guestenvtest.Backend{New: func() *guestenvtest.Guest { return &guestenvtest.Guest{} }}
	fmt.Println("can freeze:", environment.CapabilitiesOf(backend).Freeze)

	env, err := backend.Create(ctx, environment.Config{Screen: observe.Screen{Width: 320, Height: 240, Depth: 24}})
	if err != nil {
		log.Fatal(err) // nothing is left behind when Create fails
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		env.Close(cctx)
	}()

	// A program of the sandbox's image; an app directory or executable
	// is staged into the sandbox instead.
	bundle, err := app.Load("xcalc", app.DefaultLimits)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := env.Launch(ctx, environment.LaunchSpec{App: bundle, ReadyTimeout: 30 * time.Second}); err != nil {
		log.Fatal(err)
	}
	frame, state, err := env.Observe(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%dx%d, app running: %v\n", frame.Width, frame.Height, state.Running)

	// An action as a model or a script sends it: parsed strictly, then
	// validated against the screen, before it reaches a sandbox.
	a, err := action.Parse([]byte(`{"action": "click", "x": 160, "y": 120}`))
	if err != nil {
		log.Fatal(err)
	}
	if err := action.Validate(a, action.DefaultLimits(frame.Width, frame.Height)); err != nil {
		log.Fatal(err)
	}
	res, err := env.Act(ctx, a)
	if err != nil {
		log.Fatal(err) // the environment failed; a refused action is in res
	}
	fmt.Println("clicked:", res.OK)
	// Output:
	// can freeze: false
	// 320x240, app running: true
	// clicked: true
}
