package client_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/client"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/serve"
	"github.com/codegirl-games/agentbox/serve/api"
)

// The gymnasium loop over agentbox serve: Create starts an environment and
// its first episode, Reset returns its first observation, Step acts and
// observes, and Close ends it (the server also closes an environment
// nobody used for its lease).
//
// The server here runs in this process on guestenvtest's scripted guest
// (a blank screen) so the example runs anywhere; against a real server,
// client.FromEnv() reads AGENTBOX_URL and AGENTBOX_TOKEN, and the same
// loop drives a real app (`agentbox serve --app mover=examples/mover`).
func Example() {
	ctx := context.Background()
	url, stop := exampleServer()
	defer stop()

	c, err := client.New(url, "example-token-0123456789abcdef")
	if err != nil {
		log.Fatal(err)
	}
	env, err := c.Create(ctx, api.CreateRequest{App: "game", Task: "press Return"})
	if err != nil {
		log.Fatal(err)
	}
	defer env.Close(context.WithoutCancel(ctx))

	obs, _, err := env.Reset(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("screen %dx%d, app running: %v\n", obs.Screen.Width, obs.Screen.Height, obs.Running)

	for _, a := range []action.Action{
		{Kind: action.Key, Keys: "Return"},
		{Kind: action.Done}, // the controller finished: success unless Success says otherwise
	} {
		_, reward, terminated, truncated, info, err := env.Step(ctx, a)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(info.Step, a.Kind, info.Result.OK, reward, terminated, truncated)
	}
	// Output:
	// screen 320x240, app running: true
	// 1 key true 0 false false
	// 2 done true 0 true false
}

// exampleServer starts agentbox serve in this process with one app,
// "game", on loopback, and returns its URL and a stop function.
func exampleServer() (string, func()) {
	dir, err := os.MkdirTemp("", "client-example-")
	if err != nil {
		log.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "game"), []byte("#!/bin/sh\nexec sleep 60\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command": "game"}`), 0o644)
	bundle, err := app.Load(dir, app.DefaultLimits)
	if err != nil {
		log.Fatal(err)
	}
	srv, err := serve.New(serve.Options{
		Backends: []environment.Backend{&guestenvtest.Backend{New: func() *guestenvtest.Guest { return &guestenvtest.Guest{} }}},
		Apps:     map[string]*app.Bundle{"game": bundle},
		Tokens:   []string{"example-token-0123456789abcdef"},
		Env:      environment.Config{Screen: observe.Screen{Width: 320, Height: 240, Depth: 24}},
		Out:      filepath.Join(dir, "runs"),
	})
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(ln, "", "")
	return "http://" + ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		srv.Shutdown(ctx)
		os.RemoveAll(dir)
	}
}
