package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/client"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/serve/api"
)

// TestNamedSandboxServe: an environment of agentbox serve (Docker, with a
// warm pool) named N: what its app wrote in the home in one episode is
// there in the next and in a new environment of N; while it lives, a
// second create of N is refused (409 sandbox_in_use) and so is an
// agentbox run --name N; closed, it lets N go. An unnamed environment of
// the same server starts with an empty home.
func TestNamedSandboxServe(t *testing.T) {
	testenv.Require(t, testenv.Docker(), testenv.Image(testenv.RuntimeImage))
	sbDir, err := os.MkdirTemp("", "agentbox-e2e-sandboxes-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sbDir) })
	t.Setenv("AGENTBOX_SANDBOXES", sbDir) // the server's and the run's below
	name := "e2e-serve-" + strings.ToLower(strings.ReplaceAll(time.Now().Format("150405.000"), ".", ""))
	t.Cleanup(func() { exec.Command("docker", "volume", "rm", "-f", "agentbox-home-"+name).Run() })
	app := countApp(t)
	s := startServe(t, "--backend", "docker", "--app", "count="+app, "--out", t.TempDir(), "--pool", "1")
	c, err := client.New(s.url, s.token)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	// episode ends the running episode with done and returns its count.txt.
	episode := func(env *client.Env) string {
		t.Helper()
		if _, _, err := env.Reset(ctx); err != nil {
			t.Fatalf("reset: %v\n%s", err, s.log())
		}
		_, _, terminated, _, info, err := env.Step(ctx, action.Action{Kind: action.Done})
		if err != nil || !terminated || len(info.Files) != 1 {
			t.Fatalf("done: terminated %v, files %+v, %v\n%s", terminated, info.Files, err, s.log())
		}
		data, err := env.File(ctx, "count.txt", 0)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}

	env, err := c.Create(ctx, api.CreateRequest{App: "count", Name: name})
	if err != nil {
		t.Fatalf("create of %s: %v\n%s", name, err, s.log())
	}
	if got := episode(env); got != "run\n" {
		t.Fatalf("episode 1: count.txt %q", got)
	}
	if got := episode(env); got != "run\nrun\n" { // a new sandbox, the name's home
		t.Fatalf("episode 2: count.txt %q, want the first episode's line and its own", got)
	}
	_, err = c.Create(ctx, api.CreateRequest{App: "count", Name: name})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != api.CodeSandboxInUse || ae.Status != 409 || !strings.Contains(ae.Message, env.ID()) {
		t.Fatalf("a second create of a held name: %v", err)
	}
	r := agentbox(t, "run", app, "--name", name, "--backend", "docker", "--script", writeScript(t, "task: count\nsteps:\n  - {action: wait, ms: 100}\n"))
	if out := r.stdout + r.stderr; r.code != 3 || !strings.Contains(out, "sandbox "+name+" is held by run "+env.ID()) {
		t.Fatalf("a run of a name an environment holds: %s", r)
	}
	if _, err := env.Close(context.WithoutCancel(ctx)); err != nil {
		t.Fatal(err)
	}

	env2, err := c.Create(ctx, api.CreateRequest{App: "count", Name: name})
	if err != nil {
		t.Fatalf("create of %s once the first environment closed: %v\n%s", name, err, s.log())
	}
	if got := episode(env2); got != "run\nrun\nrun\n" {
		t.Fatalf("a new environment of %s: count.txt %q", name, got)
	}
	env2.Close(context.WithoutCancel(ctx))

	plain, err := c.Create(ctx, api.CreateRequest{App: "count"})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(context.WithoutCancel(ctx))
	if got := episode(plain); got != "run\n" {
		t.Fatalf("an unnamed environment: count.txt %q", got)
	}
}
