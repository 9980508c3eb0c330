//go:build k8s

package kubernetes_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/client"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/serve"
	"github.com/codegirl-games/agentbox/serve/api"
)

// poolServer is agentbox serve in this process on the test's namespace,
// serving the mover with a warm pool of size Pods; it is shut down (and
// must leave no Pod) when the test ends.
func (c *cluster) poolServer(t *testing.T, size int) (*serve.Server, *client.Client) {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile(testenv.Build(t, "./examples/mover"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "mover"), data, 0o755)
	os.WriteFile(filepath.Join(dir, app.ManifestName), []byte(`{"command":"mover","window_title":"mover","ready_output":"mover: ready","ready_timeout":"60s"}`), 0o644)
	bundle, err := app.Load(dir, app.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	const token = "k8s-pool-test-token"
	srv, err := serve.New(serve.Options{
		Backends: []environment.Backend{c.backend()}, Apps: map[string]*app.Bundle{"mover": bundle}, Tokens: []string{token},
		Env: c.config(), Out: t.TempDir(), StartTimeout: 3 * time.Minute, Pool: size,
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
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("serve's shutdown: %v", err)
		}
		c.assertNothingLeft(t)
	})
	cl, err := client.New("http://"+ln.Addr().String(), token)
	if err != nil {
		t.Fatal(err)
	}
	return srv, cl
}

// episode creates an environment, resets it (from the pool when it has a
// Pod) and moves the mover; it returns the sandbox's Pod.
func episode(t *testing.T, cl *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	env, err := cl.Create(ctx, api.CreateRequest{App: "mover", Task: "move right"})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close(context.WithoutCancel(ctx))
	obs, info, err := env.Reset(ctx)
	if err != nil {
		t.Fatalf("reset: %v", err)
	}
	if obs.Screen == nil || !obs.Running {
		t.Fatalf("reset: no screen or the app is not running: %+v", info)
	}
	for _, a := range []action.Action{{Kind: action.KeyDown, Key: "Right"}, {Kind: action.Wait, MS: 300}, {Kind: action.KeyUp, Key: "Right"}} {
		if _, _, _, _, info, err := env.Step(ctx, a); err != nil || !info.Result.OK {
			t.Fatalf("%s: %v %+v", a, err, info.Result)
		}
	}
}

func idleIDs(srv *serve.Server) []string {
	var ids []string
	for _, i := range srv.PoolIdle() {
		ids = append(ids, i.ID)
	}
	return ids
}

// waitPool waits until serve's pool is full again.
func waitPool(t *testing.T, srv *serve.Server, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := srv.WaitPool(ctx); err != nil {
		t.Fatalf("the pool did not fill within %v: %+v", within, srv.PoolStats())
	}
}

// TestFaultPoolPodEvicted: a pooled Pod evicted before any episode claims
// it (the Eviction API, as a drain does) is dropped from the pool at once
// — its deletion is watched — and never handed out: the episode that
// comes right after gets a live Pod, and the pool fills again.
func TestFaultPoolPodEvicted(t *testing.T) {
	c := newCluster(t, testenv.TestImage)
	srv, cl := c.poolServer(t, 2)
	episode(t, cl) // asks for the mover's key, which the pool then keeps warm
	waitPool(t, srv, 4*time.Minute)
	before := srv.PoolStats()
	ids := idleIDs(srv)
	if len(ids) == 0 {
		t.Fatalf("no idle Pod in a full pool: %+v", before)
	}
	victim := ids[0]
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: victim, Namespace: c.namespace}}
	if err := c.cs.PolicyV1().Evictions(c.namespace).Evict(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitFor(t, ctx, "the evicted Pod dropped from the pool", func() (bool, string) {
		now := idleIDs(srv)
		return !slices.Contains(now, victim), fmt.Sprintf("idle %v", now)
	})
	t.Logf("the evicted Pod %s left the pool after %v", victim, time.Since(t0).Round(time.Millisecond))
	// Claims right away: none gets the evicted Pod (a claimed Pod that
	// is gone fails the episode's staging).
	episode(t, cl)
	episode(t, cl)
	waitPool(t, srv, 4*time.Minute)
	if st := srv.PoolStats(); st.Replaced <= before.Replaced {
		t.Errorf("the pool replaced nothing: before %+v, after %+v", before, st)
	}
	if gone, _ := c.gone(context.Background(), environment.Info{ID: victim, Extra: map[string]string{"namespace": c.namespace}}); !gone {
		t.Errorf("the evicted Pod %s is still there", victim)
	}
}

// TestFaultPoolAPIServerRestart: the API server restarting while serve
// holds a pool breaks every pooled Pod's attach stream; the pool drops
// them (their Pods are deleted once the server is back), makes new ones,
// and resets keep working. Nothing is left after serve's shutdown.
func TestFaultPoolAPIServerRestart(t *testing.T) {
	c := newCluster(t, testenv.TestImage)
	script := os.Getenv("AGENTBOX_K8S_CLUSTER")
	testenv.Require(t, testenv.Probe("$AGENTBOX_K8S_CLUSTER: scripts/k8s-cluster.sh, to restart the API server", func(context.Context) error {
		if script == "" {
			return errors.New("not set")
		}
		return nil
	}))
	srv, cl := c.poolServer(t, 2)
	episode(t, cl)
	waitPool(t, srv, 4*time.Minute)
	before := srv.PoolStats()
	old := idleIDs(srv)
	out, err := exec.Command(script, "restart", "kube-apiserver").CombinedOutput()
	if err != nil {
		t.Fatalf("restart: %v\n%s", err, out)
	}
	t.Logf("the API server restarted; pool before: %+v", before)
	waitPool(t, srv, 5*time.Minute)
	after := srv.PoolStats()
	t.Logf("pool after: %+v; idle %v (before %v)", after, idleIDs(srv), old)
	for _, id := range idleIDs(srv) {
		if slices.Contains(old, id) {
			t.Errorf("Pod %s, whose stream the restart broke, is still in the pool", id)
		}
	}
	episode(t, cl)
	episode(t, cl)
	// The old Pods are deleted (the pool's removal retries while the
	// server is away).
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	waitFor(t, ctx, "the broken Pods deleted", func() (bool, string) {
		var left []string
		for _, id := range old {
			if gone, _ := c.gone(ctx, environment.Info{ID: id, Extra: map[string]string{"namespace": c.namespace}}); !gone {
				left = append(left, id)
			}
		}
		return len(left) == 0, fmt.Sprintf("still there: %v", left)
	})
}
