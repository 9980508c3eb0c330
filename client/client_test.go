package client_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/client"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/docker"
	"github.com/codegirl-games/agentbox/internal/lockrank"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/serve"
	"github.com/codegirl-games/agentbox/serve/api"
	"github.com/codegirl-games/agentbox/trace"
)

func TestMain(m *testing.M) {
	lockrank.Enable() // session's lock order is checked under serve's use too
	code := m.Run()
	testenv.CleanupBuilds()
	os.Exit(code)
}

const token = "client-test-token-0123456789"

// moverDir builds the mover demo into an app directory.
func moverDir(t *testing.T) string {
	t.Helper()
	bin := testenv.Build(t, "./examples/mover")
	dir := t.TempDir()
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "mover"), data, 0o755)
	os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command": "mover", "window_title": "mover", "ready_output": "mover: ready", "ready_timeout": "30s"}`), 0o644)
	return dir
}

// server is a real agentbox serve in this process, on the Docker backend
// with the runtime image, serving the mover.
func server(t *testing.T) (*client.Client, string) {
	t.Helper()
	testenv.Require(t, testenv.Docker(), testenv.Image(testenv.RuntimeImage))
	b, err := environment.Lookup(docker.Name, environment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := moverDir(t)
	bundle, err := app.Load(dir, app.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	srv, err := serve.New(serve.Options{
		Backends: []environment.Backend{b}, Apps: map[string]*app.Bundle{"mover": bundle}, Tokens: []string{token},
		Env: environment.Config{GuestBinary: testenv.Build(t, "./cmd/agentbox")}, Out: out, StartTimeout: 2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln, "", "")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		srv.Shutdown(ctx)
	})
	c, err := client.New("http://"+ln.Addr().String(), token)
	if err != nil {
		t.Fatal(err)
	}
	return c, dir
}

// greenX is the mean x of the mover's green square, and its size.
func greenX(f *observe.Frame) (float64, int) {
	x, _, n := f.Centroid(func(r, g, b uint8) bool { return g > 180 && r < 80 && b < 80 })
	return x, n
}

// TestGymOverARealServer plays the mover through the gymnasium-shaped
// Env, over the WebSocket and over plain HTTP, with screens as raw pixels
// and as PNG: the square moves right while Right is held (measured in the
// pixels the client got), the app's output comes in Info, done
// terminates the episode, a reset starts a fresh one with a new trace,
// and each episode's trace is the one `agentbox run` writes.
func TestGymOverARealServer(t *testing.T) {
	c, _ := server(t)
	ctx := t.Context()
	for _, tt := range []struct{ transport, image string }{
		{client.WebSocket, api.ImageRGBA},
		{client.HTTP, api.ImagePNG},
	} {
		t.Run(tt.transport+"+"+tt.image, func(t *testing.T) {
			env, err := c.Create(ctx, api.CreateRequest{App: "mover", Task: "move right"})
			if err != nil {
				t.Fatal(err)
			}
			defer env.Close(context.WithoutCancel(ctx))
			env.Transport, env.Image = tt.transport, tt.image
			var traces []string
			for episode := 1; episode <= 2; episode++ {
				obs, info, err := env.Reset(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if info.Episode != episode || obs.Screen == nil || !obs.Running {
					t.Fatalf("reset %d: info %+v, running %v", episode, info, obs.Running)
				}
				traces = append(traces, info.Trace)
				x0, n := greenX(obs.Screen)
				if n == 0 {
					t.Fatalf("episode %d: no green square in the first screen", episode)
				}
				var output []string
				for _, a := range []action.Action{
					{Kind: action.KeyDown, Key: "Right"},
					{Kind: action.Wait, MS: 600},
					{Kind: action.KeyUp, Key: "Right"},
				} {
					o, reward, terminated, truncated, info, err := env.Step(ctx, a)
					if err != nil {
						t.Fatalf("%s: %v", a, err)
					}
					if reward != 0 || terminated || truncated || !info.Result.OK {
						t.Fatalf("%s: reward %v, terminated %v, truncated %v, %+v", a, reward, terminated, truncated, info.Result)
					}
					for _, l := range info.Output {
						output = append(output, l.Text)
					}
					obs = o
				}
				x1, _ := greenX(obs.Screen)
				if x1-x0 < 50 {
					t.Errorf("episode %d: the square moved %.1f px (%.1f → %.1f), want ≥ 50", episode, x1-x0, x0, x1)
				}
				if !strings.Contains(strings.Join(output, "\n"), "mover: key Right down") {
					t.Errorf("episode %d: the app's output did not come with the steps: %q", episode, output)
				}
				// An action outside the screen is not run, and not an error.
				_, _, _, _, info, err = env.Step(ctx, action.Action{Kind: action.Click, X: action.Int(5000), Y: action.Int(5)})
				if err != nil || !info.Invalid || info.Result.OK {
					t.Errorf("an off-screen click: %+v, %v", info, err)
				}
				last, _, terminated, truncated, info, err := env.Step(ctx, action.Action{Kind: action.Done, Message: "moved"})
				if err != nil || !terminated || truncated || info.Ended == nil || info.Ended.Outcome != "success" || last.Screen == nil {
					t.Fatalf("done: terminated %v, truncated %v, %+v, %v", terminated, truncated, info.Ended, err)
				}
				// Nothing more in an ended episode.
				_, _, _, _, _, err = env.Step(ctx, action.Action{Kind: action.Wait, MS: 1})
				var ae *api.Error
				if !errors.As(err, &ae) || ae.Code != api.CodeEpisodeEnded || ae.Status != 409 {
					t.Errorf("a step after done: %v", err)
				}
			}
			if traces[0] == traces[1] {
				t.Errorf("both episodes wrote %s", traces[0])
			}
			d, err := env.Close(ctx)
			if err != nil || d.State != api.StateClosed {
				t.Fatalf("close: %+v, %v", d, err)
			}
			for _, dir := range traces {
				tr, err := trace.Open(dir)
				if err != nil || tr.Incomplete || tr.Run.Outcome != trace.Success || len(tr.Steps) != 5 || tr.Final == nil || len(tr.Missing) > 0 {
					t.Fatalf("%s: %v, %+v", dir, err, tr)
				}
				for _, s := range tr.Steps {
					if s.Actor != trace.ActorRemote || s.Observation == nil || s.Result == nil {
						t.Errorf("%s step %d: actor %q, observation %v, result %v", dir, s.Step, s.Actor, s.Observation != nil, s.Result != nil)
					}
				}
			}
		})
	}
}

// TestUploadAndEvents: an app directory uploaded by the client runs like a
// registered one, and the events stream shows what happened.
func TestUploadAndEvents(t *testing.T) {
	c, dir := server(t)
	ctx := t.Context()
	up, err := c.Upload(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if up.Command != "mover" || up.Files != 2 {
		t.Errorf("upload: %+v", up)
	}
	env, err := c.Create(ctx, api.CreateRequest{Upload: up.ID, Screen: &observe.Screen{Width: 800, Height: 600}})
	if err != nil {
		t.Fatal(err)
	}
	obs, _, err := env.Reset(ctx)
	if err != nil || obs.Screen.Width != 800 {
		t.Fatalf("reset: %v", err)
	}
	if _, _, _, _, _, err := env.Step(ctx, action.Action{Kind: action.Key, Keys: "Right"}); err != nil {
		t.Fatal(err)
	}
	closed := make(chan api.Environment, 1)
	go func() {
		time.Sleep(500 * time.Millisecond)
		d, _ := env.Close(context.WithoutCancel(ctx))
		closed <- d
	}()
	var kinds []string
	var sawKey bool
	err = env.Events(ctx, 0, func(ev api.Event) error {
		kinds = append(kinds, ev.Kind)
		sawKey = sawKey || ev.Kind == "output" && strings.Contains(ev.Text, "key Right")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(kinds, " ")
	if !strings.HasPrefix(got, "episode ") || !strings.Contains(got, " step ") || !strings.Contains(got, " result ") || !strings.HasSuffix(got, "end") || !sawKey {
		t.Errorf("events: %s (key output seen: %v)", got, sawKey)
	}
	if d := <-closed; d.End == nil || d.End.Reason != trace.ReasonClosed {
		t.Errorf("closed: %+v", d)
	}
	if err := c.DeleteUpload(ctx, up.ID); err != nil {
		t.Error(err)
	}
	// Errors carry the server's code.
	_, err = c.Create(ctx, api.CreateRequest{App: "nope"})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeUnknownApp || ae.Status != 422 {
		t.Errorf("an unknown app: %v", err)
	}
	bad, _ := client.New(c.BaseURL(), "not-the-token-0123456789")
	if _, err := bad.Environments(ctx); !errors.As(err, &ae) || ae.Code != api.CodeUnauthorized {
		t.Errorf("a wrong token: %v", err)
	}
}
