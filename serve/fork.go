package serve

import (
	"context"
	"errors"
	"fmt"
	"image"
	"net/http"
	"sync"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/replay"
	"github.com/codegirl-games/agentbox/serve/api"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

// Fork (POST /v1/envs/{id}/fork) makes count new environments in the
// parent's state at its current step. The fork mode is replay
// (environment.ForkReplay): each fork is a fresh (pooled) sandbox into
// which the parent's recorded steps are replayed — the same actions, on a
// virtual clock moved by the same amounts, on the wall clock with the
// recorded intervals between them — and the fork's screen after the
// replay, once it rests, is compared with the parent's screen now, by
// the replay rules (replay.DefaultRules). Every replayed step's screen is
// compared with the parent's recorded one too: a step's screenshot may
// catch the app mid-draw (in the parent or the fork), so a difference
// there is not an error by itself, but when the last screen differs the
// error (fork_diverged) names the first step that differed — never an
// approximation — and then no fork is kept: all or none.

func (s *Server) handleFork(w http.ResponseWriter, r *http.Request, owner string) {
	e, aerr := s.lookup(r, owner)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	data, aerr := readBody(w, r, "application/json", maxJSONBody, false)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var req api.ForkRequest
	if aerr := decodeStrict(data, &req); aerr != nil {
		writeError(w, aerr)
		return
	}
	resp, aerr := s.fork(e, req.Count)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, 201, resp)
}

// forkMode is how the server's environments are forked: snapshot only
// when every backend can.
func (s *Server) forkMode() string {
	for _, b := range s.o.Backends {
		if environment.ForkOf(b) != environment.ForkSnapshot {
			return environment.ForkReplay
		}
	}
	return environment.ForkSnapshot
}

// fork makes count forks of parent's running episode (see above).
func (s *Server) fork(parent *env, count int) (*api.ForkResponse, *api.Error) {
	t0 := time.Now()
	if count < 1 || count > s.o.MaxEnvironments {
		return nil, apiError(api.CodeInvalidRequest, "count %d: want 1 to %d (the environments a token may hold)", count, s.o.MaxEnvironments)
	}
	if parent.cfg.Name != "" {
		return nil, apiError(api.CodeInvalidRequest, "environment %s's sandbox is named (%s): its home is one sandbox's at a time, so it is not forked", parent.id, parent.cfg.Name)
	}
	sess, _, aerr := parent.current()
	if aerr != nil {
		return nil, aerr
	}
	done, ok := s.track()
	if !ok {
		return nil, apiError(api.CodeShuttingDown, "the server is shutting down")
	}
	defer done()
	forks, aerr := s.reserveForks(parent, count)
	if aerr != nil {
		return nil, aerr
	}
	ok = false
	defer func() {
		if !ok { // all or none: every fork made so far is closed
			s.closeForks(forks)
		}
	}()
	// The fork point: taken under the parent's step lock, so a step in
	// flight is waited for and none runs while it is taken.
	fp, err := sess.ForkPoint(s.base)
	if err != nil {
		var ee *session.EndedError
		switch {
		case errors.As(err, &ee):
			ep := parent.describe().Episode
			return nil, parent.stepError(ep, err)
		case errors.Is(err, session.ErrRelaunching):
			return nil, apiError(api.CodeBusy, "environment %s is being relaunched", parent.id)
		}
		return nil, apiError(api.CodeEnvironment, "environment %s: its screen for the fork: %v", parent.id, err)
	}
	src, err := trace.Open(fp.TraceDir)
	if err != nil {
		return nil, apiError(api.CodeInternal, "environment %s: its trace: %v", parent.id, err)
	}
	var steps []trace.Step
	for _, st := range src.Steps {
		if st.Actor != trace.ActorCollect && st.Step <= fp.Steps {
			steps = append(steps, st)
		}
	}
	if len(steps) != fp.Steps {
		return nil, apiError(api.CodeInternal, "environment %s: its trace holds %d of its %d steps", parent.id, len(steps), fp.Steps)
	}
	origin := &api.ForkedFrom{Env: parent.id, RunID: fp.RunID, Trace: fp.TraceDir, Step: fp.Steps}
	clock := parent.clock
	if clock.Virtual {
		clock.Advances = map[int]time.Duration{}
		for _, st := range steps {
			if st.Result != nil {
				clock.Advances[st.Step] = time.Duration(st.Result.ClockAdvanceMS * float64(time.Millisecond))
			}
		}
	}
	errs := make([]*api.Error, len(forks))
	var wg sync.WaitGroup
	for i, f := range forks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.mu.Lock()
			f.forkedFrom, f.forkClock = origin, &clock
			f.mu.Unlock()
			if aerr := f.open(s.base, nil); aerr != nil {
				errs[i] = aerr
				return
			}
			errs[i] = f.replayFork(s.base, steps, src.Dir, fp, !clock.Virtual)
		}()
	}
	wg.Wait()
	// The first divergence is the answer; else the first error.
	var first *api.Error
	for _, e := range errs {
		switch {
		case e == nil:
		case first == nil, e.Code == api.CodeForkDiverged && first.Code != api.CodeForkDiverged:
			first = e
		}
	}
	if first != nil {
		if len(forks) > 1 {
			first.Message += fmt.Sprintf(" (no fork is kept: all %d are closed)", len(forks))
		}
		return nil, first
	}
	ok = true
	resp := &api.ForkResponse{Fork: environment.ForkReplay, ReadyMS: float64(time.Since(t0).Microseconds()) / 1000}
	for _, f := range forks {
		resp.Environments = append(resp.Environments, f.describe())
	}
	s.logf("environment %s: forked at step %d into %d in %v", parent.id, fp.Steps, len(forks), time.Since(t0).Round(time.Millisecond))
	return resp, nil
}

// reserveForks makes count environments like parent, holding the
// token's slots for them; too many for the token is an error and
// nothing is reserved.
func (s *Server) reserveForks(parent *env, count int) ([]*env, *api.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, apiError(api.CodeShuttingDown, "the server is shutting down")
	}
	n := 0
	for _, other := range s.envs {
		if other.owner == parent.owner {
			n++
		}
	}
	if parent.removed { // closed since it was looked up: its inputs too
		return nil, apiError(api.CodeNotFound, "environment %s is closed", parent.id)
	}
	if n+count > s.o.MaxEnvironments {
		return nil, apiError(api.CodeTooManyEnvironments, "a fork into %d: this token holds %d live environments and may hold %d (close some first)", count, n, s.o.MaxEnvironments)
	}
	parent.mu.Lock()
	task, mode := parent.task, parent.resetMode
	parent.mu.Unlock()
	forks := make([]*env, 0, count)
	for range count {
		f := &env{id: "env-" + randomID(6), owner: parent.owner, srv: s, created: time.Now(), lastSeen: time.Now(),
			state: api.StateStarting, closed: make(chan struct{}), log: session.NewEventLog(eventLogBytes),
			appName: parent.appName, bundle: parent.bundle, upload: parent.upload, collect: parent.collect,
			grader: parent.grader, policy: parent.policy, backend: parent.backend, cfg: parent.cfg,
			maxSteps: parent.maxSteps, timeout: parent.timeout, settle: parent.settle, clock: parent.clock,
			actor: parent.actor, client: parent.client, task: task, resetMode: mode,
			inputs: parent.inputs, inputUploads: parent.inputUploads}
		f.approvals.By = policy.ApproveAPI
		if f.upload != nil {
			f.upload.inUse++
		}
		// The parent's inputs, staged into the fork's sandboxes as into
		// the parent's: held (they and their uploads) until the last of
		// the parent and its forks is removed.
		if f.inputs != nil {
			f.inputs.refs++
		}
		for _, u := range f.inputUploads {
			u.inUse++
		}
		s.envs[f.id] = f
		forks = append(forks, f)
	}
	return forks, nil
}

// closeForks closes forks that will not be kept, and waits until their
// sandboxes are gone.
func (s *Server) closeForks(forks []*env) {
	end := session.End{Outcome: trace.Interrupted, Reason: trace.ReasonClosed, Message: "the fork failed: no fork is kept"}
	var wg sync.WaitGroup
	for _, f := range forks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.closeEnv(f, end)
		}()
	}
	wg.Wait()
}

// replayFork replays the parent's steps into the fork's first episode,
// comparing each screen with the parent's recorded one, and the screen
// after the last with fp's. wall: the actions keep the recorded
// intervals between them.
func (e *env) replayFork(ctx context.Context, steps []trace.Step, dir string, fp session.ForkPoint, wall bool) *api.Error {
	sess, ep, aerr := e.current()
	if aerr != nil {
		return aerr
	}
	rules := replay.DefaultRules()
	diverged := func(step int, format string, args ...any) *api.Error {
		ae := apiError(api.CodeForkDiverged, "fork %s of environment %s diverged at step %d: %s", e.id, fp.RunID, step, fmt.Sprintf(format, args...))
		ae.Step = step
		ae.Trace = e.describe().Trace
		return ae
	}
	failed := func(step int, err error) *api.Error {
		var ee *session.EndedError
		if errors.As(err, &ee) {
			return diverged(step, "the fork's episode ended (%s)", ee.End.String())
		}
		return apiError(api.CodeEnvironment, "fork %s at step %d: %v", e.id, step, err)
	}
	var lastRec float64
	var lastSent time.Time
	first, firstMsg := 0, "" // the first step whose screen differed from the parent's recording
	for _, st := range steps {
		obs, err := sess.Observe(ctx)
		if err != nil {
			return failed(st.Step, err)
		}
		if obs.Ended != nil {
			return diverged(st.Step, "the fork's episode ended (%s)", obs.Ended.String())
		}
		if obs.Step != st.Step {
			return apiError(api.CodeInternal, "fork %s: observed step %d, replaying step %d", e.id, obs.Step, st.Step)
		}
		// A screen unlike the parent's recorded one is noted, not yet
		// an error: either screenshot may have caught the app mid-draw
		// (a step's screenshot waits for no redraw unless the
		// environment settles). The first such step is the one named
		// when the screen after the replay differs.
		if msg := compareRecorded(obs.Observation, st.Observation, dir, rules); msg != "" && first == 0 {
			first, firstMsg = st.Step, msg
		}
		if st.Action == nil {
			return apiError(api.CodeInternal, "fork %s: the parent's step %d has no recorded action", e.id, st.Step)
		}
		a := *st.Action
		if p := st.Policy; p != nil && !p.Allowed {
			// Not performed in the parent: nor here (a wait keeps the
			// steps in line, as a replay does).
			a = action.Action{Kind: action.Wait, MS: 1}
		}
		if wall && !lastSent.IsZero() {
			d := time.Until(lastSent.Add(time.Duration((st.TMS - lastRec) * float64(time.Millisecond))))
			if d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return failed(st.Step, ctx.Err())
				}
			}
		}
		lastRec, lastSent = st.TMS, time.Now()
		actor := st.Actor
		if actor == "" {
			actor = e.actor
		}
		res, err := sess.Act(ctx, session.Step{Actor: actor, Action: a,
			Decision: &trace.Decision{Message: fmt.Sprintf("fork: step %d of %s replayed", st.Step, fp.RunID)}})
		if err != nil {
			return failed(st.Step, err)
		}
		e.stepped(ep, res.Step)
		if res.Ended != nil {
			e.ended(ep, res.Ended)
			return diverged(st.Step, "the step ended the fork's episode (%s)", res.Ended.String())
		}
	}
	// The screen after the replay, as it rests, against the parent's now:
	// looks 50 ms apart until it matches, or it has not changed for
	// session.ForkStill, or session.ForkSettle has passed.
	deadline := time.Now().Add(session.ForkSettle)
	var prev uint64
	var since time.Time // when the screen last changed
	for n := 0; ; n++ {
		obs, err := sess.Observe(ctx)
		if err != nil {
			return failed(fp.Steps+1, err)
		}
		if obs.Ended != nil {
			return diverged(fp.Steps+1, "the fork's episode ended (%s)", obs.Ended.String())
		}
		if obs.Screen == nil {
			return diverged(fp.Steps+1, "the fork has no screenshot to compare")
		}
		d, same := compareNow(fp, obs.Observation, rules)
		if same {
			if first != 0 {
				e.srv.logf("fork %s of environment %s: step %d's screen differed from the parent's recording (%s), the screen after the replay matches its screen now", e.id, fp.RunID, first, firstMsg)
			}
			return nil
		}
		now := time.Now()
		if n == 0 || obs.Screen.Hash != prev {
			since = now
		}
		if now.Sub(since) >= session.ForkStill || now.After(deadline) {
			if first != 0 {
				return diverged(first, "%s; and its screen after the replay differs from the parent's screen now: %s", firstMsg, d)
			}
			return diverged(fp.Steps+1, "its screen after the replay differs from the parent's screen now: %s", d)
		}
		prev = obs.Screen.Hash
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return failed(fp.Steps+1, ctx.Err())
		}
	}
}

// compareNow compares the fork's screen after the replay with the
// parent's at the fork point: whether they match by the rules, and how
// they differ.
func compareNow(fp session.ForkPoint, got *observe.Observation, rules replay.Rules) (replay.Diff, bool) {
	if got.Screen.Hash == fp.Frame.Hash && got.Screen.Width == fp.Frame.Width && got.Screen.Height == fp.Frame.Height {
		return replay.Diff{}, true
	}
	at := regions(fp.State.Cursor, got.Cursor, fp.State.Windows, got.Windows)
	d := replay.Compare(fp.Frame.Image(), got.Screen.Image(), rules, at)
	return d, !d.Diverged(rules)
}

// compareRecorded compares a replayed observation with the parent's
// recorded one: "" when they match by the rules (or there is nothing to
// compare), else what differs.
func compareRecorded(got *observe.Observation, rec *trace.Observation, dir string, rules replay.Rules) string {
	if rec == nil || got == nil || got.Screen == nil || rec.Screenshot == "" {
		return ""
	}
	if rec.Running != got.Running {
		if got.Running {
			return "the app had exited in the parent but runs in the fork"
		}
		return "the app ran in the parent but has exited in the fork"
	}
	if trace.FrameHash(got.Screen.Hash) == rec.FrameHash && got.Screen.Width == rec.Width && got.Screen.Height == rec.Height {
		return ""
	}
	want, err := replay.LoadTracePNG(dir, rec.Screenshot)
	if err != nil {
		return "" // not encoded yet: the last screen is compared all the same
	}
	at := regions(rec.Cursor, got.Cursor, rec.Windows, got.Windows)
	if d := replay.Compare(want, got.Screen.Image(), rules, at); d.Diverged(rules) {
		return "its screen differs from the parent's: " + d.String()
	}
	return ""
}

// regions are the pointers and windows of two observations compared.
func regions(c1, c2 action.Point, w1, w2 []observe.Window) replay.Regions {
	at := replay.Regions{Cursors: []image.Point{{c1.X, c1.Y}, {c2.X, c2.Y}}}
	for _, ws := range [][]observe.Window{w1, w2} {
		for _, w := range ws {
			at.Windows = append(at.Windows, image.Rect(w.X, w.Y, w.X+w.Width, w.Y+w.Height))
		}
	}
	return at
}
