//go:build k8s

package kubernetes_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/codegirl-games/agentbox/environment"
	k8s "github.com/codegirl-games/agentbox/environment/kubernetes"
	"github.com/codegirl-games/agentbox/images"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

// The tests against a real cluster run with -tags k8s (make test-k8s, which
// brings up scripts/k8s-cluster.sh's one-node cluster): they skip locally
// without a cluster and fail under CI=true.

// importEnv names the command that loads an image archive into the cluster
// (scripts/k8s-cluster.sh env sets it; `kind load image-archive` works too).
const importEnv = "AGENTBOX_K8S_IMPORT"

// podPIDs is the script's kubelet podPidsLimit.
const podPIDs = 256

// cluster is a cluster the tests may use: a namespace of their own and the
// guest image for the agentbox binary they built, loaded into it.
type cluster struct {
	cs        *kubernetes.Clientset
	namespace string
	bin       string // the agentbox binary (the guest)
}

func requireCluster(t *testing.T) {
	t.Helper()
	testenv.Require(t, testenv.Image(testenv.TestImage),
		testenv.Probe("a Kubernetes cluster (scripts/k8s-cluster.sh up, then eval \"$(scripts/k8s-cluster.sh env)\")", func(ctx context.Context) error {
			return (&k8s.Backend{}).Probe(ctx)
		}),
		testenv.Probe("$"+importEnv+": the command that loads an image archive into the cluster (scripts/k8s-cluster.sh env sets it)", func(context.Context) error {
			if os.Getenv(importEnv) == "" {
				return fmt.Errorf("%s is not set", importEnv)
			}
			return nil
		}))
}

// newCluster makes a namespace for the test (deleted at its end) and loads
// the guest image of the test's agentbox binary on base into the cluster
// (none for an empty base).
func newCluster(t *testing.T, base string) *cluster {
	t.Helper()
	requireCluster(t)
	bin := testenv.Build(t, "./cmd/agentbox")
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns := fmt.Sprintf("agentbox-test-%d", time.Now().UnixNano()%1e9)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
	// The namespace's default service account appears shortly after it.
	for ctx.Err() == nil {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if base != "" {
		loadGuestImage(t, bin, base)
	}
	return &cluster{cs: cs, namespace: ns, bin: bin}
}

// loaded remembers the guest images this process loaded.
var loaded = map[string]bool{}

// loadGuestImage builds the guest image of bin on base with the binary
// itself (agentbox image build --guest --save) and loads it with
// $AGENTBOX_K8S_IMPORT.
func loadGuestImage(t *testing.T, bin, base string) {
	t.Helper()
	if loaded[bin+"|"+base] {
		return
	}
	archive := filepath.Join(t.TempDir(), "guest.tar")
	out, err := exec.Command(bin, "image", "build", "--guest", "--from", base, "--save", archive).CombinedOutput()
	if err != nil {
		t.Fatalf("agentbox image build --guest: %v\n%s", err, out)
	}
	t0 := time.Now()
	cmd := exec.Command("sh", "-c", os.Getenv(importEnv)+` "$1"`, "import", archive)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", os.Getenv(importEnv), archive, err, out)
	}
	t.Logf("guest image on %s loaded into the cluster in %v", base, time.Since(t0).Round(time.Millisecond))
	// The cluster has it now; Docker need not keep a tag per test build.
	if id, err := guestKey(bin); err == nil {
		_ = exec.Command("docker", "image", "rm", images.GuestRef(base, id)).Run()
	}
	loaded[bin+"|"+base] = true
}

// guestKey is the key of bin's guest image (images.GuestKey): of bin and
// agentbox-guest beside it when it is there (testenv.Build puts it there,
// of the same build), of bin alone otherwise.
func guestKey(bin string) (string, error) {
	small := filepath.Join(filepath.Dir(bin), "agentbox-guest")
	if _, err := os.Stat(small); err != nil {
		small = ""
	}
	return images.GuestKey(bin, small)
}

// gone reports whether the Pod of an environment no longer exists.
func (c *cluster) gone(ctx context.Context, info environment.Info) (bool, error) {
	_, err := c.cs.CoreV1().Pods(info.Extra["namespace"]).Get(ctx, info.ID, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

// leftovers lists the Pods of a run.
func (c *cluster) leftovers(ctx context.Context, runID string) ([]string, error) {
	list, err := c.cs.CoreV1().Pods(c.namespace).List(ctx, metav1.ListOptions{LabelSelector: k8s.LabelRun + "=" + k8s.RunLabel(runID)})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name+" ("+string(p.Status.Phase)+")")
	}
	return names, nil
}

func (c *cluster) backend() *k8s.Backend { return &k8s.Backend{Namespace: c.namespace} }

func (c *cluster) config() environment.Config {
	return environment.Config{Image: testenv.TestImage, GuestBinary: c.bin}
}

// podNames lists the namespace's Pods.
func (c *cluster) podNames(t *testing.T) []string {
	t.Helper()
	list, err := c.cs.CoreV1().Pods(c.namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names
}
