package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/codegirl-games/agentbox/mcp"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/serve/api"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

// mcpPath is the MCP endpoint (streamable HTTP). It sits behind the same
// defences as the API: Host, Origin, the token.
const mcpPath = "/" + api.Version + "/mcp"

// mcpHandler serves MCP sessions: each drives one environment of its
// token's (created at its first launch, counted against the token's
// environments, leased like any other), with the actor "mcp".
func (s *Server) mcpHandler() http.Handler {
	return s.mcp.HTTPHandler(mcp.HTTPOptions{Owner: s.owner, SessionTimeout: s.o.MCPSessionTimeout})
}

// newMCP makes the server's MCP server.
func (s *Server) newMCP(version string) *mcp.Server {
	return mcp.New(mcp.Options{Version: version, Open: func(owner string, asks policy.Approver) mcp.Episodes {
		return &mcpEpisodes{s: s, owner: owner, asks: asks}
	}})
}

// mcpEpisodes are the episodes of one MCP session: those of the
// environment it created, or of a new one when it launches another app or
// its environment was closed (by the lease, by a DELETE).
type mcpEpisodes struct {
	s     *Server
	owner string
	asks  policy.Approver // the client's: the policy's asks of its steps

	mu sync.Mutex
	e  *env
	// base numbers the events of e's log after those of the environments
	// before it, so that read_output's points only grow; missed is the
	// point after the last output of those.
	base, missed int64
}

var _ mcp.Episodes = (*mcpEpisodes)(nil)

func (m *mcpEpisodes) env() *env {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.e
}

// Apps implements mcp.Episodes: the registered apps.
func (m *mcpEpisodes) Apps() []string { return m.s.info().Apps }

// Context implements mcp.Episodes: the server's.
func (m *mcpEpisodes) Context() context.Context { return m.s.base }

// Events implements mcp.Episodes: the environment's events.
func (m *mcpEpisodes) Events() mcp.Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := mcp.Log{Base: m.base, Missed: m.missed}
	if m.e != nil {
		l.Log = m.e.log
	}
	return l
}

// replace forgets the environment, closing it (unless it is closed) with
// end; m.mu is held.
func (m *mcpEpisodes) replace(end session.End) {
	m.s.closeEnv(m.e, end) // a closed one: at once
	last, output := lastSeq(m.e.log)
	if output > 0 {
		m.missed = m.base + output
	}
	m.base += last
	m.e = nil
}

// lastSeq is the number of a log's last event and of its last output or
// exit (0 for none).
func lastSeq(l *session.EventLog) (last, output int64) {
	now, cancel := context.WithCancel(context.Background())
	cancel()
	for {
		evs, _, _ := l.Read(now, last, 1024)
		if len(evs) == 0 {
			return last, output
		}
		for _, ev := range evs {
			if ev.Kind == session.EventOutput || ev.Kind == session.EventExit || ev.Kind == session.EventEpisode {
				output = ev.Seq
			}
		}
		last = evs[len(evs)-1].Seq
	}
}

// Launch implements mcp.Episodes: the first launch creates the
// environment; the next ones reset it (a fresh sandbox), or replace it
// when it is closed or another app is asked for.
func (m *mcpEpisodes) Launch(l mcp.Launch) (mcp.Episode, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.s
	if e := m.e; e != nil {
		e.mu.Lock()
		closed := e.closing || e.state == api.StateClosed
		e.mu.Unlock()
		if closed || l.App != "" && l.App != e.appName {
			m.replace(session.End{Outcome: trace.Interrupted, Reason: trace.ReasonClosed, Message: "the MCP client launched another app"})
		}
	}
	if e := m.e; e != nil {
		if _, aerr := s.reset(e, l.Task, "", api.ImageNone, "", nil); aerr != nil {
			return mcp.Episode{}, errors.New(aerr.Message)
		}
		return m.episode(e)
	}
	name := l.App
	if name == "" {
		apps := m.Apps()
		switch len(apps) {
		case 0:
			return mcp.Episode{}, errors.New("this server has no registered app (agentbox serve --app NAME=DIR)")
		case 1:
		default:
			return mcp.Episode{}, fmt.Errorf("name the app: one of %s", strings.Join(apps, ", "))
		}
		name = apps[0]
	}
	req := api.CreateRequest{App: name}
	if l.Task != nil {
		req.Task = *l.Task
	}
	e, aerr := s.createEnv(m.owner, req, trace.ActorMCP, l.Client, m.asks)
	if aerr != nil {
		return mcp.Episode{}, errors.New(aerr.Message)
	}
	m.e = e
	return m.episode(e)
}

// Current implements mcp.Episodes; each call renews the lease.
func (m *mcpEpisodes) Current() (mcp.Episode, error) {
	e := m.env()
	if e == nil {
		return mcp.Episode{}, mcp.ErrNotLaunched
	}
	e.touch()
	return m.episode(e)
}

// episode is e's running episode, or why none runs.
func (m *mcpEpisodes) episode(e *env) (mcp.Episode, error) {
	sess, n, aerr := e.current()
	if aerr != nil {
		msg := aerr.Message
		e.mu.Lock()
		if e.state == api.StateClosed && e.end != nil {
			msg = fmt.Sprintf("environment %s was closed (%s: %s)", e.id, e.end.Reason, e.end.Message)
		}
		e.mu.Unlock()
		return mcp.Episode{}, errors.New(msg + ". Call launch for a fresh episode.")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return mcp.Episode{Session: sess, Env: e.id, N: n, App: e.appName, RunID: e.runID, Trace: e.trace, Screen: e.cfg.Screen}, nil
}

// Ended implements mcp.Episodes: an environment that collects files
// closes the episode now, and the step's answer has its files and grade.
func (m *mcpEpisodes) Ended(ep mcp.Episode, end *session.End) *mcp.Closed {
	e := m.env()
	if e == nil {
		return nil
	}
	r := e.ended(ep.N, end)
	if r == nil {
		return nil
	}
	return &mcp.Closed{Files: r.Files, FilesRefused: r.FilesRefused, Grade: r.Grade}
}

// Close implements mcp.Episodes: the session ended (the client ended it,
// it timed out, the server shuts down); its environment is closed.
func (m *mcpEpisodes) Close() {
	e := m.env()
	if e == nil {
		return
	}
	end := session.End{Outcome: trace.Interrupted, Reason: trace.ReasonClosed, Message: "the MCP client's session ended"}
	m.s.mu.Lock()
	if m.s.closing {
		end = session.End{Outcome: trace.Interrupted, Reason: trace.ReasonSignal, Message: "the server shut down"}
	}
	m.s.mu.Unlock()
	m.s.closeEnv(e, end)
}
