package session_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/codegirl-games/agentbox/agent/script"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

// Run is one whole episode: it creates the sandbox, launches the app, runs
// the agent's observe → decide → act loop, writes the trace and always
// tears the sandbox down. The returned error is only for a trace that
// could not be written: everything else is an outcome.
//
// This example runs on guestenvtest's scripted guest (the real host side
// of the protocol, a blank screen) so it runs anywhere; with
// environment.Lookup("docker") in its place the same code drives a real
// app in a real sandbox.
func ExampleRun() {
	dir, err := os.MkdirTemp("", "session-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "game"), []byte("#!/bin/sh\nexec sleep 60\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command": "game"}`), 0o644)
	bundle, err := app.Load(dir, app.DefaultLimits)
	if err != nil {
		log.Fatal(err)
	}
	defer bundle.Close()

	screen := observe.Screen{Width: 320, Height: 240, Depth: 24}
	play, err := script.Parse("play.yaml", []byte(`
task: Press Return, then give the app a moment.
steps:
  - action: key
    keys: Return
  - action: wait
    ms: 50
`), screen)
	if err != nil {
		log.Fatal(err)
	}

	res, err := session.Run(context.Background(), session.Config{
		Backend:   &guestenvtest.Backend{New: func() *guestenvtest.Guest { return &guestenvtest.Guest{} }},
		Env:       environment.Config{Screen: screen},
		App:       bundle,
		AgentInfo: trace.AgentInfo{Name: "script"},
		Actor:     trace.ActorScript, // who the steps are recorded as: the caller says
		Task:      play.Task,
		Timeout:   time.Minute,
		TraceDir:  filepath.Join(dir, "trace"),
	}, session.Loop{Agent: script.New(play)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Outcome, res.Reason, res.Steps, res.ExitCode())

	t, err := trace.Open(res.TraceDir)
	if err != nil {
		log.Fatal(err)
	}
	// A script's last step is its done: the controller says it finished.
	for _, s := range t.Steps {
		fmt.Println(s.Step, s.Actor, s.Action.Kind)
	}
	// Output:
	// success done 3 0
	// 1 script key
	// 2 script wait
	// 3 script done
}
