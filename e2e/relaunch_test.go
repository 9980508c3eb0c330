package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/client"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/serve/api"
	"github.com/codegirl-games/agentbox/trace"
)

// dirtyApp builds e2e/testdata/dirty into an app directory whose input
// ~/input.txt holds "staged".
func dirtyApp(t *testing.T) string {
	t.Helper()
	bin := testenv.Build(t, "./e2e/testdata/dirty")
	dir := t.TempDir()
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"dirty":         string(data),
		"input.txt":     "staged\n",
		"data.txt":      "staged\n",
		"agentbox.json": `{"command": "dirty", "window_title": "dirty", "ready_output": "dirty: ready", "ready_timeout": "30s", "inputs": [{"from": "input.txt", "to": "~/input.txt"}]}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRelaunchLeavesNothing, on each real backend: an app that leaves
// all it can in its sandbox — files in the home, /tmp and /dev/shm, its
// input overwritten, a root-window property, the CLIPBOARD selection, a
// key held down, a window kept after its client ended, a daemon still
// running — is relaunched three times (reset mode relaunch, after a
// running episode and after an ended one); each new instance, in the same
// sandbox, sees none of it ("dirty: clean"), and is up with its window.
func TestRelaunchLeavesNothing(t *testing.T) {
	for _, backend := range []string{"docker", "local"} {
		t.Run(backend, func(t *testing.T) {
			if backend == "docker" {
				testenv.Require(t, testenv.Image(testenv.RuntimeImage))
			} else {
				requireLocal(t)
			}
			s := startServe(t, "--backend", backend, "--app", "dirty="+dirtyApp(t), "--out", t.TempDir())
			c, err := client.New(s.url, s.token)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			env, err := c.Create(ctx, api.CreateRequest{App: "dirty", ResetMode: api.ResetRelaunch})
			if err != nil {
				t.Fatalf("create: %v\n%s", err, s.log())
			}
			defer env.Close(context.WithoutCancel(ctx))
			var traces []string
			for episode := 1; episode <= 4; episode++ {
				obs, info, err := env.Reset(ctx)
				if err != nil {
					t.Fatalf("reset %d: %v\n%s", episode, err, s.log())
				}
				var out []string
				for _, l := range info.Output {
					out = append(out, l.Text)
				}
				said := strings.Join(out, "\n")
				if !strings.Contains(said, "dirty: clean") {
					t.Errorf("episode %d: the app found what an earlier one left:\n%s", episode, said)
				}
				var titles []string
				for _, w := range obs.Windows {
					titles = append(titles, w.Title)
				}
				if !obs.Running || len(titles) != 1 || titles[0] != "dirty" {
					t.Errorf("episode %d: running %v, windows %q; want the app's one window", episode, obs.Running, titles)
				}
				traces = append(traces, info.Trace)
				if episode == 2 { // end it: the next relaunch starts from an ended episode
					if _, _, terminated, _, _, err := env.Step(ctx, action.Action{Kind: action.Done, Message: "dirtied"}); err != nil || !terminated {
						t.Fatalf("done: %v, %v", terminated, err)
					}
				}
			}
			d, err := env.Close(ctx)
			if err != nil || !d.Relaunched {
				t.Fatalf("close: %+v, %v", d, err)
			}
			ids := map[string]bool{}
			for _, dir := range traces {
				tr := openTrace(t, dir)
				if tr.Incomplete || tr.Run.Outcome == "" {
					t.Errorf("%s: incomplete trace", dir)
				}
				ids[tr.Run.Env.ID] = true
				if len(tr.Run.Inputs) != 1 {
					t.Errorf("%s: inputs %+v, want the one restaged", dir, tr.Run.Inputs)
				}
				if tr.Run.Outcome != trace.Success && tr.Run.Outcome != trace.Interrupted {
					t.Errorf("%s: outcome %s (%s)", dir, tr.Run.Outcome, tr.Run.Message)
				}
			}
			if len(ids) != 1 {
				t.Errorf("the episodes ran in %d sandboxes, want 1: %v", len(ids), ids)
			}
			if code := s.stop(t); code != 0 {
				t.Errorf("serve exit %d:\n%s", code, s.log())
			}
		})
	}
}
