package session

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// patient waits 20 ms a step until its observation says a person acted
// (or it is released to decide something else), then finishes. Each
// decision is announced on deciding; when hold is set the decision waits
// for release.
type patient struct {
	deciding chan int
	hold     func(n int) bool
	release  chan action.Action

	mu   sync.Mutex
	seen []*observe.Observation
	n    int
}

func newPatient() *patient {
	return &patient{deciding: make(chan int, 1000), release: make(chan action.Action), hold: func(int) bool { return false }}
}

func (p *patient) Decide(ctx context.Context, obs *observe.Observation) (agent.Decision, error) {
	p.mu.Lock()
	p.n++
	n := p.n
	p.seen = append(p.seen, obs)
	p.mu.Unlock()
	p.deciding <- n
	if obs.Intervention != nil {
		return agent.Decision{Action: action.Action{Kind: action.Done, Message: "a person helped"}}, nil
	}
	if p.hold(n) {
		select {
		case a := <-p.release:
			return agent.Decision{Action: a}, nil
		case <-ctx.Done():
			return agent.Decision{}, ctx.Err()
		}
	}
	return agent.Decision{Action: action.Action{Kind: action.Wait, MS: 20}}, nil
}

func (p *patient) observations() []*observe.Observation {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*observe.Observation(nil), p.seen...)
}

// runWith runs an agent in the background and hands the test the session.
func runWith(t *testing.T, b environment.Backend, ag agent.Agent, mod func(*Config), loopMods ...func(*Loop)) (*Session, <-chan Result, string) {
	t.Helper()
	dir := t.TempDir() + "/trace"
	opened := make(chan *Session, 1)
	cfg := Config{RunID: "control", Backend: b, TraceDir: dir, Task: "move", Timeout: time.Minute,
		App: appBundle()}
	if mod != nil {
		mod(&cfg)
	}
	loop := Loop{Agent: ag, Opened: func(s *Session) { opened <- s }}
	for _, m := range loopMods {
		m(&loop)
	}
	done := make(chan Result, 1)
	go func() {
		res, err := Run(t.Context(), cfg, loop)
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		done <- res
	}()
	select {
	case s := <-opened:
		return s, done, dir
	case res := <-done:
		t.Fatalf("the run ended before it opened: %+v", res)
	}
	return nil, nil, ""
}

func waitResult(t *testing.T, done <-chan Result) Result {
	t.Helper()
	select {
	case res := <-done:
		return res
	case <-time.After(time.Minute):
		t.Fatal("the run did not end")
	}
	return Result{}
}

func events(tr *trace.Trace, name string) []trace.Record {
	var out []trace.Record
	for _, r := range tr.Records {
		if r.Type == trace.TypeEvent && r.Event == name {
			out = append(out, r)
		}
	}
	return out
}

func openTraceT(t *testing.T, dir string) *trace.Trace {
	t.Helper()
	tr, err := trace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestTakeOverPausesTheAgent: a person takes control between the agent's
// steps, moves the square, and hands back. No agent step is recorded
// while the person drives; the agent's next observation says what the
// person did and where the screen changed; the trace has each step's
// actor and the takeover and hand-back as events, in order.
func TestTakeOverPausesTheAgent(t *testing.T) {
	b := &fakeBackend{}
	ag := newPatient()
	s, done, dir := runWith(t, b, ag, nil)
	ctx := t.Context()
	<-ag.deciding
	<-ag.deciding // the agent is stepping
	if err := s.TakeOver("tester"); err != nil {
		t.Fatal(err)
	}
	if err := s.TakeOver("another"); !errors.Is(err, ErrControlled) {
		t.Errorf("a second takeover: %v, want ErrControlled", err)
	}
	if c := s.Control(); !c.Human || c.By != "tester" || c.NoAgent {
		t.Errorf("Control() = %+v", c)
	}
	for _, a := range []action.Action{{Kind: action.KeyDown, Key: "Right"}, {Kind: action.KeyUp, Key: "Right"}} {
		time.Sleep(30 * time.Millisecond) // the square moves while Right is held
		res, err := s.Act(ctx, Step{Actor: trace.ActorHuman, Action: a})
		if err != nil || !res.Result.OK || res.NotApplied {
			t.Fatalf("the person's %s: %+v, %v", a, res, err)
		}
	}
	if err := s.HandBack("handed back"); err != nil {
		t.Fatal(err)
	}
	if err := s.HandBack("again"); !errors.Is(err, ErrNotControlled) {
		t.Errorf("a second hand-back: %v, want ErrNotControlled", err)
	}
	res := waitResult(t, done)
	if res.Outcome != trace.Success || res.Message != "a person helped" {
		t.Fatalf("outcome %s %q: the agent did not see the intervention", res.Outcome, res.Message)
	}
	obs := ag.observations()
	iv := obs[len(obs)-1].Intervention
	if iv == nil || len(iv.Actions) != 2 || iv.Actions[0].Kind != action.KeyDown || iv.By != "tester" || iv.FirstStep == 0 || iv.LastStep != iv.FirstStep+1 {
		t.Fatalf("the agent was told %+v", iv)
	}
	if !iv.ScreenChanged || iv.Changed == nil || iv.Changed[1] != 220 || iv.Changed[3] != 260 {
		t.Errorf("the change is %+v, want the square's rows 220–260", iv.Changed)
	}
	for _, o := range obs[:len(obs)-1] {
		if o.Intervention != nil {
			t.Errorf("step %d was told of an intervention too", o.Step)
		}
	}

	tr := openTraceT(t, dir)
	take, back := events(tr, trace.EventTakeover), events(tr, trace.EventHandBack)
	if len(take) != 1 || len(back) != 1 || take[0].Data["by"] != "tester" || back[0].Data["reason"] != "handed back" || back[0].Data["steps"] != 2.0 {
		t.Fatalf("takeover events %+v, hand-back events %+v", take, back)
	}
	var human []trace.Step
	for _, st := range tr.Steps {
		switch st.Actor {
		case trace.ActorHuman:
			human = append(human, st)
		case trace.ActorAgent:
			if len(human) > 0 && st.TMS < back[0].TMS {
				t.Errorf("agent step %d at %.1f ms, while the person had control (their first step at %.1f, hand-back at %.1f)", st.Step, st.TMS, human[0].TMS, back[0].TMS)
			}
		default:
			t.Errorf("step %d has actor %q", st.Step, st.Actor)
		}
	}
	if len(human) != 2 || human[0].TMS < take[0].TMS || human[1].TMS > back[0].TMS || human[0].Step != iv.FirstStep {
		t.Errorf("human steps %+v between %.1f and %.1f", human, take[0].TMS, back[0].TMS)
	}
	last := tr.Steps[len(tr.Steps)-1]
	if last.Observation == nil || last.Observation.Intervention == nil || len(last.Observation.Intervention.Actions) != 2 {
		t.Errorf("the trace does not record what the agent was told: %+v", last.Observation)
	}
}

// TestDecisionDuringTakeoverIsNotApplied: the agent is deciding when a
// person takes control; its decision comes back while the person drives,
// or only after they handed back, and is not performed either way (it
// was made on a screen the person changed): it is recorded as
// action_not_applied, after the hand-back, and the agent's next
// observation says so and what the person did.
func TestDecisionDuringTakeoverIsNotApplied(t *testing.T) {
	for _, afterHandBack := range []bool{false, true} {
		name := "returns while the person drives"
		if afterHandBack {
			name = "returns after the hand-back"
		}
		t.Run(name, func(t *testing.T) {
			b := &fakeBackend{}
			ag := newPatient()
			ag.hold = func(n int) bool { return n == 2 }
			s, done, dir := runWith(t, b, ag, nil)
			<-ag.deciding
			<-ag.deciding // the second decision is held
			if err := s.TakeOver("tester"); err != nil {
				t.Fatal(err)
			}
			decided := action.Action{Kind: action.KeyDown, Key: "Right"} // on a screen the person now drives
			if !afterHandBack {
				ag.release <- decided
			}
			if _, err := s.Act(t.Context(), Step{Actor: trace.ActorHuman, Action: action.Action{Kind: action.Key, Keys: "ctrl+s"}}); err != nil {
				t.Fatal(err)
			}
			if err := s.HandBack("handed back"); err != nil {
				t.Fatal(err)
			}
			if afterHandBack {
				ag.release <- decided
			}
			res := waitResult(t, done)
			if res.Outcome != trace.Success {
				t.Fatalf("outcome %s: %s", res.Outcome, res.Message)
			}
			obs := ag.observations()
			o := obs[len(obs)-1]
			if o.Last == nil || o.Last.OK || o.Last.Error != NotAppliedError {
				t.Errorf("the agent's next observation says its last action %+v", o.Last)
			}
			if o.Intervention == nil || len(o.Intervention.Actions) != 1 || o.Intervention.Actions[0].Keys != "ctrl+s" {
				t.Errorf("intervention %+v", o.Intervention)
			}
			for _, env := range b.envs {
				for _, a := range env.actions {
					if a.Kind == action.KeyDown {
						t.Errorf("the agent's key_down was performed")
					}
				}
			}
			tr := openTraceT(t, dir)
			na, back := events(tr, trace.EventNotApplied), events(tr, trace.EventHandBack)
			if len(na) != 1 || na[0].Data["actor"] != trace.ActorAgent || len(back) != 1 || na[0].TMS < back[0].TMS {
				t.Fatalf("not-applied events %+v (hand-back %+v)", na, back)
			}
			if a, _ := na[0].Data["action"].(map[string]any); a["action"] != "key_down" || a["key"] != "Right" {
				t.Errorf("the not-applied action is recorded as %v", na[0].Data["action"])
			}
			for _, st := range tr.Steps {
				if st.Action != nil && st.Action.Kind == action.KeyDown {
					t.Errorf("step %d records the key_down that was not performed", st.Step)
				}
			}
		})
	}
}

// freezeBackend makes environments that can be frozen, counting it.
type freezeBackend struct {
	fakeBackend
	mu      sync.Mutex
	freezes int
	thaws   int
}

type freezableEnv struct {
	*fakeEnv
	b *freezeBackend
}

func (b *freezeBackend) Create(ctx context.Context, cfg environment.Config) (environment.Environment, error) {
	e, err := b.fakeBackend.Create(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return freezableEnv{e.(*fakeEnv), b}, nil
}

func (e freezableEnv) Freeze(context.Context) error {
	e.b.mu.Lock()
	defer e.b.mu.Unlock()
	e.b.freezes++
	return nil
}

func (e freezableEnv) Thaw(context.Context) error {
	e.b.mu.Lock()
	defer e.b.mu.Unlock()
	e.b.thaws++
	return nil
}

func (b *freezeBackend) counts() (int, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.freezes, b.thaws
}

// TestTakeOverThawsAFrozenApp: with --freeze-while-thinking the app is
// frozen while the agent decides; a watcher's look does not reach the
// frozen sandbox (ErrFrozen); a person's takeover thaws it at once, and
// it stays running while they drive, though the agent is still thinking.
func TestTakeOverThawsAFrozenApp(t *testing.T) {
	b := &freezeBackend{}
	ag := newPatient()
	ag.hold = func(n int) bool { return n == 2 }
	s, done, _ := runWith(t, b, ag, nil, freezing)
	<-ag.deciding
	<-ag.deciding // held, with the app frozen
	if f, th := b.counts(); f != 2 || th != 1 {
		t.Fatalf("%d freezes, %d thaws while the agent decides, want 2, 1", f, th)
	}
	if _, _, err := s.Peek(t.Context()); !errors.Is(err, ErrFrozen) {
		t.Errorf("Peek on a frozen app: %v, want ErrFrozen", err)
	}
	if err := s.TakeOver("tester"); err != nil {
		t.Fatal(err)
	}
	if f, th := b.counts(); f != 2 || th != 2 {
		t.Fatalf("after the takeover %d freezes, %d thaws, want 2, 2", f, th)
	}
	if _, _, err := s.Peek(t.Context()); err != nil {
		t.Errorf("Peek while the person drives: %v", err)
	}
	ag.release <- action.Action{Kind: action.KeyDown, Key: "Right"}
	if _, err := s.Act(t.Context(), Step{Actor: trace.ActorHuman, Action: action.Action{Kind: action.KeyDown, Key: "Right"}}); err != nil {
		t.Fatal(err)
	}
	if f, th := b.counts(); f != 2 || th != 2 {
		t.Errorf("while the person drives %d freezes, %d thaws: the app must run", f, th)
	}
	if err := s.HandBack(""); err != nil {
		t.Fatal(err)
	}
	if res := waitResult(t, done); res.Outcome != trace.Success {
		t.Fatalf("outcome %s: %s", res.Outcome, res.Message)
	}
	if f, th := b.counts(); f != th {
		t.Errorf("%d freezes, %d thaws at the end", f, th)
	}
}

// TestRunWithoutAgent: a run with no agent is a person's: they have
// control from the start and cannot hand it back; their steps are
// recorded as human; their done ends it; the app's exit or the deadline
// end it when they do not.
func TestRunWithoutAgent(t *testing.T) {
	t.Run("done", func(t *testing.T) {
		s, done, dir := runWith(t, &fakeBackend{}, nil, nil)
		if c := s.Control(); !c.Human || !c.NoAgent {
			t.Fatalf("Control() = %+v", c)
		}
		if err := s.HandBack(""); !errors.Is(err, ErrNoController) {
			t.Errorf("HandBack: %v, want ErrNoController", err)
		}
		for _, a := range []action.Action{{Kind: action.Type, Text: "héllo ✓"}, {Kind: action.Click, X: action.Int(5), Y: action.Int(6), Count: 2}, {Kind: action.Done, Message: "recorded"}} {
			if _, err := s.Act(t.Context(), Step{Actor: trace.ActorHuman, Action: a}); err != nil {
				t.Fatal(err)
			}
		}
		res := waitResult(t, done)
		if res.Outcome != trace.Success || res.Message != "recorded" || res.Steps != 3 {
			t.Fatalf("%+v", res)
		}
		tr := openTraceT(t, dir)
		for _, st := range tr.Steps {
			if st.Actor != trace.ActorHuman {
				t.Errorf("step %d: actor %q", st.Step, st.Actor)
			}
		}
		if tk := events(tr, trace.EventTakeover); len(tk) != 1 || tk[0].Data["no_agent"] != true {
			t.Errorf("takeover events %+v", tk)
		}
	})
	for _, c := range []struct {
		name    string
		b       *fakeBackend
		timeout time.Duration
		reason  string
	}{
		{"the app exits", &fakeBackend{late: []string{"bye\n"}, lateExit: true}, time.Minute, trace.ReasonAppExited},
		{"the deadline", &fakeBackend{}, 200 * time.Millisecond, trace.ReasonTimeout},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, done, dir := runWith(t, c.b, nil, func(cfg *Config) { cfg.Timeout = c.timeout })
			res := waitResult(t, done)
			if res.Outcome != trace.Failure || res.Reason != c.reason {
				t.Fatalf("%s/%s: %s", res.Outcome, res.Reason, res.Message)
			}
			if tr := openTraceT(t, dir); tr.Final == nil {
				t.Errorf("no last observation recorded")
			}
		})
	}
}

// TestRemoteActWaitsForControl: a remote controller's action while a
// person has control waits for the hand-back and is not performed; its
// next observation says what the person did.
func TestRemoteActWaitsForControl(t *testing.T) {
	b := &fakeBackend{}
	s, _ := openFake(t, b, nil)
	ctx := t.Context()
	if err := s.TakeOver(""); err != nil {
		t.Fatal(err)
	}
	got := make(chan StepResult, 1)
	go func() {
		res, err := s.Act(ctx, Step{Action: action.Action{Kind: action.KeyDown, Key: "Right"}})
		if err != nil {
			t.Error(err)
		}
		got <- res
	}()
	if _, err := s.Act(ctx, Step{Actor: trace.ActorHuman, Action: action.Action{Kind: action.Key, Keys: "Return"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-got:
		t.Fatalf("the remote action returned while the person had control: %+v", res)
	default:
	}
	if err := s.HandBack("the person left"); err != nil {
		t.Fatal(err)
	}
	res := <-got
	if !res.NotApplied || res.Result.OK || res.Result.Error != NotAppliedError || res.Step != 1 {
		t.Fatalf("%+v", res)
	}
	obs, err := s.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if obs.Intervention == nil || obs.Intervention.By != "a person" || len(obs.Intervention.Actions) != 1 || obs.Last == nil || obs.Last.Error != NotAppliedError {
		t.Errorf("observation after the hand-back: intervention %+v, last %+v", obs.Intervention, obs.Last)
	}
	s.Close(ctx, End{Outcome: trace.Interrupted, Reason: trace.ReasonClosed})
	for _, a := range b.envs[0].actions {
		if a.Kind == action.KeyDown {
			t.Errorf("the remote key_down was performed")
		}
	}
}

// TestPeekDuringAWait: a watcher's look is answered while a step's plain
// wait runs (it is a timer on the host, not a request the sandbox holds),
// and Close ends that wait at once.
func TestPeekDuringAWait(t *testing.T) {
	stepped := make(chan struct{}, 1)
	s, _ := openFake(t, &fakeBackend{}, func(c *Config) {
		c.Listener = func(e Event) {
			if e.Kind == EventStep {
				stepped <- struct{}{}
			}
		}
	})
	ctx := t.Context()
	acted := make(chan error, 1)
	go func() {
		_, err := s.Act(ctx, Step{Action: action.Action{Kind: action.Wait, MS: 60_000}})
		acted <- err
	}()
	<-stepped
	if f, _, err := s.Peek(ctx); err != nil || f == nil {
		t.Fatalf("Peek during a wait: %v", err)
	}
	select {
	case err := <-acted:
		t.Fatalf("the wait ended before the peek was checked: %v", err)
	default:
	}
	s.Close(ctx, End{Outcome: trace.Interrupted, Reason: trace.ReasonClosed, Message: "closed"})
	if err := <-acted; !errors.Is(err, ErrEnded) {
		t.Errorf("the wait ended with %v, want the episode's end", err)
	}
}

func appBundle() *app.Bundle {
	return &app.Bundle{Target: "mover", Manifest: app.Manifest{Command: "mover"}}
}
