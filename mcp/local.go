package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

// LocalOptions configure a Local.
type LocalOptions struct {
	// Config is every episode's session: backend, sandbox, app, task,
	// bounds, progress. RunID, TraceDir, Listener, Actor and AgentInfo
	// are set per episode.
	Config session.Config
	// App names the app (its only entry in Apps).
	App string
	// Out is the directory of the episodes' traces, one per run ID.
	Out string
	// RunID names a new episode.
	RunID func() string
	// Context is what the episodes run under; cancel it with
	// session.ErrInterrupted on a signal.
	Context context.Context
	// Asks answers the policy's asks (Options.Open's asks); nil leaves
	// Config.Approver.
	Asks policy.Approver
}

// eventLogBytes bounds what Local keeps of its episodes' events for
// read_output (the trace keeps everything within its log cap).
const eventLogBytes = 1 << 20

// Local is the Episodes of agentbox mcp: one app's episodes, one at a
// time, run by this process on its backend, each with its own sandbox,
// run ID and trace directory under Out.
type Local struct {
	o        LocalOptions
	log      *session.EventLog
	progress io.Writer

	mu   sync.Mutex // held while an episode starts
	n    int
	task string
	cur  *session.Session
	ep   Episode
	last string // why no episode runs, once one ran
	wg   sync.WaitGroup
}

var _ Episodes = (*Local)(nil)

// NewLocal makes the episodes; none starts until the first launch.
func NewLocal(o LocalOptions) *Local {
	if abs, err := filepath.Abs(o.Out); err == nil {
		o.Out = abs // the traces' paths in answers mean the same wherever the client runs
	}
	p := o.Config.Progress
	if p == nil {
		p = io.Discard
	}
	return &Local{o: o, log: session.NewEventLog(eventLogBytes), progress: p, task: o.Config.Task}
}

// Apps implements Episodes.
func (l *Local) Apps() []string { return []string{l.o.App} }

// Context implements Episodes.
func (l *Local) Context() context.Context { return l.o.Context }

// Events implements Episodes.
func (l *Local) Events() Log { return Log{Log: l.log} }

// Launch implements Episodes.
func (l *Local) Launch(req Launch) (Episode, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if req.App != "" && req.App != l.o.App {
		return Episode{}, fmt.Errorf("no app %q here: this server runs %s", req.App, l.o.App)
	}
	if cur := l.cur; cur != nil {
		l.cur = nil
		l.finish(cur, l.ep, session.End{Outcome: trace.Interrupted, Reason: trace.ReasonClosed, Message: "the MCP client launched the app again"})
	}
	if err := context.Cause(l.o.Context); err != nil {
		return Episode{}, fmt.Errorf("not launched: %w", err)
	}
	if req.Task != nil {
		l.task = *req.Task
	}
	l.n++
	n := l.n
	cfg := l.o.Config
	cfg.RunID = l.o.RunID()
	cfg.TraceDir = filepath.Join(l.o.Out, cfg.RunID)
	cfg.Task = l.task
	cfg.Actor = trace.ActorMCP
	if l.o.Asks != nil {
		cfg.Approver = l.o.Asks
	}
	opts := map[string]string{"episode": strconv.Itoa(n)}
	if req.Client != "" {
		opts["client"] = req.Client
	}
	cfg.AgentInfo = trace.AgentInfo{Name: "mcp", Options: opts}
	cfg.Listener = func(ev session.Event) {
		ev.Episode = n
		l.log.Add(ev)
	}
	l.log.Add(session.Event{Kind: session.EventEpisode, Episode: n, RunID: cfg.RunID, Trace: cfg.TraceDir})
	fmt.Fprintf(l.progress, "agentbox mcp: episode %d (%s): starting %s\n", n, cfg.RunID, termsafe.Line(l.o.App))
	s, err := session.Open(l.o.Context, cfg)
	var se *session.StartError
	switch {
	case errors.As(err, &se):
		l.last = fmt.Sprintf("episode %d did not start (%s, %s): %s; its trace is %s.", n, se.Result.Outcome, se.Result.Reason, se.Result.Message, cfg.TraceDir)
		fmt.Fprintf(l.progress, "agentbox mcp: %s\n", termsafe.Text(l.last))
		return Episode{}, errors.New(l.last)
	case err != nil:
		l.last = fmt.Sprintf("episode %d did not start: %v", n, err)
		return Episode{}, errors.New(l.last)
	}
	l.cur = s
	l.ep = Episode{Session: s, N: n, App: l.o.App, RunID: cfg.RunID, Trace: cfg.TraceDir, Screen: cfg.Env.Screen.OrDefault()}
	return l.ep, nil
}

// Current implements Episodes.
func (l *Local) Current() (Episode, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.cur != nil:
		return l.ep, nil
	case l.n == 0:
		return Episode{}, ErrNotLaunched
	}
	return Episode{}, errors.New(l.last + " Call launch for a fresh episode.")
}

// Ended implements Episodes: an episode that collects files or is
// graded is closed now (the answer holds its files and grade), any other
// in the background.
func (l *Local) Ended(ep Episode, end *session.End) *Closed {
	l.mu.Lock()
	if l.cur == nil || ep.N != l.ep.N {
		l.mu.Unlock()
		return nil
	}
	s := l.cur
	l.cur = nil
	l.last = fmt.Sprintf("episode %d has ended (%s, %s): %s; its trace is %s.", ep.N, end.Outcome, end.Reason, end.Message, ep.Trace)
	l.wg.Add(1)
	l.mu.Unlock()
	if !l.o.Config.Collect.Empty() || l.o.Config.Grader != nil {
		defer l.wg.Done()
		return closedOf(l.finish(s, ep, *end))
	}
	go func() {
		defer l.wg.Done()
		l.finish(s, ep, *end)
	}()
	return nil
}

// finish closes an episode's session with end (unless it ended) and says
// how it ended.
func (l *Local) finish(s *session.Session, ep Episode, end session.End) session.Result {
	r := s.Close(l.o.Context, end)
	fmt.Fprintf(l.progress, "agentbox mcp: episode %d (%s): %s (%s): %s · trace: %s\n", ep.N, ep.RunID, r.Outcome, r.Reason,
		termsafe.Line(r.Message), termsafe.Line(r.TraceDir))
	if r.Grade != nil {
		fmt.Fprintf(l.progress, "agentbox mcp: episode %d: grade %s (score %g): %s\n", ep.N, r.Grade.Outcome, r.Grade.Score, termsafe.Line(r.Grade.Message))
	}
	return r
}

// Close implements Episodes: the running episode ends, as interrupted
// (by a signal, or because the client went away), and Close waits for
// every episode to be closed.
func (l *Local) Close() {
	l.mu.Lock()
	s, ep := l.cur, l.ep
	l.cur = nil
	l.mu.Unlock()
	if s != nil {
		end := session.End{Outcome: trace.Interrupted, Reason: trace.ReasonClosed, Message: "the MCP client disconnected"}
		if errors.Is(context.Cause(l.o.Context), session.ErrInterrupted) {
			end = session.End{Outcome: trace.Interrupted, Reason: trace.ReasonSignal, Message: "interrupted by a signal"}
		}
		l.finish(s, ep, end)
	}
	l.wg.Wait()
}
