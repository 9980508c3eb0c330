package session

import (
	"context"
	"errors"

	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// wantsTree reports whether this step's observation reads the tree: the
// run asks for it at every step (Tree, Marks), or the agent did (an
// accessibility_tree action, or a TreeWanter that wants it now).
func (s *Session) wantsTree() bool {
	if s.cfg.Tree || s.cfg.Marks || s.treeReq {
		return true
	}
	w, ok := s.loop.Agent.(agent.TreeWanter)
	return ok && w.WantsTree()
}

// accessibility reads the tree for a step's observation when it is
// wanted, records it (a11y/NNNNNN.json) and, with Marks, gives the agent
// a marked copy of the screenshot with the marks' map. A tree that could
// not be read is recorded with why and the run goes on; only a guest that
// failed ends it (the error returned).
func (s *Session) accessibility(ctx context.Context, step int, obs *observe.Observation, rec *trace.Record) error {
	s.marks = nil
	defer func() { s.maskTree = nil }()
	if !s.wantsTree() {
		return nil
	}
	s.treeReq = false
	info := &trace.TreeInfo{}
	rec.Observation.Tree = info
	acc, ok := s.environment().(environment.Accessible)
	if !ok || !s.cfg.Env.A11y {
		info.Error = environment.ErrNoA11y.Error()
		return nil
	}
	t, err := s.maskTree, error(nil) // the paint's read, when it made one
	if t == nil {
		t, err = acc.Tree(ctx, s.cfg.TreeLimits)
	}
	if err != nil {
		if errors.Is(err, environment.ErrGuest) || ctx.Err() != nil {
			return err
		}
		info.Error = err.Error()
		return nil
	}
	s.events.secrets.tree(t)
	obs.Tree = t
	info.Elements, info.Apps, info.ElapsedMS, info.Cut, info.Note = len(t.Elements), t.Apps, float64(t.ElapsedUS)/1000, t.Cut, t.Note
	if p, err := s.tw.Tree(step, t); err == nil {
		info.File = p
	} else {
		info.Error = err.Error()
	}
	if s.cfg.Marks && obs.Screen != nil {
		obs.Marks = observe.MarksOf(t, obs.Screen.Width, obs.Screen.Height)
		obs.Screen = observe.DrawMarks(obs.Screen, obs.Marks)
		rec.Observation.Marks = obs.Marks
		rec.Observation.MarkedScreenshot = s.tw.Marked(step, obs.Screen)
		obs.ScreenshotRef = rec.Observation.MarkedScreenshot
		s.marks = obs.Marks
	}
	return nil
}
