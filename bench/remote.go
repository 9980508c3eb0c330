package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/client"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/owner"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/serve"
	"github.com/codegirl-games/agentbox/serve/api"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

// RemoteStats are the step's latencies through agentbox serve, against
// the same step in-process: a mouse move and the next observation, the
// trace written in each, at the default screen. The samples are taken in
// turn (one of each, then the next), so a busy moment weighs on all
// alike.
type RemoteStats struct {
	Screen observe.Screen
	// InProcess is session.Act + session.Observe, as the agent loop does.
	InProcess Stats
	// WebSocket is client.Env.Step over the WebSocket: one round trip,
	// the screen unchanged (the client has it: no pixels travel).
	WebSocket Stats
	// HTTP is the same step as one POST /act?observe=rgba.
	HTTP Stats
	// WebSocketFull sends the whole frame (raw RGBA) every step.
	WebSocketFull Stats
}

// remoteStep measures the step in-process, over the WebSocket and over
// HTTP, side by side.
func remoteStep(ctx context.Context, o Options, b *app.Bundle) (*RemoteStats, error) {
	screen := observe.DefaultScreen
	dir, err := owner.TempDir("bench-remote")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	// In-process: a session driven step by step, as a server drives it.
	s, err := session.Open(ctx, session.Config{
		RunID: benchID("bench-inprocess"), Backend: o.Backend, Env: environment.Config{Image: o.Image, Runtime: o.Runtime, Screen: screen},
		App: b, AgentInfo: trace.AgentInfo{Name: "bench"}, Actor: trace.ActorRemote,
		MaxSteps: 1 << 30, TraceDir: filepath.Join(dir, "inprocess"),
	})
	if err != nil {
		return nil, fmt.Errorf("in-process session: %w", err)
	}
	defer s.Close(context.WithoutCancel(ctx), session.End{Outcome: trace.Success, Reason: trace.ReasonDone, Message: "bench"})

	// The server, in this process, on loopback, with a bundle of its own:
	// it closes its apps when it shuts down, and Run's goes on to the
	// figures after this one. It is loaded from where b was.
	token := "bench-" + randomHex(16)
	sb, err := app.Load(b.Target, app.DefaultLimits)
	if err != nil {
		return nil, fmt.Errorf("loading the server's copy of %s: %w", b.Target, err)
	}
	srv, err := serve.New(serve.Options{
		Backends: []environment.Backend{o.Backend}, Apps: map[string]*app.Bundle{"mover": sb}, Tokens: []string{token},
		Env: environment.Config{Image: o.Image, Runtime: o.Runtime, Screen: screen}, Out: filepath.Join(dir, "served"),
		UploadDir: filepath.Join(dir, "uploads"), MaxEnvironments: 3, Log: io.Discard,
	})
	if err != nil {
		sb.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go srv.Serve(ln, "", "")
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	c, err := client.New("http://"+ln.Addr().String(), token)
	if err != nil {
		return nil, err
	}
	envs := map[string]*client.Env{}
	for _, name := range []string{"ws", "http", "wsfull"} {
		env, err := c.Create(ctx, api.CreateRequest{App: "mover"})
		if err != nil {
			return nil, fmt.Errorf("create an environment: %w", err)
		}
		env.Image = api.ImageRGBA
		switch name {
		case "http":
			env.Transport = client.HTTP
		case "wsfull":
			env.AlwaysImage = true
		}
		if _, _, err := env.Reset(ctx); err != nil {
			return nil, err
		}
		envs[name] = env
	}

	var in, ws, ht, full []time.Duration
	for i := 0; i < o.RemoteSamples+10; i++ {
		x, y := 10+(i*37)%(screen.Width-20), 10+(i*53)%(screen.Height-20)
		a := action.Action{Kind: action.MouseMove, X: &x, Y: &y}
		t := time.Now()
		if _, err := s.Act(ctx, session.Step{Action: a}); err != nil {
			return nil, fmt.Errorf("in-process: %w", err)
		}
		if _, err := s.Observe(ctx); err != nil {
			return nil, fmt.Errorf("in-process: %w", err)
		}
		d := time.Since(t)
		if i >= 10 {
			in = append(in, d)
		}
		for _, m := range []struct {
			env *client.Env
			out *[]time.Duration
		}{{envs["ws"], &ws}, {envs["http"], &ht}, {envs["wsfull"], &full}} {
			t := time.Now()
			obs, _, _, _, _, err := m.env.Step(ctx, a)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", m.env.Transport, err)
			}
			if obs.Screen == nil {
				return nil, fmt.Errorf("%s: no screen", m.env.Transport)
			}
			if i >= 10 {
				*m.out = append(*m.out, time.Since(t))
			}
		}
	}
	return &RemoteStats{Screen: screen, InProcess: summarize(in), WebSocket: summarize(ws), HTTP: summarize(ht), WebSocketFull: summarize(full)}, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
