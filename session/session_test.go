package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/agent/demo"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// fakeBackend simulates the mover: a green square that moves right at
// 200 px/s while Right is held.
type fakeBackend struct {
	createErr error
	launchErr error
	exitAfter int    // the app exits after this many observations (0: never)
	stopped   string // the exit is marked as caused by the sandbox stopping
	actErr    error
	// pingErr is what the guest's liveness ping answers (nil: it lives).
	pingErr error
	// late is output written 30 ms apart after the launch returns;
	// lateExit makes the app exit after it.
	late     []string
	lateExit bool
	// termOnClose: closing the sandbox ends the app with SIGTERM, as the
	// guest's stop does.
	termOnClose bool

	mu     sync.Mutex
	envs   []*fakeEnv
	closed int
}

func (b *fakeBackend) Name() string { return "fake" }

func (b *fakeBackend) Create(_ context.Context, cfg environment.Config) (environment.Environment, error) {
	if b.createErr != nil {
		return nil, b.createErr
	}
	e := &fakeEnv{b: b, cfg: cfg, x: 40}
	b.mu.Lock()
	b.envs = append(b.envs, e)
	b.mu.Unlock()
	return e, nil
}

type fakeEnv struct {
	mu       sync.Mutex // Observe and Act may come from a watcher's goroutine too (Peek)
	b        *fakeBackend
	cfg      environment.Config
	x        float64
	held     time.Time
	observed int
	exited   bool
	actions  []action.Action
	lateDone chan struct{}
}

func (e *fakeEnv) Info() environment.Info { return environment.Info{Backend: "fake", ID: "f1"} }

// Done and Ping implement environment.Liveness.
func (e *fakeEnv) Done() <-chan struct{}          { return nil }
func (e *fakeEnv) Ping(ctx context.Context) error { return e.b.pingErr }

func (e *fakeEnv) Launch(context.Context, environment.LaunchSpec) (environment.LaunchResult, error) {
	if e.b.launchErr != nil {
		return environment.LaunchResult{}, e.b.launchErr
	}
	e.cfg.Events.Output(observe.Stdout, []byte("mover: ready\npartial"), 0)
	e.cfg.Events.Window("mapped", observe.Window{ID: 1, Title: "mover"})
	if len(e.b.late) > 0 || e.b.lateExit {
		e.lateDone = make(chan struct{})
		go func() {
			defer close(e.lateDone)
			for _, out := range e.b.late {
				time.Sleep(30 * time.Millisecond)
				e.cfg.Events.Output(observe.Stdout, []byte(out), 0)
			}
			if e.b.lateExit {
				e.cfg.Events.Exited(observe.Exit{Code: 2})
			}
		}()
	}
	return environment.LaunchResult{PID: 7, Window: &observe.Window{Title: "mover"}}, nil
}

func (e *fakeEnv) pos() float64 {
	if e.held.IsZero() {
		return e.x
	}
	return e.x + 200*time.Since(e.held).Seconds()
}

func (e *fakeEnv) Observe(context.Context) (*observe.Frame, environment.State, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.observed++
	if e.b.exitAfter > 0 && e.observed > e.b.exitAfter && !e.exited {
		e.exited = true
		e.cfg.Events.Exited(observe.Exit{Code: -1, Signal: "SIGSEGV", Stopped: e.b.stopped})
	}
	w, h := 640, 480
	pix := make([]byte, 4*w*h)
	x0 := int(e.pos())
	for y := 220; y < 260; y++ {
		for x := x0; x < x0+40 && x < w; x++ {
			pix[4*(y*w+x)+1] = 255
		}
	}
	return &observe.Frame{Width: w, Height: h, Pix: pix, Hash: uint64(x0) + 1}, environment.State{Running: !e.exited}, nil
}

func (e *fakeEnv) Act(ctx context.Context, a action.Action) (action.Result, error) {
	if e.b.actErr != nil {
		return action.Result{}, e.b.actErr
	}
	e.mu.Lock()
	e.actions = append(e.actions, a)
	switch {
	case a.Kind == action.KeyDown && a.Key == "Right":
		e.held = time.Now()
	case a.Kind == action.KeyUp && a.Key == "Right":
		e.x, e.held = e.pos(), time.Time{}
	}
	e.mu.Unlock()
	switch {
	case a.Kind == action.Wait:
		select {
		case <-time.After(time.Duration(a.MS) * time.Millisecond):
		case <-ctx.Done():
			return action.Result{}, ctx.Err()
		}
	}
	return action.Result{OK: true}, nil
}

func (e *fakeEnv) Close(context.Context) error {
	if e.lateDone != nil {
		<-e.lateDone
	}
	if e.b.termOnClose && !e.exited {
		e.exited = true
		e.cfg.Events.Exited(observe.Exit{Code: -1, Signal: "SIGTERM"})
	}
	e.b.mu.Lock()
	e.b.closed++
	e.b.mu.Unlock()
	return nil
}

// scripted answers with fixed decisions, then waits.
type scripted struct {
	steps []agent.Decision
	seen  []*observe.Observation
	panic bool
}

func (s *scripted) Decide(ctx context.Context, obs *observe.Observation) (agent.Decision, error) {
	s.seen = append(s.seen, obs)
	if s.panic {
		panic("agent bug")
	}
	if len(s.steps) == 0 {
		return agent.Decision{Action: action.Action{Kind: action.Wait, MS: 20}}, nil
	}
	d := s.steps[0]
	s.steps = s.steps[1:]
	return d, nil
}

func newDemo(t *testing.T, key string) agent.Agent {
	a, err := demo.New(agent.Options{"key": key, "hold_ms": "600"})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// freezing is a Loop with --freeze-while-thinking.
func freezing(l *Loop) { l.FreezeWhileThinking = true }

func runFake(t *testing.T, b *fakeBackend, ag agent.Agent, mod func(*Config), loopMods ...func(*Loop)) (Result, *trace.Trace) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "trace")
	cfg := Config{
		RunID: "test", Backend: b, TraceDir: dir, Task: "move",
		App: &app.Bundle{Target: "mover", Manifest: app.Manifest{Command: "mover"}},
	}
	if mod != nil {
		mod(&cfg)
	}
	loop := Loop{Agent: ag}
	for _, m := range loopMods {
		m(&loop)
	}
	res, err := Run(t.Context(), cfg, loop)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Incomplete {
		t.Errorf("trace incomplete after Run returned")
	}
	if tr.Run.Outcome != res.Outcome || tr.Run.Reason != res.Reason {
		t.Errorf("run.json says %s/%s, result %s/%s", tr.Run.Outcome, tr.Run.Reason, res.Outcome, res.Reason)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed != len(b.envs) {
		t.Errorf("%d environments created, %d closed", len(b.envs), b.closed)
	}
	return res, tr
}

func TestDemoAgentSucceeds(t *testing.T) {
	b := &fakeBackend{}
	res, tr := runFake(t, b, newDemo(t, "Right"), nil)
	if res.Outcome != trace.Success || res.ExitCode() != 0 {
		t.Fatalf("result = %+v", res)
	}
	if len(tr.Steps) != 4 || tr.Final == nil {
		t.Errorf("steps = %d, final = %v", len(tr.Steps), tr.Final != nil)
	}
	kinds := []action.Kind{}
	for _, s := range tr.Steps {
		kinds = append(kinds, s.Action.Kind)
	}
	if got := strings.Join(toStrings(kinds), " "); got != "key_down wait key_up done" {
		t.Errorf("actions = %q", got)
	}
	// The first observation carried the app's first lines.
	if out := tr.Steps[0].Observation.Output; len(out) != 2 || out[0].Text != "mover: ready" || out[1].Text != "partial" {
		t.Errorf("first observation output = %+v", out)
	}
	// Events were recorded.
	var events []string
	for _, r := range tr.Records {
		if r.Type == trace.TypeEvent {
			events = append(events, r.Event)
		}
	}
	if strings.Join(events, ",") != "window_mapped" {
		t.Errorf("events = %v", events)
	}
	if tr.Run.Timings["first_screenshot"] <= 0 {
		t.Errorf("timings = %v", tr.Run.Timings)
	}
	stdout, _ := os.ReadFile(filepath.Join(tr.Dir, trace.StdoutFile))
	if string(stdout) != "mover: ready\npartial" {
		t.Errorf("stdout.log = %q", stdout)
	}
}

func toStrings(ks []action.Kind) []string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return s
}

func TestOutcomes(t *testing.T) {
	no := false
	tests := []struct {
		name       string
		b          *fakeBackend
		ag         func(t *testing.T) agent.Agent
		mod        func(*Config)
		outcome    trace.Outcome
		reason     string
		msgContain string
	}{
		{"broken input", &fakeBackend{}, func(t *testing.T) agent.Agent { return newDemo(t, "Left") }, nil,
			trace.Failure, trace.ReasonGaveUp, "moved +0 px"},
		{"gave up", &fakeBackend{}, func(*testing.T) agent.Agent {
			return &scripted{steps: []agent.Decision{{Action: action.Action{Kind: action.Done, Success: &no, Message: "stuck"}}}}
		}, nil, trace.Failure, trace.ReasonGaveUp, "stuck"},
		{"max steps", &fakeBackend{}, func(*testing.T) agent.Agent { return &scripted{} },
			func(c *Config) { c.MaxSteps = 3 }, trace.Failure, trace.ReasonMaxSteps, "3 steps"},
		{"timeout", &fakeBackend{}, func(*testing.T) agent.Agent { return &scripted{} },
			func(c *Config) { c.Timeout = 150 * time.Millisecond }, trace.Failure, trace.ReasonTimeout, "deadline"},
		{"app exits mid-run", &fakeBackend{exitAfter: 2}, func(*testing.T) agent.Agent { return &scripted{} }, nil,
			trace.Failure, trace.ReasonAppExited, "signal SIGSEGV"},
		{"sandbox stopped from outside", &fakeBackend{exitAfter: 2, stopped: "the guest received SIGTERM"}, func(*testing.T) agent.Agent { return &scripted{} }, nil,
			trace.Error, trace.ReasonEnvironment, "stopped from outside (the guest received SIGTERM)"},
		{"image missing", &fakeBackend{createErr: environment.ErrImage}, func(*testing.T) agent.Agent { return &scripted{} }, nil,
			trace.Error, trace.ReasonEnvironment, "create the sandbox"},
		{"no window", &fakeBackend{launchErr: environment.ErrNoWindow}, func(*testing.T) agent.Agent { return &scripted{} }, nil,
			trace.Error, trace.ReasonNoWindow, "launch"},
		{"app does not start", &fakeBackend{launchErr: environment.ErrAppStart}, func(*testing.T) agent.Agent { return &scripted{} }, nil,
			trace.Error, trace.ReasonAppStart, "launch"},
		{"no ready output", &fakeBackend{late: []string{"loading\n"}}, func(*testing.T) agent.Agent { return &scripted{} },
			func(c *Config) { c.App.Manifest.ReadyOutput, c.ReadyTimeout = "game: ready", 300*time.Millisecond },
			trace.Error, trace.ReasonAppStart, `did not print a line containing "game: ready" (ready_output) within 300ms; the app's last output:`},
		{"exits before ready output", &fakeBackend{late: []string{"fatal: no GL\n"}, lateExit: true}, func(*testing.T) agent.Agent { return &scripted{} },
			func(c *Config) { c.App.Manifest.ReadyOutput = "game: ready" },
			trace.Error, trace.ReasonAppStart, `the app exited (exit code 2) before printing a line containing "game: ready"`},
		// A plain wait is a timer on the host, which pings the guest
		// meanwhile: one that stops answering ends the run at once as the
		// environment's fault, not at the deadline as the agent's.
		{"guest stalls during a wait", &fakeBackend{pingErr: fmt.Errorf("%w: the guest stopped answering", environment.ErrGuest)}, func(*testing.T) agent.Agent {
			return &scripted{steps: []agent.Decision{{Action: action.Action{Kind: action.Wait, MS: 60000}}}}
		}, func(c *Config) { c.Timeout = 20 * time.Second },
			trace.Error, trace.ReasonEnvironment, "stopped answering"},
		{"guest dies", &fakeBackend{actErr: environment.ErrGuest}, func(*testing.T) agent.Agent {
			return &scripted{steps: []agent.Decision{{Action: action.Action{Kind: action.Key, Keys: "Right"}}}}
		}, nil,
			trace.Error, trace.ReasonEnvironment, "guest failure"},
		{"agent panics", &fakeBackend{}, func(*testing.T) agent.Agent { return &scripted{panic: true} }, nil,
			trace.Error, trace.ReasonEnvironment, "panicked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _ := runFake(t, tt.b, tt.ag(t), tt.mod)
			if res.Outcome != tt.outcome || res.Reason != tt.reason || !strings.Contains(res.Message, tt.msgContain) {
				t.Errorf("got %s/%s %q, want %s/%s containing %q", res.Outcome, res.Reason, res.Message, tt.outcome, tt.reason, tt.msgContain)
			}
		})
	}
}

// TestReadyOutput: with ready_output the loop starts only once the app has
// printed it, even split over writes or without its newline, and the agent
// still sees every line.
func TestReadyOutput(t *testing.T) {
	for _, late := range [][]string{
		{"loading\n", "game: re", "ady 640x480\n"},
		{"loading\n", "> game: ready"},
	} {
		t.Run(fmt.Sprintf("%q", late), func(t *testing.T) {
			ag := &scripted{steps: []agent.Decision{{Action: action.Action{Kind: action.Done}}}}
			b := &fakeBackend{late: late}
			res, tr := runFake(t, b, ag, func(c *Config) { c.App.Manifest.ReadyOutput = "game: ready" })
			if res.Outcome != trace.Success {
				t.Fatalf("result = %+v", res)
			}
			// The wait is recorded. (How long it was is the machine's: the
			// text is complete 60 ms after the launch began, and a busy
			// machine can spend most of that before the wait begins. That
			// the loop waited for it, the first observation shows: it has
			// every line.)
			if got, ok := tr.Run.Timings["ready_output"]; !ok || got <= 0 || tr.Run.Timings["app_ready"] < got {
				t.Errorf("timings: ready_output %v ms, app_ready %v ms; want the wait recorded, within app_ready", got, tr.Run.Timings["app_ready"])
			}
			var seen []string
			for _, l := range ag.seen[0].Output {
				seen = append(seen, l.Text)
			}
			if want := strings.Join(late, ""); strings.Join(seen, "\n") != strings.TrimSuffix("mover: ready\npartial"+want, "\n") {
				t.Errorf("first observation's output = %q", seen)
			}
		})
	}
}

func TestInvalidActionIsShownToTheAgent(t *testing.T) {
	ag := &scripted{steps: []agent.Decision{
		{Action: action.Action{Kind: action.KeyDown, Key: "NoSuchKey"}},
		{Action: action.Action{Kind: action.Done}},
	}}
	res, tr := runFake(t, &fakeBackend{}, ag, nil)
	if res.Outcome != trace.Success {
		t.Fatalf("result = %+v", res)
	}
	if len(ag.seen) != 2 || ag.seen[1].Last == nil || ag.seen[1].Last.OK || !strings.Contains(ag.seen[1].Last.Error, "unknown key") {
		t.Errorf("second observation's Last = %+v", ag.seen[1].Last)
	}
	if tr.Steps[0].Invalid == "" {
		t.Error("the invalid action is not marked in the trace")
	}
}

func TestInterrupted(t *testing.T) {
	b := &fakeBackend{}
	dir := filepath.Join(t.TempDir(), "trace")
	ctx, cancel := context.WithCancelCause(t.Context())
	go func() {
		time.Sleep(100 * time.Millisecond)
		cancel(ErrInterrupted)
	}()
	res, err := Run(ctx, Config{
		RunID: "i", Backend: b, TraceDir: dir,
		App: &app.Bundle{Target: "x", Manifest: app.Manifest{Command: "x"}},
	}, Loop{Agent: &scripted{}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != trace.Interrupted || res.ExitCode() != 130 {
		t.Errorf("result = %+v", res)
	}
	if b.closed != 1 {
		t.Errorf("closed = %d", b.closed)
	}
	tr, _ := trace.Open(dir)
	if tr.Run.ExitCode != 130 {
		t.Errorf("run.json exit code = %d", tr.Run.ExitCode)
	}
}

func TestCreateErrorIsClassified(t *testing.T) {
	err := errors.Join(environment.ErrUnavailable)
	res, _ := runFake(t, &fakeBackend{createErr: err}, &scripted{}, nil)
	if res.ExitCode() != 3 {
		t.Errorf("exit = %d", res.ExitCode())
	}
}

func TestSettleAndView(t *testing.T) {
	ag := &scripted{steps: []agent.Decision{
		{Action: action.Action{Kind: action.Screenshot, Region: &action.Rect{100, 100, 420, 340}, MaxWidth: 160}},
		{Action: action.Action{Kind: action.Done}},
	}}
	res, tr := runFake(t, &fakeBackend{}, ag, func(c *Config) { c.Settle = Settle{Mode: SettleFixed, Duration: 60 * time.Millisecond} })
	if res.Outcome != trace.Success {
		t.Fatalf("result = %+v", res)
	}
	if ag.seen[0].View != nil {
		t.Error("the first observation has a view nobody asked for")
	}
	v := ag.seen[1].View
	if v == nil || v.Frame.Width != 160 || v.Frame.Height != 120 || v.Region != (action.Rect{100, 100, 420, 340}) {
		t.Fatalf("view = %+v", v)
	}
	if x, y := v.ToScreen(0, 0); x != 101 || y != 101 {
		t.Errorf("view (0,0) maps to (%d,%d)", x, y)
	}
	o := tr.Steps[1].Observation
	if o.View == nil || o.View.Width != 160 || o.SettleMS < 60 {
		t.Errorf("recorded observation = %+v", o)
	}
	if tr.Steps[0].Observation.SettleMS != 0 {
		t.Error("the first screenshot waited to settle")
	}
}

func TestParseSettle(t *testing.T) {
	for in, want := range map[string]Settle{
		"none": {Mode: SettleNone}, "": {Mode: SettleNone},
		"fixed:250ms": {Mode: SettleFixed, Duration: 250 * time.Millisecond},
		"stable":      {Mode: SettleStable, Duration: 200 * time.Millisecond},
		"stable:1s":   {Mode: SettleStable, Duration: time.Second},
	} {
		got, err := ParseSettle(in)
		if err != nil || got != want {
			t.Errorf("ParseSettle(%q) = %+v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"fixed", "soon", "stable:x", "fixed:-1s"} {
		if _, err := ParseSettle(bad); err == nil {
			t.Errorf("ParseSettle(%q) accepted", bad)
		}
	}
}

// freezingBackend's environments can be frozen; they count the calls.
type freezingBackend struct{ fakeBackend }

type freezingEnv struct {
	*fakeEnv
	freezes, thaws int
	frozen         bool
}

func (b *freezingBackend) Create(ctx context.Context, cfg environment.Config) (environment.Environment, error) {
	e, err := b.fakeBackend.Create(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &freezingEnv{fakeEnv: e.(*fakeEnv)}, nil
}

func (e *freezingEnv) Freeze(context.Context) error { e.freezes++; e.frozen = true; return nil }
func (e *freezingEnv) Thaw(context.Context) error   { e.thaws++; e.frozen = false; return nil }

func (e *freezingEnv) Act(ctx context.Context, a action.Action) (action.Result, error) {
	if e.frozen {
		return action.Result{}, errors.New("acted while frozen")
	}
	return e.fakeEnv.Act(ctx, a)
}

type slowAgent struct{ scripted }

func (s *slowAgent) Decide(ctx context.Context, obs *observe.Observation) (agent.Decision, error) {
	time.Sleep(40 * time.Millisecond)
	d, err := s.scripted.Decide(ctx, obs)
	d.Files = map[string][]byte{"request.json": []byte(`{"screenshot":"` + obs.ScreenshotRef + `"}`)}
	return d, err
}

func TestFreezeWhileThinkingAndFiles(t *testing.T) {
	b := &freezingBackend{}
	ag := &slowAgent{scripted{steps: []agent.Decision{
		{Action: action.Action{Kind: action.KeyDown, Key: "Right"}},
		{Action: action.Action{Kind: action.Done}},
	}}}
	res, tr := runFake(t, &b.fakeBackend, ag, func(c *Config) { c.Backend = b }, freezing)
	if res.Outcome != trace.Success {
		t.Fatalf("result = %+v", res)
	}
	for _, s := range tr.Steps {
		if s.Decision.FrozenMS < 40 {
			t.Errorf("step %d frozen %.1f ms, want ≥ 40", s.Step, s.Decision.FrozenMS)
		}
		p := s.Decision.Files["request.json"]
		data, err := os.ReadFile(filepath.Join(tr.Dir, p))
		if err != nil || !strings.Contains(string(data), s.Observation.Screenshot) {
			t.Errorf("step %d attachment %q: %s %v", s.Step, p, data, err)
		}
	}
	if tr.Run.Timings["frozen"] < 80 || tr.Run.Timings["app_running"] <= 0 {
		t.Errorf("timings = %v", tr.Run.Timings)
	}
}

type malformedAgent struct{}

func (malformedAgent) Decide(context.Context, *observe.Observation) (agent.Decision, error) {
	d := agent.Decision{Meta: map[string]any{"attempts": 3}, Files: map[string][]byte{"exchange.json": []byte(`[{"answer":"prose"}]`)}}
	return d, fmt.Errorf("model: %w: it answered prose three times", agent.ErrMalformed)
}

func TestMalformedAgent(t *testing.T) {
	res, tr := runFake(t, &fakeBackend{}, malformedAgent{}, nil)
	if res.Outcome != trace.Error || res.Reason != trace.ReasonMalformed || !strings.Contains(res.Message, "prose") {
		t.Errorf("result = %+v", res)
	}
	// The rejected answers are kept, though the decision failed.
	var ev *trace.Record
	for i := range tr.Records {
		if tr.Records[i].Event == "agent_error" {
			ev = &tr.Records[i]
		}
	}
	if ev == nil {
		t.Fatal("no agent_error event")
	}
	files, _ := ev.Data["files"].(map[string]any)
	p, _ := files["exchange.json"].(string)
	if data, err := os.ReadFile(filepath.Join(tr.Dir, p)); err != nil || !strings.Contains(string(data), "prose") {
		t.Errorf("exchange.json of the failed decision: %q %v", data, err)
	}
}

// FirstSettle applies to the first screenshot only; Settle to the others.
func TestFirstSettle(t *testing.T) {
	ag := &scripted{steps: []agent.Decision{
		{Action: action.Action{Kind: action.KeyDown, Key: "Right"}},
		{Action: action.Action{Kind: action.Done}},
	}}
	_, tr := runFake(t, &fakeBackend{}, ag, func(c *Config) {
		c.FirstSettle = Settle{Mode: SettleFixed, Duration: 80 * time.Millisecond}
	})
	if len(tr.Steps) != 2 {
		t.Fatalf("%d steps", len(tr.Steps))
	}
	if got := tr.Steps[0].Observation.SettleMS; got < 80 {
		t.Errorf("first screenshot settled %v ms, want ≥ 80", got)
	}
	if got := tr.Steps[1].Observation.SettleMS; got != 0 {
		t.Errorf("second screenshot settled %v ms with Settle none", got)
	}
}
