package session

import (
	"context"
	"errors"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/trace"
)

// wantsTree reports whether this step's observation reads the tree: the
// run asks for it at every step (Tree, Marks), or the agent did (an
// accessibility_tree action, or a TreeWanter that wants it now).
func (r *run) wantsTree(s *loopState) bool {
	if r.cfg.Tree || r.cfg.Marks || s.treeReq {
		return true
	}
	w, ok := r.cfg.Agent.(agent.TreeWanter)
	return ok && w.WantsTree()
}

// accessibility reads the tree for a step's observation when it is
// wanted, records it (a11y/NNNNNN.json) and, with Marks, gives the agent
// a marked copy of the screenshot with the marks' map. A tree that could
// not be read is recorded with why and the run goes on; only a guest that
// failed ends it (the error returned).
func (r *run) accessibility(ctx context.Context, step int, s *loopState, obs *action.Observation, rec *trace.Record) error {
	if !r.wantsTree(s) {
		return nil
	}
	s.treeReq = false
	info := &trace.TreeInfo{}
	rec.Observation.Tree = info
	acc, ok := r.env.(environment.Accessible)
	if !ok || !r.cfg.Env.A11y {
		info.Error = environment.ErrNoA11y.Error()
		return nil
	}
	t, err := acc.Tree(ctx, r.cfg.TreeLimits)
	if err != nil {
		if errors.Is(err, environment.ErrGuest) || ctx.Err() != nil {
			return err
		}
		info.Error = err.Error()
		return nil
	}
	obs.Tree = t
	info.Elements, info.Apps, info.ElapsedMS, info.Cut, info.Note = len(t.Elements), t.Apps, float64(t.ElapsedUS)/1000, t.Cut, t.Note
	if p, err := r.tw.Tree(step, t); err == nil {
		info.File = p
	} else {
		info.Error = err.Error()
	}
	if r.cfg.Marks && obs.Screen != nil {
		obs.Marks = action.MarksOf(t, obs.Screen.Width, obs.Screen.Height)
		obs.Screen = action.DrawMarks(obs.Screen, obs.Marks)
		rec.Observation.Marks = obs.Marks
		rec.Observation.MarkedScreenshot = r.tw.Marked(step, obs.Screen)
		obs.ScreenshotRef = rec.Observation.MarkedScreenshot
	}
	return nil
}
