//go:build k8s

package kubernetes_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"

	k8s "github.com/codegirl-games/agentbox/environment/kubernetes"
	"github.com/codegirl-games/agentbox/images"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

// TestServeInCluster deploys deploy/kubernetes/serve.yaml as a user would
// (its guest image, a token Secret, a TLS Secret) into the test's
// namespace: serve runs as a Pod, creates its environments as Pods of the
// namespace through its ServiceAccount's in-cluster configuration, and
// keeps --pool of them warm. The Python client outside the cluster reaches
// it through `kubectl port-forward` over TLS, uploads the mover, and resets
// episodes fresh (from the Pod pool, filled once the mover's key was asked
// for) and in place; then the Deployment is deleted and serve, told to
// stop, leaves no sandbox Pod behind.
func TestServeInCluster(t *testing.T) {
	c := newCluster(t, k8s.DefaultImage)
	id, err := guestKey(c.bin)
	if err != nil {
		t.Fatal(err)
	}
	ref := images.GuestRef(k8s.DefaultImage, id)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()

	// The Secrets a user creates: the token and a certificate for the
	// address the client dials (port-forward's loopback).
	token := make([]byte, 32)
	rand.Read(token)
	certPEM, keyPEM := selfSigned(t)
	cafile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(cafile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	secrets := []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "agentbox-serve-token"}, StringData: map[string]string{"token": hex.EncodeToString(token)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "agentbox-serve-tls"}, Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM}},
	}
	for _, s := range secrets {
		if _, err := c.cs.CoreV1().Secrets(c.namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// The manifest, in the test's namespace, with the test's guest image.
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy", "kubernetes", "serve.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "namespace: agentbox", "namespace: "+c.namespace)
	text = strings.Replace(text, "image: IMAGE", "image: "+ref, 1)
	for _, doc := range strings.Split(text, "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := obj.(*appsv1.Deployment); ok {
			onHostNetwork(t, d)
		}
		if err := c.apply(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	deleted := false
	deleteServe := func() {
		if deleted {
			return
		}
		deleted = true
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		fg := metav1.DeletePropagationForeground
		if err := c.cs.AppsV1().Deployments(c.namespace).Delete(dctx, "agentbox-serve", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
			t.Errorf("delete the Deployment: %v", err)
		}
	}
	t.Cleanup(deleteServe)

	pod := c.waitReady(t, ctx, "app.kubernetes.io/name=agentbox-serve")
	t.Logf("serve runs as Pod %s", pod)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("kubectl", "-n", c.namespace, "logs", pod, "--tail", "80").CombinedOutput()
			t.Logf("serve's log:\n%s", out)
		}
	})

	port := c.portForward(t, ctx, "svc/agentbox-serve", 8470) // the Service's port; its targetPort is serve's
	mover := testenv.Build(t, "./examples/mover")
	appDir := filepath.Join(dir, "mover")
	if err := os.MkdirAll(appDir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin, _ := os.ReadFile(mover)
	os.WriteFile(filepath.Join(appDir, "mover"), bin, 0o755)
	manifest, _ := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "mover", "agentbox.json"))
	os.WriteFile(filepath.Join(appDir, "agentbox.json"), manifest, 0o644)

	py := exec.CommandContext(ctx, "python3", filepath.Join(testenv.RepoRoot(), "python", "benchmarks", "reset.py"),
		"--resets", "6", "--upload", appDir, "--cafile", cafile)
	py.Env = append(os.Environ(), fmt.Sprintf("AGENTBOX_URL=https://127.0.0.1:%d", port), "AGENTBOX_TOKEN="+hex.EncodeToString(token))
	out, err := py.CombinedOutput()
	t.Logf("the Python client, outside the cluster:\n%s", out)
	if err != nil {
		t.Fatalf("reset.py: %v", err)
	}
	for _, mode := range []string{"fresh", "relaunch"} {
		if !regexp.MustCompile(`reset ` + mode + ` +n=6 `).Match(out) {
			t.Errorf("no %s resets in the output", mode)
		}
	}

	// Its warm pool, filled for the key the episodes asked for: --pool 2
	// sandbox Pods made by serve itself, waiting for the next episode.
	waitFor(t, ctx, "serve's 2 warm sandbox Pods", func() (bool, string) {
		n := c.sandboxPods(t)
		return len(n) >= 2, fmt.Sprint(n)
	})

	// A wrong token is refused by the server in the cluster.
	bad := exec.CommandContext(ctx, "python3", "-c", `import ssl, sys; sys.path.insert(0, sys.argv[1]); import agentbox
try:
    agentbox.Client(sys.argv[2], "wrong", ssl_context=ssl.create_default_context(cafile=sys.argv[3])).server()
except agentbox.Unauthorized as e:
    print("refused:", e.status); sys.exit(0)
sys.exit("accepted a wrong token")`, filepath.Join(testenv.RepoRoot(), "python"), fmt.Sprintf("https://127.0.0.1:%d", port), cafile)
	if out, err := bad.CombinedOutput(); err != nil || !strings.Contains(string(out), "refused: 401") {
		t.Errorf("a wrong token: %v\n%s", err, out)
	}

	// Deleting the Deployment stops serve, which closes its pool's Pods.
	deleteServe()
	c.assertNothingLeft(t)
}

// testServePort is serve's port in the test: on the host's network, away
// from agentbox serve's default.
const testServePort = 18470

// onHostNetwork adapts serve's Deployment to the test cluster, which has
// no kube-proxy and gives Pods no route off their bridge (its bridge
// plugin enforces no NetworkPolicy, so the cluster isolates every Pod by
// itself): serve's Pod, alone, runs on the node's network and reaches the
// API server where it listens (loopback) instead of at the kubernetes
// Service's address. On a cluster with kube-proxy the manifest runs as it
// is written.
func onHostNetwork(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	pod := &d.Spec.Template.Spec
	pod.HostNetwork = true
	pod.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	c := &pod.Containers[0]
	c.Env = append(c.Env,
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: u.Hostname()},
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: u.Port()})
	for i, a := range c.Args {
		if strings.HasPrefix(a, "--listen=") {
			c.Args[i] = fmt.Sprintf("--listen=0.0.0.0:%d", testServePort) // the probe dials the node's address
		}
	}
	c.Ports[0].ContainerPort = testServePort
}

// apply creates one object of the manifest in the test's namespace.
func (c *cluster) apply(ctx context.Context, obj runtime.Object) error {
	var err error
	switch o := obj.(type) {
	case *corev1.ServiceAccount:
		_, err = c.cs.CoreV1().ServiceAccounts(c.namespace).Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.Role:
		_, err = c.cs.RbacV1().Roles(c.namespace).Create(ctx, o, metav1.CreateOptions{})
	case *rbacv1.RoleBinding:
		_, err = c.cs.RbacV1().RoleBindings(c.namespace).Create(ctx, o, metav1.CreateOptions{})
	case *appsv1.Deployment:
		_, err = c.cs.AppsV1().Deployments(c.namespace).Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Service:
		_, err = c.cs.CoreV1().Services(c.namespace).Create(ctx, o, metav1.CreateOptions{})
	default:
		err = fmt.Errorf("the manifest has a %T", obj)
	}
	return err
}

// waitReady waits for a Ready Pod of the selector and returns its name.
func (c *cluster) waitReady(t *testing.T, ctx context.Context, selector string) string {
	t.Helper()
	var name string
	waitFor(t, ctx, "a Ready Pod of "+selector, func() (bool, string) {
		list, err := c.cs.CoreV1().Pods(c.namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(list.Items) == 0 {
			return false, fmt.Sprint(err)
		}
		p := list.Items[0]
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				name = p.Name
				return true, ""
			}
		}
		return false, fmt.Sprintf("%s %s %+v", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
	})
	return name
}

// sandboxPods lists the namespace's agentbox sandbox Pods.
func (c *cluster) sandboxPods(t *testing.T) []string {
	t.Helper()
	list, err := c.cs.CoreV1().Pods(c.namespace).List(context.Background(), metav1.ListOptions{LabelSelector: k8s.LabelRun})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names
}

// portForward runs kubectl port-forward to target's port on a free local
// port (stopped at the test's end) and returns that port.
func (c *cluster) portForward(t *testing.T, ctx context.Context, target string, port int) int {
	t.Helper()
	cmd := exec.CommandContext(ctx, "kubectl", "-n", c.namespace, "port-forward", "--address", "127.0.0.1", target, fmt.Sprintf(":%d", port))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// kubectl's own klog lines (a forwarded connection that ended:
	// portforward.go "Unhandled Error") go to the test's log, shown when
	// it fails or with -v, never raw on the terminal.
	cmd.Stderr = testLog{t}
	if err := cmd.Start(); err != nil {
		t.Fatalf("kubectl port-forward: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	re := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+)`)
	lines := bufio.NewScanner(stdout)
	got := make(chan int, 1)
	go func() {
		for lines.Scan() {
			if m := re.FindStringSubmatch(lines.Text()); m != nil {
				var p int
				fmt.Sscan(m[1], &p)
				got <- p
				break
			}
		}
		for lines.Scan() { // keep the pipe drained
		}
	}()
	select {
	case p := <-got:
		return p
	case <-time.After(time.Minute):
		t.Fatal("kubectl port-forward said no port within a minute")
	}
	return 0
}

// testLog writes what it is given to t.Log, a line at a time.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.t.Log(l)
	}
	return len(p), nil
}

// waitFor polls ok until it holds or ctx ends (then the test fails with
// ok's last word).
func waitFor(t *testing.T, ctx context.Context, what string, ok func() (bool, string)) {
	t.Helper()
	var last string
	for {
		var done bool
		if done, last = ok(); done {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within the deadline: %s", what, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// selfSigned makes a certificate and key for 127.0.0.1 and localhost.
func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agentbox-serve"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}
