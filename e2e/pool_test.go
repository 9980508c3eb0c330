package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/client"
	"github.com/codegirl-games/agentbox/environment/local"
	"github.com/codegirl-games/agentbox/eval"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/serve/api"
)

var poolRunIDs = regexp.MustCompile(`warm pool: .* run IDs are (\S+)-N`)

// waitPoolIdle polls GET /v1/server until the pool holds n idle
// sandboxes.
func waitPoolIdle(t *testing.T, s *served, c *client.Client, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	for {
		info, err := c.Server(ctx)
		if err != nil {
			t.Fatalf("GET /v1/server: %v\n%s", err, s.log())
		}
		if info.Pool == nil {
			t.Fatalf("GET /v1/server shows no pool: %+v", info)
		}
		if info.Pool.Idle >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the pool did not reach %d idle sandboxes: %+v\n%s", n, info.Pool, s.log())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// noLocalLeftovers waits (bubblewrap dies with its parent, a moment
// later) until no local sandbox of the runs prefix-1 … prefix-n is left.
func noLocalLeftovers(t *testing.T, prefix string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var left []string
		for i := 1; i <= n; i++ {
			l, _ := local.Leftovers(t.Context(), fmt.Sprintf("%s-%d", prefix, i))
			left = append(left, l...)
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("local sandboxes of the pool left: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestServePoolKilled, on each real backend: a server with a warm pool
// full and one pooled sandbox in use is SIGKILLed; `agentbox gc` then
// leaves none of its sandboxes, pooled or in use.
func TestServePoolKilled(t *testing.T) {
	for _, backend := range []string{"docker", "local"} {
		t.Run(backend, func(t *testing.T) {
			if backend == "docker" {
				testenv.Require(t, testenv.Image(testenv.RuntimeImage))
			} else {
				testenv.Require(t, testenv.Probe("the local backend (see `agentbox doctor`)", (&local.Backend{}).Probe),
					testenv.Programs("Xvfb", "openbox"))
			}
			testenv.Require(t, testenv.Slow("a pooled server, killed"))
			s := startServe(t, "--backend", backend, "--app", "mover="+moverApp(t, ""), "--out", t.TempDir(), "--pool", "3")
			m := poolRunIDs.FindStringSubmatch(s.log())
			if m == nil {
				t.Fatalf("the server did not say its pool's run IDs:\n%s", s.log())
			}
			prefix := m[1]
			c, err := client.New(s.url, s.token)
			if err != nil {
				t.Fatal(err)
			}
			waitPoolIdle(t, s, c, 3)
			env, err := c.Create(t.Context(), api.CreateRequest{App: "mover"})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := env.Reset(t.Context()); err != nil {
				t.Fatal(err)
			}
			info, err := c.Server(t.Context())
			if err != nil || info.Pool.Warm != 1 {
				t.Fatalf("the episode did not start in a pooled sandbox: %+v %v", info.Pool, err)
			}
			s.cmd.Process.Kill()
			<-s.done
			if r := agentbox(t, "gc"); r.code != 0 {
				t.Fatalf("gc after the kill:\n%s", r)
			}
			if backend == "docker" {
				assertNoContainers(t, prefix+"-*")
			} else {
				noLocalLeftovers(t, prefix, 10)
			}
		})
	}
}

// TestServePoolShutdown: SIGTERM to a server whose pool is full removes
// every pooled sandbox before it exits 0 (no gc needed).
func TestServePoolShutdown(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage), testenv.Slow("a pooled server"))
	s := startServe(t, "--backend", "docker", "--app", "mover="+moverApp(t, ""), "--out", t.TempDir(), "--pool", "2")
	m := poolRunIDs.FindStringSubmatch(s.log())
	if m == nil {
		t.Fatalf("the server did not say its pool's run IDs:\n%s", s.log())
	}
	c, err := client.New(s.url, s.token)
	if err != nil {
		t.Fatal(err)
	}
	waitPoolIdle(t, s, c, 2)
	if code := s.stop(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.log())
	}
	assertNoContainers(t, m[1]+"-*")
}

// TestEvalPool: eval --pool runs a suite's episodes in pooled sandboxes:
// every episode passes, each in a sandbox of its own (none reused), most
// from the pool (create_ahead in run.json), the counts on stderr, and no
// sandbox is left when eval exits.
func TestEvalPool(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage), testenv.Slow("an eval of 6 episodes"))
	suite := `name: pooled
tasks:
  - name: script
    target: mover
    script: play.yaml
    episodes: 6
`
	out := filepath.Join(t.TempDir(), "out")
	r := agentbox(t, "eval", evalDir(t, suite), "--parallel", "2", "--pool", "2", "--out", out, "--json")
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	var sum eval.Summary
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	if sum.Totals.Passed != 6 {
		t.Fatalf("totals %+v\n%s", sum.Totals, r)
	}
	ids := map[string]string{}
	pooled := 0
	for _, ep := range sum.Episodes {
		tr := openTrace(t, filepath.Join(out, ep.Trace))
		if prev, ok := ids[tr.Run.Env.ID]; ok {
			t.Errorf("episodes %s and %s ran in the same sandbox %s", prev, ep.Trace, tr.Run.Env.ID)
		}
		ids[tr.Run.Env.ID] = ep.Trace
		if _, ok := tr.Run.Timings["create_ahead"]; ok {
			pooled++
		}
	}
	if pooled == 0 {
		t.Errorf("no episode started in a pooled sandbox\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("warm pool: %d episode", pooled)) {
		t.Errorf("stderr does not count %d episodes from the pool:\n%s", pooled, r.stderr)
	}
	t.Logf("%d of 6 episodes from the pool", pooled)
	assertNoContainers(t, sum.RunID+"*")
	if _, err := os.Stat(out); err != nil {
		t.Fatal(err)
	}
}
