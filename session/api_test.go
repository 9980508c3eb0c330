package session

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/trace"
)

// openFake opens a session on the fake backend, for a controller that
// drives it step by step.
func openFake(t *testing.T, b environment.Backend, mod func(*Config)) (*Session, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "trace")
	cfg := Config{
		RunID: "api", Backend: b, TraceDir: dir, Task: "move",
		AgentInfo: trace.AgentInfo{Name: "remote"}, Actor: trace.ActorRemote,
		App: &app.Bundle{Target: "mover", Manifest: app.Manifest{Command: "mover"}},
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

// TestSessionSteps drives a session as a remote controller does: observe,
// act, act without observing (the session looks first), an invalid
// action (recorded, not run), done (the episode ends after a last look),
// then nothing more is accepted. The trace is the one a run writes, with
// each step's actor.
func TestSessionSteps(t *testing.T) {
	b := &fakeBackend{}
	var mu sync.Mutex
	var kinds []string
	s, dir := openFake(t, b, func(c *Config) {
		c.Listener = func(e Event) {
			mu.Lock()
			kinds = append(kinds, e.Kind)
			mu.Unlock()
		}
	})
	ctx := t.Context()
	obs, err := s.Observe(ctx)
	if err != nil || obs.Step != 1 || obs.Screen == nil || !obs.Running || obs.Ended != nil {
		t.Fatalf("first observation: %+v, %v", obs, err)
	}
	if len(obs.Output) != 2 || obs.Output[0].Text != "mover: ready" {
		t.Errorf("first observation's output = %+v", obs.Output)
	}
	res, err := s.Act(ctx, Step{Action: action.Action{Kind: action.KeyDown, Key: "Right"}})
	if err != nil || res.Step != 1 || !res.Result.OK || res.Ended != nil {
		t.Fatalf("key_down: %+v, %v", res, err)
	}
	// No observation in between: the session takes the step's own.
	res, err = s.Act(ctx, Step{Actor: trace.ActorHuman, Action: action.Action{Kind: action.KeyUp, Key: "Right"}})
	if err != nil || res.Step != 2 || !res.Result.OK {
		t.Fatalf("key_up: %+v, %v", res, err)
	}
	res, err = s.Act(ctx, Step{Action: action.Action{Kind: action.Click, X: action.Int(9999), Y: action.Int(1)}})
	if err != nil || !res.Invalid || res.Result.OK || !strings.Contains(res.Result.Error, "x") {
		t.Fatalf("an off-screen click: %+v, %v", res, err)
	}
	obs, err = s.Observe(ctx)
	if err != nil || obs.Last == nil || obs.Last.OK {
		t.Fatalf("the observation after an invalid action shows its result: %+v, %v", obs, err)
	}
	res, err = s.Act(ctx, Step{Action: action.Action{Kind: action.Done, Message: "moved"}})
	if err != nil || res.Ended == nil || res.Ended.Outcome != trace.Success || !res.Ended.Terminated() || res.Final == nil || res.Final.Screen == nil {
		t.Fatalf("done: %+v, %v", res, err)
	}
	if _, err := s.Act(ctx, Step{Action: action.Action{Kind: action.Wait, MS: 1}}); !errors.Is(err, ErrEnded) {
		t.Errorf("an action after done: %v, want ErrEnded", err)
	}
	if _, err := s.Observe(ctx); !errors.Is(err, ErrEnded) {
		t.Errorf("an observation after done: %v, want ErrEnded", err)
	}
	r := s.Close(ctx, End{Outcome: trace.Interrupted, Reason: "closed", Message: "ignored: the episode had ended"})
	if r.Outcome != trace.Success || r.Message != "moved" || r.Steps != 4 {
		t.Errorf("result = %+v", r)
	}
	if again := s.Close(ctx, End{}); !reflect.DeepEqual(again, r) {
		t.Errorf("a second Close returned %+v, want the first's %+v", again, r)
	}
	tr, err := trace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Incomplete || tr.Run.Outcome != trace.Success || tr.Final == nil || len(tr.Steps) != 4 {
		t.Fatalf("trace: incomplete %v, outcome %s, final %v, %d steps", tr.Incomplete, tr.Run.Outcome, tr.Final != nil, len(tr.Steps))
	}
	var actors []string
	for _, st := range tr.Steps {
		actors = append(actors, st.Actor)
		if st.Result == nil || st.Observation == nil || st.Decision == nil {
			t.Errorf("step %d lacks its result, observation or decision", st.Step)
		}
	}
	if got := strings.Join(actors, " "); got != "remote human remote remote" {
		t.Errorf("actors = %q", got)
	}
	if tr.Steps[2].Invalid == "" {
		t.Error("the invalid action is not marked")
	}
	if b.closed != 1 {
		t.Errorf("%d environments closed", b.closed)
	}
	mu.Lock()
	defer mu.Unlock()
	want := "output window step result step result step result step result end"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("events = %q\nwant     %q", got, want)
	}
}

// TestRunRecordsActors: the agent loop records the actor its caller set
// with every step (default agent), in steps.jsonl and actions.jsonl; the
// agent's name does not choose it (an agent named "script" is an agent).
func TestRunRecordsActors(t *testing.T) {
	for _, tt := range []struct{ agentName, actor, want string }{
		{"demo", "", trace.ActorAgent},
		{"script", "", trace.ActorAgent},
		{"script", trace.ActorScript, trace.ActorScript},
	} {
		_, tr := runFake(t, &fakeBackend{}, newDemo(t, "Right"), func(c *Config) { c.AgentInfo.Name, c.Actor = tt.agentName, tt.actor })
		for _, st := range tr.Steps {
			if st.Actor != tt.want {
				t.Errorf("%s (actor %q): step %d actor %q, want %q", tt.agentName, tt.actor, st.Step, st.Actor, tt.want)
			}
		}
	}
}

// TestSessionEnds: the steps used up, the app gone at a second look, and
// the deadline end an episode a controller drives, as they end a run.
func TestSessionEnds(t *testing.T) {
	ctx := t.Context()
	t.Run("max steps", func(t *testing.T) {
		s, _ := openFake(t, &fakeBackend{}, func(c *Config) { c.MaxSteps = 1 })
		if _, err := s.Act(ctx, Step{Action: action.Action{Kind: action.Wait, MS: 1}}); err != nil {
			t.Fatal(err)
		}
		obs, err := s.Observe(ctx)
		if err != nil || obs.Ended == nil || obs.Ended.Reason != trace.ReasonMaxSteps || obs.Ended.Terminated() || obs.Screen == nil {
			t.Fatalf("observation past the steps: %+v, %v", obs, err)
		}
		if r := s.Close(ctx, End{}); r.Reason != trace.ReasonMaxSteps {
			t.Errorf("result %+v", r)
		}
	})
	t.Run("app exits", func(t *testing.T) {
		s, _ := openFake(t, &fakeBackend{exitAfter: 1}, nil)
		if _, err := s.Act(ctx, Step{Action: action.Action{Kind: action.Wait, MS: 1}}); err != nil {
			t.Fatal(err)
		}
		obs, err := s.Observe(ctx)
		if err != nil || obs.Running || obs.Ended != nil {
			t.Fatalf("the first look at the app gone: %+v, %v", obs, err)
		}
		_, err = s.Act(ctx, Step{Action: action.Action{Kind: action.Wait, MS: 1}})
		var ee *EndedError
		if !errors.As(err, &ee) || ee.End.Reason != trace.ReasonAppExited || !ee.End.Terminated() {
			t.Fatalf("acting on after the app was seen gone: %v", err)
		}
		if r := s.Close(ctx, End{}); r.Reason != trace.ReasonAppExited || r.AppExit == nil {
			t.Errorf("result %+v", r)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		s, _ := openFake(t, &fakeBackend{}, func(c *Config) { c.Timeout = 100 * time.Millisecond })
		_, err := s.Act(ctx, Step{Action: action.Action{Kind: action.Wait, MS: 5000}})
		var ee *EndedError
		if !errors.As(err, &ee) || ee.End.Reason != trace.ReasonTimeout {
			t.Fatalf("a wait past the deadline: %v", err)
		}
		if r := s.Close(ctx, End{}); r.Reason != trace.ReasonTimeout {
			t.Errorf("result %+v", r)
		}
	})
}

// abortBackend's environments end a running action when they are closed,
// as a real backend's teardown does.
type abortBackend struct{ fakeBackend }

type abortEnv struct {
	*fakeEnv
	closed chan struct{}
	once   sync.Once
}

func (b *abortBackend) Create(ctx context.Context, cfg environment.Config) (environment.Environment, error) {
	e, err := b.fakeBackend.Create(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &abortEnv{fakeEnv: e.(*fakeEnv), closed: make(chan struct{})}, nil
}

func (e *abortEnv) Act(ctx context.Context, a action.Action) (action.Result, error) {
	if a.Kind != action.Wait {
		return e.fakeEnv.Act(ctx, a)
	}
	select {
	case <-e.closed:
		return action.Result{}, environment.ErrClosed
	case <-ctx.Done():
		return action.Result{}, ctx.Err()
	}
}

func (e *abortEnv) Close(ctx context.Context) error {
	e.once.Do(func() { close(e.closed) })
	return e.fakeEnv.Close(ctx)
}

// TestCloseAbortsAStep: Close during a long action ends the action, and
// the episode ends as Close says, not as an environment failure; the
// controller's Act returns that End; the trace is complete and the last
// observation nobody acted on is recorded.
func TestCloseAbortsAStep(t *testing.T) {
	b := &abortBackend{}
	s, dir := openFake(t, b, nil)
	ctx := t.Context()
	errc := make(chan error, 1)
	go func() {
		_, err := s.Act(ctx, Step{Action: action.Action{Kind: action.Wait, MS: 60_000}})
		errc <- err
	}()
	// Wait until the step is recorded (its action is running).
	waitFor(t, func() bool {
		tr, err := trace.Open(dir)
		return err == nil && len(tr.Steps) == 1
	})
	closed := End{Outcome: trace.Interrupted, Reason: "closed", Message: "the client closed the environment"}
	r := s.Close(ctx, closed)
	if r.Outcome != closed.Outcome || r.Reason != closed.Reason {
		t.Errorf("result %+v, want %+v", r, closed)
	}
	var ee *EndedError
	if err := <-errc; !errors.As(err, &ee) || ee.End != closed {
		t.Errorf("the aborted step returned %v, want the close's End", err)
	}
	tr, err := trace.Open(dir)
	if err != nil || tr.Incomplete || tr.Run.Reason != "closed" {
		t.Fatalf("trace: %v, %+v", err, tr.Run)
	}

	// A pending observation is recorded as the last one on Close.
	s, dir = openFake(t, &fakeBackend{}, nil)
	if _, err := s.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close(ctx, closed)
	if tr, _ := trace.Open(dir); tr.Final == nil || tr.Final.Observation == nil {
		t.Error("the observation nobody acted on is not recorded as the last one")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPrepared: an environment created ahead with a Relay (as a warm pool
// creates them) is taken over by Open, which only launches the app; the
// app's events reach the session's trace; Close removes it. A prepared
// environment without its Relay is refused and still removed.
func TestPrepared(t *testing.T) {
	ctx := t.Context()
	b := &fakeBackend{}
	relay := NewRelay()
	env, err := b.Create(ctx, environment.Config{Events: relay})
	if err != nil {
		t.Fatal(err)
	}
	s, dir := openFake(t, nil, func(c *Config) {
		c.Backend = nil
		c.Prepared = &Prepared{Env: env, Events: relay, Created: 900 * time.Millisecond}
	})
	if _, err := s.Act(ctx, Step{Action: action.Action{Kind: action.Done}}); err != nil {
		t.Fatal(err)
	}
	r := s.Close(ctx, End{})
	tr, err := trace.Open(dir)
	if err != nil || r.Outcome != trace.Success {
		t.Fatalf("%+v, %v", r, err)
	}
	if len(b.envs) != 1 || b.closed != 1 {
		t.Errorf("%d created, %d closed; want the prepared one, closed", len(b.envs), b.closed)
	}
	if tr.Run.Env.Backend != "fake" || tr.Run.Timings["create_ahead"] != 900 {
		t.Errorf("run.json environment %+v, timings %v", tr.Run.Env, tr.Run.Timings)
	}
	if out := tr.Steps[0].Observation.Output; len(out) == 0 || out[0].Text != "mover: ready" {
		t.Errorf("the app's output did not reach the session through the relay: %+v", out)
	}

	env2, _ := b.Create(ctx, environment.Config{})
	_, err = Open(ctx, Config{RunID: "p", TraceDir: filepath.Join(t.TempDir(), "t"), Prepared: &Prepared{Env: env2},
		App: &app.Bundle{Target: "mover", Manifest: app.Manifest{Command: "mover"}}})
	var se *StartError
	if !errors.As(err, &se) || se.Result.Outcome != trace.Error || !strings.Contains(se.Result.Message, "Relay") {
		t.Errorf("a prepared environment without its relay: %v", err)
	}
	if b.closed != 2 {
		t.Errorf("the refused prepared environment was not closed (%d closed)", b.closed)
	}
}

// TestOpenFailure: a start that fails is recorded and finalised; Open's
// error carries the Result; Run's agent is closed.
func TestOpenFailure(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "trace")
	ag := &closingAgent{}
	_, err := open(t.Context(), Config{RunID: "f", Backend: &fakeBackend{launchErr: environment.ErrNoWindow}, TraceDir: dir,
		App: &app.Bundle{Target: "mover", Manifest: app.Manifest{Command: "mover"}}}, Loop{Agent: ag})
	var se *StartError
	if !errors.As(err, &se) || se.Result.Reason != trace.ReasonNoWindow || se.Result.ExitCode() != 3 {
		t.Fatalf("Open: %v", err)
	}
	if tr, err := trace.Open(dir); err != nil || tr.Incomplete || tr.Run.Reason != trace.ReasonNoWindow {
		t.Errorf("trace: %v %+v", err, tr)
	}
	if ag.closes.Load() != 1 {
		t.Errorf("the agent was closed %d times", ag.closes.Load())
	}
}

// TestConcurrentControllers: steps from several goroutines take turns;
// every one is recorded once with its own result.
func TestConcurrentControllers(t *testing.T) {
	s, dir := openFake(t, &fakeBackend{}, func(c *Config) { c.MaxSteps = 1000 })
	ctx := t.Context()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				x := 10 + g
				if _, err := s.Act(ctx, Step{Action: action.Action{Kind: action.MouseMove, X: &x, Y: &x}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	s.Close(ctx, End{Outcome: trace.Interrupted, Reason: "closed"})
	tr, _ := trace.Open(dir)
	if len(tr.Steps) != 100 {
		t.Fatalf("%d steps recorded, want 100", len(tr.Steps))
	}
	for i, st := range tr.Steps {
		if st.Step != i+1 || st.Result == nil {
			t.Errorf("step %d: number %d, result %v", i+1, st.Step, st.Result)
		}
	}
}

// TestPeek: a watcher's screenshot records nothing and leaves the app's
// output for the controller's next observation.
func TestPeek(t *testing.T) {
	s, dir := openFake(t, &fakeBackend{}, nil)
	ctx := t.Context()
	f, st, err := s.Peek(ctx)
	if err != nil || f == nil || !st.Running {
		t.Fatalf("peek: %v", err)
	}
	obs, err := s.Observe(ctx)
	if err != nil || obs.Step != 1 || len(obs.Output) != 2 {
		t.Fatalf("the observation after a peek: step %d, output %+v, %v", obs.Step, obs.Output, err)
	}
	s.Close(ctx, End{Outcome: trace.Interrupted, Reason: trace.ReasonClosed})
	tr, _ := trace.Open(dir)
	if len(tr.Steps) != 0 || tr.Final == nil || tr.Final.Step != 1 {
		t.Errorf("after a peek and an observation: %d steps, final %+v", len(tr.Steps), tr.Final)
	}
	if _, _, err := s.Peek(ctx); !errors.Is(err, ErrEnded) {
		t.Errorf("a peek after the end: %v", err)
	}
}

var _ agent.Agent = (*scripted)(nil)
