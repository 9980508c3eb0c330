package session

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/vault"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

const (
	secretValue = "hunter22-s3cret"
	secretName  = "PW"
)

// echoBackend's app echoes what is typed into everything it can: its
// output (in chunks split inside the text), its window's title, its
// accessibility tree, and the error of the action's result.
type echoBackend struct {
	fakeBackend
	mu    sync.Mutex
	typed []string // what the sandbox was asked to type
}

func (b *echoBackend) Create(ctx context.Context, cfg environment.Config) (environment.Environment, error) {
	e, err := b.fakeBackend.Create(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &echoEnv{fakeEnv: e.(*fakeEnv), b: b, title: "login"}, nil
}

type echoEnv struct {
	*fakeEnv
	b     *echoBackend
	mu    sync.Mutex
	title string
}

func (e *echoEnv) Act(ctx context.Context, a action.Action) (action.Result, error) {
	if a.Kind != action.Type {
		return e.fakeEnv.Act(ctx, a)
	}
	e.b.mu.Lock()
	e.b.typed = append(e.b.typed, a.Text)
	e.b.mu.Unlock()
	ev := e.fakeEnv.cfg.Events
	t := a.Text
	// The terminal echoes one chunk per few bytes, splitting the value.
	ev.Output(observe.Stdout, []byte("you typed: "+t[:3]), 0)
	ev.Output(observe.Stdout, []byte(t[3:7]), 0)
	ev.Output(observe.Stdout, []byte(t[7:]+"\n"), 0)
	ev.Output(observe.Stderr, []byte("warning: "+t), 0) // no newline: a partial line
	e.mu.Lock()
	e.title = "login as " + t
	e.mu.Unlock()
	ev.Window("title", observe.Window{ID: 1, Title: "login as " + t})
	return action.Result{OK: false, Error: "the app refused " + t, Target: &action.Resolved{ID: "1", Role: "text", Name: "field " + t}}, nil
}

func (e *echoEnv) Observe(ctx context.Context) (*observe.Frame, environment.State, error) {
	f, st, err := e.fakeEnv.Observe(ctx)
	e.mu.Lock()
	st.Windows = []observe.Window{{ID: 1, Title: e.title}}
	e.mu.Unlock()
	return f, st, err
}

func (e *echoEnv) Tree(context.Context, observe.TreeLimits) (*observe.Tree, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return &observe.Tree{Apps: 1, Elements: []observe.Element{
		{ID: "1", Parent: -1, Role: "application", Name: "app"},
		{ID: "2", Parent: 0, Depth: 1, Role: "text", Name: e.title, Text: "typed: " + e.title},
	}}, nil
}

// TestTypeSecret: the sandbox types the value; nothing recorded, told to
// a listener, or shown to the agent holds it — every echo of it reads
// [secret:PW] — and a secret the vault does not hold is a failed step
// that names it, after which the run goes on.
func TestTypeSecret(t *testing.T) {
	v, err := vault.New(map[string]string{secretName: secretValue, "OTHER": "other-value"})
	if err != nil {
		t.Fatal(err)
	}
	ag := &scripted{steps: []agent.Decision{
		{Action: action.Action{Kind: action.TypeSecret, Secret: secretName}},
		{Action: action.Action{Kind: action.TypeSecret, Secret: "NOPE"}},
		{Action: action.Action{Kind: action.Wait, MS: 1}},
		{Action: action.Action{Kind: action.Done}},
	}}
	b := &echoBackend{}
	var emu sync.Mutex
	var told []string
	listen := func(e Event) {
		emu.Lock()
		defer emu.Unlock()
		told = append(told, e.Text)
		if e.Window != nil {
			told = append(told, e.Window.Title)
		}
		if e.Result != nil {
			told = append(told, e.Result.Error)
			if e.Result.Target != nil {
				told = append(told, e.Result.Target.Name)
			}
		}
		if e.Action != nil {
			told = append(told, e.Action.Text, e.Action.String())
		}
	}
	res, tr := runFake(t, &b.fakeBackend, ag, func(c *Config) {
		c.Backend = b
		c.Vault = v
		c.Tree = true
		c.Listener = listen
	})
	if res.Outcome != trace.Success {
		t.Fatalf("outcome %s (%s): %s", res.Outcome, res.Reason, res.Message)
	}
	if len(b.typed) != 1 || b.typed[0] != secretValue {
		t.Fatalf("the sandbox typed %q, want the secret once", b.typed)
	}

	// The steps: the name recorded, never the value; the unknown name a
	// failed step naming it.
	if got := tr.Steps[0].Action; got.Kind != action.TypeSecret || got.Secret != secretName || got.Text != "" {
		t.Errorf("step 1 recorded %+v", got)
	}
	if r := tr.Steps[1]; r.Invalid == "" || r.Result == nil || r.Result.Result == nil || r.Result.Result.OK || !strings.Contains(r.Result.Result.Error, "no secret NOPE in the vault") {
		t.Errorf("step 2 (an unknown secret): invalid %q, result %+v", r.Invalid, r.Result)
	}
	if r := tr.Steps[0].Result; r == nil || r.Result == nil || !strings.Contains(r.Result.Error, "[secret:PW]") {
		t.Errorf("step 1's result: %+v", r)
	}

	// Every file of the trace (the report is made of them: the e2e test
	// reads it too).
	var all strings.Builder
	err = filepath.WalkDir(tr.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if strings.Contains(string(data), secretValue) {
			t.Errorf("%s holds the secret's value", p)
		}
		all.Write(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"you typed: [secret:PW]", "warning: [secret:PW]", "login as [secret:PW]", "field [secret:PW]"} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("the trace has no %q", want)
		}
	}

	// What the agent was shown: the names, never a value.
	if got := ag.seen[0].Secrets; strings.Join(got, ",") != "OTHER,PW" {
		t.Errorf("the agent was told the secrets %v, want OTHER,PW", got)
	}
	var shown strings.Builder
	for _, o := range ag.seen {
		for _, l := range o.Output {
			shown.WriteString(l.Text + "\n")
		}
		for _, w := range o.Windows {
			shown.WriteString(w.Title + "\n")
		}
		if o.Tree != nil {
			for _, e := range o.Tree.Elements {
				shown.WriteString(e.Name + "\n" + e.Text + "\n")
			}
		}
		if o.Last != nil {
			shown.WriteString(o.Last.Error + "\n")
		}
	}
	if strings.Contains(shown.String(), secretValue) {
		t.Errorf("the agent was shown the value:\n%s", shown.String())
	}
	for _, want := range []string{"you typed: [secret:PW]", "login as [secret:PW]", "typed: login as [secret:PW]", "no secret NOPE in the vault"} {
		if !strings.Contains(shown.String(), want) {
			t.Errorf("the agent was not shown %q:\n%s", want, shown.String())
		}
	}

	// What listeners (the live page, the API, MCP) were told.
	emu.Lock()
	defer emu.Unlock()
	if s := strings.Join(told, "\n"); strings.Contains(s, secretValue) || !strings.Contains(s, "[secret:PW]") {
		t.Errorf("the listener was told:\n%s", s)
	}
}

// TestTypeSecretWithoutVault: type_secret in a run without a vault is a
// failed step saying so.
func TestTypeSecretWithoutVault(t *testing.T) {
	ag := &scripted{steps: []agent.Decision{
		{Action: action.Action{Kind: action.TypeSecret, Secret: secretName}},
		{Action: action.Action{Kind: action.Done}},
	}}
	b := &fakeBackend{}
	_, tr := runFake(t, b, ag, nil)
	if r := tr.Steps[0]; r.Result == nil || r.Result.Result == nil || r.Result.Result.OK || !strings.Contains(r.Result.Result.Error, "no secret PW: this run has no vault") {
		t.Errorf("step 1: %+v", r.Result)
	}
	for _, e := range b.envs {
		for _, a := range e.actions {
			if a.Kind == action.Type {
				t.Errorf("the sandbox was asked to type %q", a.Text)
			}
		}
	}
}

// TestPeekRedacts: a watcher's look (the live page, MCP's state tool, a
// replay's second look) gets the window titles with the values replaced
// too.
func TestPeekRedacts(t *testing.T) {
	v, err := vault.New(map[string]string{secretName: secretValue})
	if err != nil {
		t.Fatal(err)
	}
	b := &echoBackend{}
	s, err := Open(t.Context(), Config{
		RunID: "test", Backend: b, TraceDir: filepath.Join(t.TempDir(), "trace"), Vault: v,
		App: &app.Bundle{Target: "mover", Manifest: app.Manifest{Command: "mover"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.WithoutCancel(t.Context()), End{Outcome: trace.Success, Reason: trace.ReasonDone})
	if _, err := s.Observe(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Act(t.Context(), Step{Action: action.Action{Kind: action.TypeSecret, Secret: secretName}}); err != nil {
		t.Fatal(err)
	}
	_, st, err := s.Peek(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Windows) != 1 || st.Windows[0].Title != "login as [secret:PW]" {
		t.Errorf("Peek's windows %+v", st.Windows)
	}
}
