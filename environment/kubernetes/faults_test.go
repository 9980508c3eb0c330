//go:build k8s

package kubernetes_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	k8s "github.com/codegirl-games/agentbox/environment/kubernetes"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

// create makes an environment with the test image; it is closed when the
// test ends.
func (c *cluster) create(t *testing.T, b *k8s.Backend, cfg environment.Config, timeout time.Duration) (environment.Environment, error) {
	t.Helper()
	cfg.RunID = "k8stest-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")) + "-" + time.Now().Format("150405.000")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	env, err := b.Create(ctx, cfg)
	if err == nil {
		t.Cleanup(func() {
			cctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			env.Close(cctx)
		})
	}
	return env, err
}

// observedPod creates an environment with cfg, takes a screenshot of it
// (the guest answers) and returns it with its Pod as the API server has it.
func (c *cluster) observedPod(t *testing.T, cfg environment.Config) (environment.Environment, *corev1.Pod) {
	t.Helper()
	env, err := c.create(t, c.backend(), cfg, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, _, err := env.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := c.cs.CoreV1().Pods(c.namespace).Get(ctx, env.Info().ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return env, p
}

// launchMover starts the mover in env.
func launchMover(t *testing.T, env environment.Environment) {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile(testenv.Build(t, "./examples/mover"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "mover"), data, 0o755)
	os.WriteFile(filepath.Join(dir, app.ManifestName), []byte(`{"command":"mover","window_title":"mover"}`), 0o644)
	bundle, err := app.Load(dir, app.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer bundle.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := env.Launch(ctx, environment.LaunchSpec{App: bundle, ReadyTimeout: 30 * time.Second, LogCap: 1 << 20}); err != nil {
		t.Fatal(err)
	}
}

// observeUntilError observes until the environment fails (or within).
func observeUntilError(t *testing.T, env environment.Environment, within time.Duration) error {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := env.Act(ctx, action.Action{Kind: action.MouseMove, X: ptr(10), Y: ptr(10)})
		if err == nil {
			_, _, err = env.Observe(ctx)
		}
		cancel()
		if err != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the environment still answers %v later", within)
	return nil
}

func ptr(v int) *int { return &v }

// assertNothingLeft: the namespace has no Pods (waiting a while for
// deletions under way).
func (c *cluster) assertNothingLeft(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		names := c.podNames(t)
		if len(names) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("left behind: %v", names)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestFaultNoPermission: a namespace where agentbox's credentials may not
// create what it needs ends Create at once with an environment error
// naming the permission and the namespace, and nothing is created.
func TestFaultNoPermission(t *testing.T) {
	c := newCluster(t, testenv.TestImage)
	ctx := context.Background()
	// A service account with no rights, then one that may make the policy
	// but not Pods.
	for _, sa := range []string{"nobody", "policy-only"} {
		if _, err := c.cs.CoreV1().ServiceAccounts(c.namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "policy-only"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"create", "get"}}}}
	if _, err := c.cs.RbacV1().Roles(c.namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "policy-only"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "policy-only"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "policy-only", Namespace: c.namespace}}}
	if _, err := c.cs.RbacV1().RoleBindings(c.namespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct{ sa, want string }{
		{"nobody", "networkpolicies"},
		{"policy-only", "create pod"},
	} {
		t.Run(k.sa, func(t *testing.T) {
			kc := c.kubeconfigFor(t, k.sa)
			start := time.Now()
			_, err := c.create(t, &k8s.Backend{Namespace: c.namespace, Kubeconfig: kc}, c.config(), time.Minute)
			t.Logf("Create as %s: %v (after %v)", k.sa, err, time.Since(start).Round(time.Millisecond))
			if !errors.Is(err, environment.ErrUnavailable) || !strings.Contains(err.Error(), "permission denied in namespace \""+c.namespace+"\"") || !strings.Contains(err.Error(), k.want) {
				t.Errorf("want an environment error naming the permission (%s) and the namespace, got %v", k.want, err)
			}
			if time.Since(start) > 30*time.Second {
				t.Errorf("it took %v", time.Since(start))
			}
			c.assertNothingLeft(t)
		})
	}
}

// TestDocumentedRole: the Role SECURITY.md gives is enough: a service
// account bound to it (and to nothing else) runs a sandbox, and Close
// leaves nothing.
func TestDocumentedRole(t *testing.T) {
	c := newCluster(t, testenv.TestImage)
	ctx := context.Background()
	if _, err := c.cs.CoreV1().ServiceAccounts(c.namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "runner"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "agentbox"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "watch", "list", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods/attach", "pods/exec"}, Verbs: []string{"create", "get"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"create", "get"}},
	}}
	if _, err := c.cs.RbacV1().Roles(c.namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "agentbox"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "agentbox"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "runner", Namespace: c.namespace}}}
	if _, err := c.cs.RbacV1().RoleBindings(c.namespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := &k8s.Backend{Namespace: c.namespace, Kubeconfig: c.kubeconfigFor(t, "runner")}
	env, err := c.create(t, b, c.config(), 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	launchMover(t, env)
	n, err := b.SeedStep(ctx, env, 10, 10)
	if err != nil || n == 0 {
		t.Errorf("the seed-style step with the Role: %d bytes, %v", n, err)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := env.Close(cctx); err != nil {
		t.Errorf("Close: %v", err)
	}
	if got, err := b.Reap(ctx, environment.ReapOptions{All: true, DryRun: true}); err != nil || len(got) != 0 {
		t.Errorf("gc with the Role: %+v, %v", got, err)
	}
	c.assertNothingLeft(t)
}

// kubeconfigFor writes a kubeconfig for a service account of the test's
// namespace (a token from the TokenRequest API).
func (c *cluster) kubeconfigFor(t *testing.T, sa string) string {
	t.Helper()
	exp := int64(3600)
	tok, err := c.cs.CoreV1().ServiceAccounts(c.namespace).CreateToken(context.Background(), sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := clientcmd.NewDefaultClientConfigLoadingRules().Load()
	if err != nil {
		t.Fatal(err)
	}
	ctx := raw.Contexts[raw.CurrentContext]
	cl := raw.Clusters[ctx.Cluster]
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = cl
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u", Namespace: c.namespace}
	cfg.CurrentContext = "x"
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFaultPending: a Pod no node has room for ends Create when its
// deadline does, with the scheduler's reason, and is deleted.
func TestFaultPending(t *testing.T) {
	c := newCluster(t, testenv.TestImage)
	cfg := c.config()
	cfg.Resources = environment.Resources{MemoryMB: 1 << 20} // 1 TiB
	start := time.Now()
	_, err := c.create(t, c.backend(), cfg, 20*time.Second)
	d := time.Since(start)
	t.Logf("Create of a Pod asking for 1 TiB: %v (after %v)", err, d.Round(time.Millisecond))
	if !errors.Is(err, environment.ErrUnavailable) || !strings.Contains(err.Error(), "did not start in time") || !strings.Contains(err.Error(), "Insufficient memory") {
		t.Errorf("want an environment error saying the Pod stayed Pending for lack of memory, got %v", err)
	}
	if d > 50*time.Second {
		t.Errorf("Create returned %v after its 20 s deadline", d)
	}
	c.assertNothingLeft(t)
}

// TestFaultMissingImage: an image the cluster has not and cannot pull
// ends Create at once with an image error saying how to build and load
// the guest image.
func TestFaultMissingImage(t *testing.T) {
	c := newCluster(t, testenv.TestImage)
	cfg := c.config()
	cfg.Image = "agentbox/k8stest-no-such-image:none"
	start := time.Now()
	_, err := c.create(t, c.backend(), cfg, 2*time.Minute)
	t.Logf("Create with an absent image: %v (after %v)", err, time.Since(start).Round(time.Millisecond))
	if !errors.Is(err, environment.ErrImage) || !strings.Contains(err.Error(), "agentbox image build --guest --from agentbox/k8stest-no-such-image:none") {
		t.Errorf("want an image error with the build command, got %v", err)
	}
	c.assertNothingLeft(t)
}

// TestFaultEvicted: a Pod evicted mid-run (the Eviction API, as a node
// drain does) ends the run with an environment error that says so, and
// Close leaves nothing.
func TestFaultEvicted(t *testing.T) {
	c := newCluster(t, testenv.TestImage)
	env, err := c.create(t, c.backend(), c.config(), 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	launchMover(t, env)
	info := env.Info()
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: info.ID, Namespace: c.namespace}}
	if err := c.cs.PolicyV1().Evictions(c.namespace).Evict(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	err = observeUntilError(t, env, time.Minute)
	t.Logf("after the eviction: %v", err)
	if !errors.Is(err, environment.ErrGuest) || !strings.Contains(err.Error(), "Eviction") && !strings.Contains(err.Error(), "was deleted") {
		t.Errorf("want a guest failure naming the eviction, got %v", err)
	}
	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := env.Close(cctx); err != nil {
		t.Errorf("Close: %v", err)
	}
	c.assertNothingLeft(t)
}

// TestFaultAPIServerRestart: the API server restarting mid-run breaks the
// attach stream; the run ends with an environment error that says so, and
// Close removes the Pod once the server is back.
func TestFaultAPIServerRestart(t *testing.T) {
	c := newCluster(t, testenv.TestImage)
	script := os.Getenv("AGENTBOX_K8S_CLUSTER")
	testenv.Require(t, testenv.Probe("$AGENTBOX_K8S_CLUSTER: scripts/k8s-cluster.sh, to restart the API server", func(context.Context) error {
		if script == "" {
			return errors.New("not set")
		}
		return nil
	}))
	env, err := c.create(t, c.backend(), c.config(), 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	launchMover(t, env)
	restarted := make(chan error, 1)
	go func() {
		out, err := exec.Command(script, "restart", "kube-apiserver").CombinedOutput()
		if err != nil {
			err = errors.New(err.Error() + ": " + string(out))
		}
		restarted <- err
	}()
	err = observeUntilError(t, env, 2*time.Minute)
	t.Logf("while the API server restarts: %v", err)
	if !errors.Is(err, environment.ErrGuest) || !strings.Contains(err.Error(), "attach stream") && !strings.Contains(err.Error(), "API server") {
		t.Errorf("want a guest failure naming the broken stream or the API server, got %v", err)
	}
	if err := <-restarted; err != nil {
		t.Fatalf("restart: %v", err)
	}
	cctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := env.Close(cctx); err != nil {
		t.Errorf("Close: %v", err)
	}
	c.assertNothingLeft(t)
}

// TestReap: gc by run removes a live run's Pod; the default (owners gone)
// leaves a live owner's alone.
func TestReap(t *testing.T) {
	c := newCluster(t, testenv.TestImage)
	cfg := c.config()
	env, err := c.create(t, c.backend(), cfg, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	got, err := c.backend().Reap(ctx, environment.ReapOptions{})
	if err != nil || len(got) != 0 {
		t.Errorf("Reap of dead owners' Pods = %+v, %v; want none (the owner, this test, lives)", got, err)
	}
	runID := c.runIDOf(t, env)
	got, err = c.backend().Reap(ctx, environment.ReapOptions{RunID: runID})
	if err != nil || len(got) != 1 || !got[0].Removed {
		t.Errorf("Reap of run %s = %+v, %v; want its Pod removed", runID, got, err)
	}
	c.assertNothingLeft(t)
}

func (c *cluster) runIDOf(t *testing.T, env environment.Environment) string {
	t.Helper()
	p, err := c.cs.CoreV1().Pods(c.namespace).Get(context.Background(), env.Info().ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Annotations[k8s.AnnotationRun]
}

// TestFaultRuntimeClass: --runtime names a RuntimeClass. One the cluster
// does not have is refused at once by its admission, which the error says
// is not a missing permission; one whose handler the node's runtime lacks
// leaves the Pod Pending until the deadline, and the error quotes the
// kubelet's warning. Nothing is left either way.
func TestFaultRuntimeClass(t *testing.T) {
	c := newCluster(t, testenv.TestImage)
	ctx := context.Background()
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "agentbox-test-nohandler"}, Handler: "agentboxnohandler"}
	if _, err := c.cs.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.cs.NodeV1().RuntimeClasses().Delete(context.Background(), rc.Name, metav1.DeleteOptions{}) })
	for _, k := range []struct {
		name, runtime string
		timeout       time.Duration
		want          []string
	}{
		{"no such class", "agentbox-no-such-class", time.Minute, []string{`RuntimeClass "agentbox-no-such-class" not found`, "refused by the cluster"}},
		{"no such handler", rc.Name, 20 * time.Second, []string{"did not start in time", "FailedCreatePodSandBox", "agentboxnohandler"}},
	} {
		t.Run(k.name, func(t *testing.T) {
			cfg := c.config()
			cfg.Runtime = k.runtime
			start := time.Now()
			_, err := c.create(t, c.backend(), cfg, k.timeout)
			t.Logf("--runtime %s: %v (after %v)", k.runtime, err, time.Since(start).Round(time.Millisecond))
			if !errors.Is(err, environment.ErrUnavailable) || strings.Contains(err.Error(), "permission denied") {
				t.Errorf("want an environment error that is not about permissions, got %v", err)
			}
			for _, w := range k.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q", w)
				}
			}
			c.assertNothingLeft(t)
		})
	}
}
