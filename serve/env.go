package serve

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/named"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/serve/api"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

var randRead = rand.Read

// eventLogBytes bounds what an environment keeps of its events for its
// event streams.
const eventLogBytes = 1 << 20

// env is one environment: a sequence of episodes, each a session.
type env struct {
	id, owner string
	srv       *Server
	appName   string
	bundle    *app.Bundle
	upload    *upload // nil for a registered app

	// lookAtLaunch: the next episode's session takes its first
	// screenshot with the launch (a reset that answers with an
	// observation: session.Config.LookAtLaunch).
	lookAtLaunch bool

	// inputs are the task's files, staged into every episode's sandbox
	// (shared with the environment's forks, which stage the same);
	// inputUploads the uploads they come from (held in use); collect what
	// each episode's end copies out (docs/tasks.md).
	inputs       *inputSet
	inputUploads []*upload
	collect      app.Collect
	grader       session.Grader // nil: the request named no grade
	policy       *policy.Policy // nil: the request named no policy
	approvals    policy.Waiting // the policy's asks waiting for an answer (By: api)
	// mcpAsks, in an MCP client's environment, answers the asks of the
	// actor mcp (the client, by elicitation).
	mcpAsks policy.Approver
	backend environment.Backend
	cfg     environment.Config
	// hold holds the named sandbox (cfg.Name) for the environment's life,
	// lent to each episode's sandbox in turn; nil for an unnamed one.
	hold     *named.Hold
	maxSteps int
	timeout  time.Duration
	settle   session.Settle
	clock    session.Clock // the app's clock (CreateRequest.Clock)
	created  time.Time
	log      *session.EventLog
	// actor drives its episodes (trace.ActorRemote, or trace.ActorMCP for
	// an MCP session's), named client when it said who it is.
	actor, client string

	mu       sync.Mutex
	task     string
	state    string
	sess     *session.Session
	episode  int
	runID    string
	trace    string
	steps    int
	end      *api.End
	files    []api.File // collected when the latest episode ended
	refused  []api.RefusedFile
	lastSeen time.Time
	conns    int
	closed   chan struct{}   // closed once the environment is closed
	behind   []chan struct{} // each closed once an episode a reset ended is closed
	removed  bool
	closing  bool
	// resetMode is how a reset starts the next episode (api.ResetFresh,
	// api.ResetRelaunch); relaunched says the running episode's sandbox
	// was reset in place; kept is the sandbox an ended episode's
	// relaunch keeps for the next one (relaunch mode).
	resetMode  string
	relaunched bool
	kept       *keptSandbox
	// forkedFrom is the parent of a fork (fork.go), and forkClock the
	// clock of its first episode (the parent's, moved by the parent's
	// recorded amounts): its later episodes are its own.
	forkedFrom *api.ForkedFrom
	forkClock  *session.Clock
}

// inputSet is a task's opened inputs, shared by the environment that
// loaded them and its forks (each fork stages the very files its parent's
// episodes stage): closed when the last of them is removed. refs is
// guarded by Server.mu.
type inputSet struct {
	in   *app.Inputs
	refs int
}

// get is the inputs (nil for none).
func (s *inputSet) get() *app.Inputs {
	if s == nil {
		return nil
	}
	return s.in
}

// keptSandbox is a sandbox being reset in place for the next episode:
// prep, or err, once done is closed.
type keptSandbox struct {
	done chan struct{}
	prep *session.Prepared
	err  error
}

// closeKept removes a sandbox kept for a relaunch that will not come (the
// environment closes, the reset is fresh), in the background, tracked.
func (e *env) closeKept(k *keptSandbox) {
	remove := func() {
		<-k.done
		if k.prep != nil {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(e.srv.base), session.DefaultTeardownTimeout)
			defer cancel()
			_ = k.prep.Env.Close(ctx)
		}
	}
	done, ok := e.srv.track()
	if !ok {
		remove()
		return
	}
	go func() {
		defer done()
		remove()
	}()
}

// touch renews the lease.
func (e *env) touch() {
	e.mu.Lock()
	e.lastSeen = time.Now()
	e.mu.Unlock()
}

// maxConnections bounds an environment's open WebSockets and event
// streams together.
const maxConnections = 16

// attach counts a connection (a WebSocket, an event stream) while it is
// open: the lease does not run out meanwhile. Call the function it
// returns when the connection ends. An environment holds at most
// maxConnections.
func (e *env) attach() (detach func(), _ *api.Error) {
	e.mu.Lock()
	if e.conns >= maxConnections {
		e.mu.Unlock()
		return nil, apiError(api.CodeTooManyConnections, "environment %s has %d connections open, the most it may", e.id, maxConnections)
	}
	e.conns++
	e.lastSeen = time.Now()
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		e.conns--
		e.lastSeen = time.Now()
		e.mu.Unlock()
	}, nil
}

// expired reports whether the lease ran out.
func (e *env) expired(now time.Time, lease time.Duration) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	seen := e.lastSeen
	if e.sess != nil && e.state == api.StateRunning {
		if e.sess.Control().Human {
			return false // a person has control at the live page: the client waits for them
		}
		// A step in flight is use, however long it takes (a wait of two
		// minutes, a slow app on a busy machine): the lease runs from
		// its end. (It ran from the request's start, and closed an
		// environment in the middle of its step: TestLeaseLongStep.)
		busy, last := e.sess.Activity()
		if busy {
			return false
		}
		if last.After(seen) {
			seen = last
		}
	}
	return !e.closing && e.state != api.StateStarting && e.conns == 0 && now.Sub(seen) > lease
}

// describe is the environment as the API shows it.
func (e *env) describe() api.Environment {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.cfg.Resources
	d := api.Environment{
		ID: e.id, App: e.appName, Backend: e.backend.Name(), Screen: e.cfg.Screen,
		Limits: api.Limits{CPUs: r.CPUs, MemoryMB: r.MemoryMB, PIDs: r.PIDs, TmpfsMB: r.TmpfsMB},
		Task:   e.task, State: e.state, Episode: e.episode, RunID: e.runID, Trace: e.trace, Steps: e.steps,
		ResetMode: e.resetMode, Relaunched: e.relaunched, ForkedFrom: e.forkedFrom,
		End: e.end, Created: e.created, Connections: e.conns,
		Files: e.files, FilesRefused: e.refused,
	}
	if e.conns == 0 && e.state != api.StateClosed {
		t := e.lastSeen.Add(e.srv.o.Lease)
		d.LeaseExpires = &t
	}
	return d
}

// current is the running episode's session, or an API error saying why
// there is none.
func (e *env) current() (*session.Session, int, *api.Error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch e.state {
	case api.StateRunning:
		return e.sess, e.episode, nil
	case api.StateStarting:
		return nil, 0, apiError(api.CodeBusy, "environment %s is starting an episode", e.id)
	case api.StateClosed:
		return nil, 0, apiError(api.CodeNotFound, "environment %s is closed", e.id)
	}
	err := apiError(api.CodeEpisodeEnded, "episode %d of environment %s has ended (%s: %s); reset it for another, or close it", e.episode, e.id, e.end.Reason, e.end.Message)
	err.End = e.end
	return nil, 0, err
}

// ended records that the episode ended and closes its session in the
// background (its sandbox removed, its trace finalised); a reset or a
// close waits for that. An episode that collects files is closed before
// ended returns, which returns the closed session's result (nil
// otherwise, or when another call ended it).
func (e *env) ended(episode int, end *session.End) *session.Result {
	e.mu.Lock()
	if e.episode != episode || e.state != api.StateRunning {
		e.mu.Unlock()
		return nil
	}
	e.state = api.StateEnded
	e.end = apiEnd(end)
	sess := e.sess
	var kept *keptSandbox
	if e.resetMode == api.ResetRelaunch && !e.closing {
		kept = &keptSandbox{done: make(chan struct{})}
		e.kept = kept
	}
	e.mu.Unlock()
	done, ok := e.srv.track()
	if !ok { // shutting down: the shutdown closes it (Close waits for the first)
		if kept != nil {
			kept.err = errors.New("the server is shutting down")
			close(kept.done)
		}
		return nil
	}
	if kept != nil {
		// The sandbox is kept and reset in place for the next episode
		// (relaunch mode), the episode closed as by Close.
		var res session.Result
		relaunch := func() {
			defer close(kept.done)
			r, p, err := sess.Relaunch(e.srv.base, *end)
			kept.prep, kept.err = p, err
			e.sessionClosed(sess, r)
			e.graded(episode, r.Grade)
			res = r
		}
		if !e.collect.Empty() { // the step that ended it answers with the files
			defer done()
			relaunch()
			return &res
		}
		go func() {
			// The sandbox is handed on once it is reset in place; the
			// trace is finalised after (a reset closes the session
			// behind the next episode, and a close waits for it).
			defer done()
			p, err := sess.RelaunchBehind(e.srv.base, *end)
			kept.prep, kept.err = p, err
			close(kept.done)
			r := sess.Close(e.srv.base, *end) // waits for the close RelaunchBehind began
			e.sessionClosed(sess, r)
			e.graded(episode, r.Grade)
		}()
		return nil
	}
	if !e.collect.Empty() {
		// The files are collected before the sandbox goes: the step that
		// ended the episode answers with them, so it waits for the close.
		defer done()
		r := sess.Close(e.srv.base, *end)
		e.sessionClosed(sess, r)
		e.graded(episode, r.Grade)
		return &r
	}
	go func() {
		defer done()
		r := sess.Close(e.srv.base, *end)
		e.graded(episode, r.Grade)
	}()
	return nil
}

// graded adds the grade of episode's closed session to its end, if it is
// still the environment's last (a reset has not begun another).
func (e *env) graded(episode int, g *trace.Grade) {
	if g == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.episode == episode && e.end != nil && e.end.Grade == nil {
		end := *e.end
		end.Grade = apiGrade(g)
		e.end = &end
	}
}

// endGrade is the grade of the environment's last episode's end, once
// it has one.
func (e *env) endGrade() *api.Grade {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.end == nil {
		return nil
	}
	return e.end.Grade
}

// sessionClosed records what the closed session of the latest episode collected.
func (e *env) sessionClosed(sess *session.Session, r session.Result) {
	files := make([]api.File, 0, len(r.Files))
	for _, f := range r.Files {
		files = append(files, api.File{Path: f.Path, Size: f.Size, SHA256: f.SHA256})
	}
	var refused []api.RefusedFile
	for _, f := range r.FilesRefused {
		refused = append(refused, api.RefusedFile{Path: f.Path, Reason: f.Reason})
	}
	e.mu.Lock()
	if e.sess == sess {
		e.files, e.refused = files, refused
	}
	e.mu.Unlock()
}

// collected is what the latest episode's end collected.
func (e *env) collected() []api.File {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.files
}

// stepped counts a recorded step.
func (e *env) stepped(episode, step int) {
	e.mu.Lock()
	if e.episode == episode && step > e.steps {
		e.steps = step
	}
	e.mu.Unlock()
}

// open starts the next episode: a new run ID and trace, a sandbox, the
// app launched and ready. On failure the episode's trace is
// finalised and the error says how it ended.
//
// prep, when set, is the previous episode's sandbox reset in place (a
// relaunch); else the pool's or a new one.
func (e *env) open(ctx context.Context, prep *session.Prepared) *api.Error {
	e.mu.Lock()
	e.episode++
	n := e.episode
	e.state = api.StateStarting
	e.end = nil
	e.files, e.refused = nil, nil
	e.steps = 0
	e.runID = e.srv.o.RunID(e.appName)
	e.trace = filepath.Join(e.srv.o.Out, e.runID)
	runID, dir, task := e.runID, e.trace, e.task
	clock := e.clock
	look := e.lookAtLaunch
	e.lookAtLaunch = false
	var forked *trace.ForkOrigin
	if n == 1 && e.forkedFrom != nil {
		f := e.forkedFrom
		forked = &trace.ForkOrigin{Run: f.RunID, Trace: f.Trace, Env: f.Env, Step: f.Step}
		if e.forkClock != nil {
			clock = *e.forkClock
		}
	}
	e.mu.Unlock()

	e.log.Add(session.Event{Kind: session.EventEpisode, Episode: n, RunID: runID, Trace: dir})
	e.srv.logf("environment %s: episode %d (%s): starting %s on %s", e.id, n, runID, e.appName, e.backend.Name())
	s := e.srv
	cfg := session.Config{
		RunID:        runID,
		Backend:      e.backend,
		Env:          e.cfg,
		App:          e.bundle,
		AgentInfo:    e.agentInfo(n),
		Actor:        e.actor,
		Task:         task,
		Inputs:       e.inputs.get(),
		Collect:      e.collect,
		Grader:       e.grader,
		Policy:       e.policy,
		Approver:     e.approver(),
		Vault:        s.o.Vault,
		MaxSteps:     e.maxSteps,
		Timeout:      e.timeout,
		StartTimeout: s.o.StartTimeout,
		ReadyTimeout: s.o.ReadyTimeout,
		Settle:       e.settle,
		LookAtLaunch: look,
		Clock:        clock,
		ForkedFrom:   forked,
		MaxRate:      s.o.MaxRate,
		TraceDir:     dir,
		LogCap:       s.o.LogCap,
		Indexer:      s.o.Indexer,
		Progress:     prefixWriter{s, "environment " + e.id + ": "},
		Listener:     e.listener(n),
	}
	var opened func(*session.Session)
	if s.o.Watch != nil {
		opened = s.o.Watch(e.id, n, &cfg)
	}
	switch {
	case prep != nil:
		cfg.Prepared = prep
	case s.pool != nil && e.cfg.Name == "": // a warm sandbox has its own home, not the name's
		s.pool.TakeWait(ctx, &cfg) // a warm sandbox when its key has one (or one under way); else Open creates one cold
	}
	e.mu.Lock()
	e.relaunched = prep != nil
	e.mu.Unlock()
	sess, err := session.Open(ctx, cfg)
	if err == nil && opened != nil {
		opened(sess)
	}
	var se *session.StartError
	switch {
	case errors.As(err, &se):
		end := &session.End{Outcome: se.Result.Outcome, Reason: se.Result.Reason, Message: se.Result.Message}
		e.mu.Lock()
		e.state, e.end = api.StateEnded, apiEnd(end)
		e.mu.Unlock()
		code := api.CodeEnvironment
		switch se.Result.Reason {
		case trace.ReasonAppStart, trace.ReasonNoWindow:
			code = api.CodeAppStart
		case trace.ReasonSignal:
			code = api.CodeShuttingDown
		}
		ae := apiError(code, "episode %d of environment %s did not start: %s", n, e.id, se.Result.Message)
		ae.End, ae.Trace = apiEnd(end), dir
		return ae
	case err != nil:
		e.mu.Lock()
		e.state = api.StateEnded
		e.end = &api.End{Outcome: string(trace.Error), Reason: trace.ReasonEnvironment, Message: err.Error()}
		e.mu.Unlock()
		return apiError(api.CodeInternal, "episode %d of environment %s: %v", n, e.id, err)
	}
	e.mu.Lock()
	closing := e.closing
	e.sess, e.state = sess, api.StateRunning
	if closing {
		e.state = api.StateClosed
	}
	e.lastSeen = time.Now()
	e.mu.Unlock()
	if closing { // closed while it started (the server shuts down)
		end := session.End{Outcome: trace.Interrupted, Reason: trace.ReasonSignal, Message: "the server shut down"}
		sess.Close(ctx, end)
		return apiError(api.CodeShuttingDown, "environment %s was closed while it started: the server is shutting down", e.id)
	}
	return nil
}

// agentInfo is who drives episode n, as its trace records it.
func (e *env) agentInfo(n int) trace.AgentInfo {
	opts := map[string]string{"environment": e.id, "episode": strconv.Itoa(n), "owner": ownerLabel(e.owner)}
	if e.client != "" {
		opts["client"] = e.client
	}
	return trace.AgentInfo{Name: e.actor, Options: opts}
}

// listener turns the session's events into the environment's.
func (e *env) listener(episode int) func(session.Event) {
	return func(ev session.Event) {
		ev.Episode = episode
		e.log.Add(ev)
	}
}

// finish closes the running episode's session, if one runs, with end,
// and waits for its teardown.
func (e *env) finish(ctx context.Context, end session.End) {
	e.mu.Lock()
	if k := e.kept; k != nil {
		e.kept = nil
		defer func() {
			<-k.done
			if k.prep != nil {
				tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), session.DefaultTeardownTimeout)
				defer cancel()
				_ = k.prep.Env.Close(tctx)
			}
		}()
	}
	sess := e.sess
	if e.state == api.StateRunning {
		// ended, and how, at once: a step or a look that comes while the
		// session closes is told this end (it found a nil end before
		// and panicked: TestMCPLease under -race)
		e.state, e.end = api.StateEnded, apiEnd(&end)
	}
	e.mu.Unlock()
	if sess == nil {
		return
	}
	r := sess.Close(ctx, end)
	e.sessionClosed(sess, r)
	e.mu.Lock()
	if e.end == nil || e.sess == sess {
		e.end = apiEnd(&session.End{Outcome: r.Outcome, Reason: r.Reason, Message: r.Message})
		e.end.Grade = apiGrade(r.Grade)
	}
	e.mu.Unlock()
}

// closeBehind closes the episode a reset ended, once the next one has
// started: its sandbox is removed (or, a pool's inside a loop of resets,
// its app stopped and the removal left to the pool: pool.Pool.release)
// and its trace finalised in the background (the shutdown and a close
// of the environment wait for it), so a reset costs the next episode's
// start only. Its last events (its end) may reach the event stream after
// the next episode's first, marked with its episode.
// At most maxBehind episodes are closed behind at once while the warm
// pool holds an idle sandbox, else one: a reset beyond them waits for the
// oldest.
func (e *env) closeBehind(sess *session.Session, end session.End) {
	most := 1
	if e.srv.pool != nil && e.srv.pool.Stats().Idle > 0 {
		most = maxBehind
	}
	e.mu.Lock()
	for len(e.behind) > 0 {
		live := e.behind[:0]
		for _, ch := range e.behind {
			select {
			case <-ch:
			default:
				live = append(live, ch)
			}
		}
		e.behind = live
		if len(live) < most {
			break
		}
		oldest := live[0]
		e.mu.Unlock()
		<-oldest
		e.mu.Lock()
	}
	e.mu.Unlock()
	done, ok := e.srv.track()
	if !ok { // shutting down: close it now
		sess.Close(e.srv.base, end)
		return
	}
	ch := make(chan struct{})
	e.mu.Lock()
	e.behind = append(e.behind, ch)
	e.mu.Unlock()
	go func() {
		defer done()
		defer close(ch)
		sess.Close(e.srv.base, end)
	}()
}

// maxBehind bounds the episodes of one environment closed behind its
// resets at once while the warm pool has an idle sandbox to hand out. One
// made every reset of a loop from a deep pool wait for the previous
// episode's removal (on Docker the daemon's 110 ms at best): the Docker
// loop from a pool of 22, p50 / p95 244–264 / 384–409 ms with one against
// 126–170 / 308–355 ms with four. With the pool drained (or none) the
// next episode waits for a create, and removals beside it slowed that
// create: the loop from a pool of 2, p95 0.78–0.80 s with one against
// 1.02–1.13 s with four, so then one it is.
const maxBehind = 4

// waitBehind waits for the episodes closed behind a reset, if any.
func (e *env) waitBehind() {
	e.mu.Lock()
	chs := append([]chan struct{}(nil), e.behind...)
	e.mu.Unlock()
	for _, ch := range chs {
		<-ch
	}
}

// apiEnd is an End as the API shows it.
func apiEnd(e *session.End) *api.End {
	if e == nil {
		return nil
	}
	return &api.End{Outcome: string(e.Outcome), Reason: e.Reason, Message: e.Message, Terminated: e.Terminated()}
}

// apiGrade is a grade as the API shows it (nil: none).
func apiGrade(g *trace.Grade) *api.Grade {
	if g == nil {
		return nil
	}
	a := &api.Grade{Outcome: g.Outcome, Score: g.Score, Message: g.Message, MS: g.MS}
	for _, c := range g.Checks {
		a.Checks = append(a.Checks, api.GradeCheck(c))
	}
	return a
}

// prefixWriter writes a session's progress lines to the server's log.
type prefixWriter struct {
	s      *Server
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	p.s.logMu.Lock()
	defer p.s.logMu.Unlock()
	fmt.Fprintf(p.s.o.Log, "agentbox serve: %s%s", p.prefix, bytes.TrimPrefix(b, []byte("agentbox: ")))
	return len(b), nil
}

var _ io.Writer = prefixWriter{}

// observation is a session's observation as the API shows it, with its
// image in the format asked for (none when the client's known hash is
// the frame's).
func observation(e *env, episode int, o *session.Observation, image, known string) (*api.Observation, error) {
	obs := &api.Observation{
		Env: e.id, Episode: episode, Step: o.Step, ElapsedMS: float64(o.Elapsed.Microseconds()) / 1000,
		Running: o.Running, Exit: o.Exit, Cursor: o.Cursor, Windows: o.Windows, Output: o.Output,
		Last: o.Last, Screenshot: o.Screenshot, Ended: apiEnd(o.Ended),
	}
	if obs.Windows == nil {
		obs.Windows = []observe.Window{}
	}
	if obs.Output == nil {
		obs.Output = []observe.LogLine{}
	}
	f := o.Screen
	if f == nil {
		obs.Frame.Format = api.ImageNone
		return obs, nil
	}
	obs.Frame = api.Frame{Width: f.Width, Height: f.Height, Hash: trace.FrameHash(f.Hash), Format: image}
	switch {
	case image == api.ImageNone:
	case known != "" && known == obs.Frame.Hash:
		obs.Frame.Unchanged = true
	case image == api.ImagePNG:
		data, err := f.PNG()
		if err != nil {
			return nil, fmt.Errorf("encode the screenshot: %w", err)
		}
		obs.Frame.Data = data
	case image == api.ImageRGBA:
		obs.Frame.Data = f.Pix
	}
	return obs, nil
}

// approver answers the environment's asks: the API (by the ask's ID), or
// in an MCP client's environment the client, for its own steps.
func (e *env) approver() policy.Approver {
	if e.mcpAsks == nil {
		return &e.approvals
	}
	return byActor{trace.ActorMCP: e.mcpAsks, "": &e.approvals}
}

// byActor routes an ask by the actor of its step ("": any other).
type byActor map[string]policy.Approver

// Approve implements policy.Approver.
func (b byActor) Approve(ctx context.Context, req policy.Request) (policy.Answer, error) {
	if a, ok := b[req.Actor]; ok {
		return a.Approve(ctx, req)
	}
	return b[""].Approve(ctx, req)
}
