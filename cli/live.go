package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/codegirl-games/agentbox/live"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

// The live page (--live) of run, eval and serve.

// defaultLiveAddr is --live without an address: a free loopback port.
const defaultLiveAddr = "127.0.0.1:0"

// humanAgent is --agent human: no agent, a person drives at the live page.
const humanAgent = "human"

// liveFlag is --live[=ADDR].
type liveFlag struct{ addr string }

func (l *liveFlag) register(fl *pflag.FlagSet, what string) {
	fl.StringVar(&l.addr, "live", "", "serve the live page of "+what+" on a loopback ADDR (--live alone: a free port; --live=127.0.0.1:8471): watch it in a browser and take control")
	fl.Lookup("live").NoOptDefVal = defaultLiveAddr
}

// start listens (before anything else starts, so a busy port is a usage
// error) and prints the page's addresses; nil without --live.
func (l liveFlag) start(stderr io.Writer, title string, grid bool) (*live.Server, error) {
	if l.addr == "" {
		return nil, nil
	}
	srv := live.New(live.Options{Title: title, Grid: grid, Log: stderr})
	if err := srv.Listen(l.addr); err != nil {
		return nil, usageErrorf("--live: %v", err)
	}
	fmt.Fprintf(stderr, "agentbox: live page: %s\n", srv.URL())
	fmt.Fprintf(stderr, "agentbox: live page, read-only: %s\n", srv.ReadOnlyURL())
	return srv, nil
}

// stopLive ends every page's session (the run is over).
func stopLive(srv *live.Server) {
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Close(ctx)
}

// watch makes a view of a session about to run and hooks it to cfg: the
// view hears its events; opened is to be given the session once it is
// open (a Loop's Opened), finish the run's result. Without a server it
// does nothing.
func watch(srv *live.Server, info live.Info, cfg *session.Config) (opened func(*session.Session), finish func(session.Result)) {
	if srv == nil {
		return nil, func(session.Result) {}
	}
	v := srv.Add(info)
	cfg.Listener = chain(cfg.Listener, v.Listen)
	if _, ok := cfg.Approver.(liveApprover); ok {
		cfg.Approver = v.Approver() // --approve live: this view's page answers
	}
	dir := cfg.TraceDir
	return func(s *session.Session) {
		v.Open(s)
		// The dashboard links the running trace to its view (read-only);
		// the trace's writer removes the address when the run ends.
		if dir != "" {
			_ = trace.WriteLive(dir, v.ReadOnlyURL())
		}
	}, v.Finish
}

// chain tells both listeners.
func chain(a, b func(session.Event)) func(session.Event) {
	if a == nil {
		return b
	}
	return func(e session.Event) { a(e); b(e) }
}
