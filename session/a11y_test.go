package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// treeBackend's environments read a tree: the square as a push button
// where the fake draws it.
type treeBackend struct {
	fakeBackend
	treeErr error
	reads   int
}

type treeEnv struct {
	*fakeEnv
	b *treeBackend
}

func (b *treeBackend) Create(ctx context.Context, cfg environment.Config) (environment.Environment, error) {
	e, err := b.fakeBackend.Create(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &treeEnv{fakeEnv: e.(*fakeEnv), b: b}, nil
}

func (e *treeEnv) Tree(context.Context, observe.TreeLimits) (*observe.Tree, error) {
	e.b.reads++
	if e.b.treeErr != nil {
		return nil, e.b.treeErr
	}
	x := int(e.pos())
	return &observe.Tree{Apps: 1, Elements: []observe.Element{
		{ID: "1.2/root", Parent: -1, Role: "application", Name: "mover"},
		{ID: "1.2/1", Parent: 0, Depth: 1, Role: "push button", Name: "square", Bounds: &action.Rect{x, 220, x + 40, 260},
			States: []string{"enabled", "focusable", "showing", "visible"}},
	}}, nil
}

// wanter wants the tree at the observations it names.
type wanter struct {
	scripted
	want map[int]bool
	asks int
}

func (w *wanter) WantsTree() bool { w.asks++; return w.want[w.asks] }

var _ agent.TreeWanter = (*wanter)(nil)

func TestMarksResolvedAndRecorded(t *testing.T) {
	b := &treeBackend{}
	ag := &scripted{steps: []agent.Decision{
		{Action: action.Action{Kind: action.Click, Mark: 1}},
		{Action: action.Action{Kind: action.Click, Mark: 5}},
		{Action: action.Action{Kind: action.Done}},
	}}
	res, tr := runFake(t, &b.fakeBackend, ag, func(c *Config) { c.Backend = b; c.Marks = true })
	if res.Outcome != trace.Success {
		t.Fatalf("result = %+v", res)
	}
	if !tr.Run.Settings.Marks || !tr.Run.Settings.A11y {
		t.Errorf("settings %+v", tr.Run.Settings)
	}
	// The agent saw the marked copy and the marks; the trace keeps the raw
	// screenshot beside the marked one.
	obs := ag.seen[0]
	if len(obs.Marks) != 1 || obs.Marks[0].Name != "square" || obs.Tree == nil {
		t.Fatalf("observation marks %+v tree %v", obs.Marks, obs.Tree)
	}
	s1 := tr.Steps[0]
	o := s1.Observation
	if o.MarkedScreenshot == "" || o.MarkedScreenshot == o.Screenshot || obs.ScreenshotRef != o.MarkedScreenshot || len(o.Marks) != 1 {
		t.Errorf("recorded observation: screenshot %q marked %q (agent was told %q), marks %v", o.Screenshot, o.MarkedScreenshot, obs.ScreenshotRef, o.Marks)
	}
	if o.Tree == nil || o.Tree.Elements != 2 || o.Tree.File == "" {
		t.Errorf("tree info %+v", o.Tree)
	}
	if _, err := trace.ReadFile(tr.Dir, o.Tree.File, 1<<20); err != nil {
		t.Error(err)
	}
	// Mark 1 was clicked at the square's centre, recorded with the mark.
	if a := s1.Action; a.Mark != 1 || a.X == nil || *a.X != 60 || *a.Y != 240 {
		t.Errorf("recorded action %+v", a)
	}
	env := b.envs[0]
	if len(env.actions) == 0 || env.actions[0].Kind != action.Click || *env.actions[0].X != 60 {
		t.Errorf("performed %+v", env.actions)
	}
	// Mark 5 does not exist: rejected, told to the agent, not performed.
	if s := tr.Steps[1]; !strings.Contains(s.Invalid, "mark 5: the screenshot's marks are 1 to 1") {
		t.Errorf("step 2 invalid %q", s.Invalid)
	}
	if len(env.actions) != 1 {
		t.Errorf("performed %d actions, want 1", len(env.actions))
	}
}

func TestTreeWhenAsked(t *testing.T) {
	b := &treeBackend{}
	ag := &wanter{scripted: scripted{steps: []agent.Decision{
		{Action: action.Action{Kind: action.AccessibilityTree}},
		{Action: action.Action{Kind: action.Wait, MS: 1}},
		{Action: action.Action{Kind: action.Wait, MS: 1}},
		{Action: action.Action{Kind: action.Done}},
	}}, want: map[int]bool{2: true}} // asked at steps 1, 3 and 4
	res, tr := runFake(t, &b.fakeBackend, ag, func(c *Config) { c.Backend = b; c.Env.A11y = true })
	if res.Outcome != trace.Success {
		t.Fatalf("result = %+v", res)
	}
	// Step 2 follows accessibility_tree; step 3 is the wanter's.
	var got []string
	for i, obs := range ag.seen {
		got = append(got, fmt.Sprintf("%d:%v", i+1, obs.Tree != nil))
		if (obs.Tree != nil) != (tr.Steps[i].Observation.Tree != nil) {
			t.Errorf("step %d: the agent's tree and the record's differ", i+1)
		}
	}
	if strings.Join(got, " ") != "1:false 2:true 3:true 4:false" || b.reads != 2 {
		t.Errorf("trees at %v, %d reads", got, b.reads)
	}
}

func TestTreeErrors(t *testing.T) {
	done := []agent.Decision{{Action: action.Action{Kind: action.AccessibilityTree}}, {Action: action.Action{Kind: action.Done}}}
	// No bus: recorded, the run goes on.
	b := &treeBackend{}
	res, tr := runFake(t, &b.fakeBackend, &scripted{steps: append([]agent.Decision(nil), done...)}, func(c *Config) { c.Backend = b })
	if res.Outcome != trace.Success || tr.Steps[1].Observation.Tree == nil || !strings.Contains(tr.Steps[1].Observation.Tree.Error, "no accessibility bus") || b.reads != 0 {
		t.Errorf("without a bus: %+v, %+v, %d reads", res, tr.Steps[1].Observation.Tree, b.reads)
	}
	// A read that failed: recorded, the run goes on.
	b = &treeBackend{treeErr: errors.New("the registry did not answer")}
	res, tr = runFake(t, &b.fakeBackend, &scripted{steps: append([]agent.Decision(nil), done...)}, func(c *Config) { c.Backend = b; c.Env.A11y = true })
	if res.Outcome != trace.Success || !strings.Contains(tr.Steps[1].Observation.Tree.Error, "registry did not answer") {
		t.Errorf("a failed read: %+v, %+v", res, tr.Steps[1].Observation.Tree)
	}
	// The guest failed: the run ends as the environment's error.
	b = &treeBackend{treeErr: fmt.Errorf("%w: the stream ended", environment.ErrGuest)}
	res, _ = runFake(t, &b.fakeBackend, &scripted{steps: append([]agent.Decision(nil), done...)}, func(c *Config) { c.Backend = b; c.Env.A11y = true })
	if res.Outcome != trace.Error || res.Reason != trace.ReasonEnvironment {
		t.Errorf("a failed guest: %+v", res)
	}
}
