//go:build k8s

package kubernetes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/images"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

// run runs the test's agentbox binary and returns its output and exit code.
func (c *cluster) run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(c.bin, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// TestEvalParallel: `agentbox eval --backend kubernetes --parallel 3` runs
// a suite's episodes in Pods at once, with the same summary and JUnit as
// on Docker, and leaves no Pod.
func TestEvalParallel(t *testing.T) {
	c := newCluster(t, testenv.TestImage)
	dir := t.TempDir()
	mover := testenv.Build(t, "./examples/mover")
	appDir := filepath.Join(dir, "mover")
	os.MkdirAll(appDir, 0o755)
	data, _ := os.ReadFile(mover)
	os.WriteFile(filepath.Join(appDir, "mover"), data, 0o755)
	manifest, _ := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "mover", "agentbox.json"))
	os.WriteFile(filepath.Join(appDir, "agentbox.json"), manifest, 0o644)
	play, _ := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "mover", "play.yaml"))
	os.WriteFile(filepath.Join(dir, "play.yaml"), play, 0o644)
	suite := filepath.Join(dir, "suite.yaml")
	os.WriteFile(suite, []byte(`name: k8s
tasks:
  - name: script
    target: mover
    script: play.yaml
    episodes: 3
  - name: demo
    target: mover
    agent: demo
    episodes: 2
  - name: broken
    target: mover
    agent: demo
    options: {key: Left}
    episodes: 1
`), 0o644)
	out := filepath.Join(dir, "out")
	stdout, stderr, code := c.run(t, "eval", suite, "--backend", "kubernetes", "--namespace", c.namespace,
		"--image", testenv.TestImage, "--parallel", "3", "--out", out)
	t.Logf("eval:\n%s\n%s", stdout, stderr)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (one task fails by design)", code)
	}
	var sum struct {
		Parallel int
		Totals   struct{ Episodes, Passed, Failed, Infrastructure int }
		Episodes []struct {
			Task, Outcome, Message string
		}
	}
	data, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Parallel != 3 || sum.Totals.Episodes != 6 || sum.Totals.Passed != 5 || sum.Totals.Failed != 1 || sum.Totals.Infrastructure != 0 {
		t.Errorf("summary: parallel %d, totals %+v; episodes %+v", sum.Parallel, sum.Totals, sum.Episodes)
	}
	var ju struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
	}
	data, err = os.ReadFile(filepath.Join(out, "junit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(data, &ju); err != nil || ju.Tests != 6 || ju.Failures != 1 || ju.Errors != 0 {
		t.Errorf("junit: %+v %v", ju, err)
	}
	c.assertNothingLeft(t)
}

// TestDoctor: `agentbox doctor --backend kubernetes` reports the cluster,
// the permissions, the policy (and that its enforcement is the network
// plugin's) and the guest image.
func TestDoctor(t *testing.T) {
	c := newCluster(t, testenv.TestImage)
	// The guest image was loaded into every node: once each node's
	// kubelet lists it (its image list lags a load), doctor says so.
	id, err := guestKey(c.bin)
	if err != nil {
		t.Fatal(err)
	}
	ref := images.GuestRef(testenv.TestImage, id)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	waitFor(t, ctx, "every node lists "+ref, func() (bool, string) {
		nodes, err := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var without []string
		for _, n := range nodes.Items {
			if !slices.ContainsFunc(n.Status.Images, func(im corev1.ContainerImage) bool {
				return slices.Contains(im.Names, "docker.io/"+ref) || slices.Contains(im.Names, ref)
			}) {
				without = append(without, n.Name)
			}
		}
		return len(without) == 0, fmt.Sprintf("not listed by %v", without)
	})
	stdout, stderr, code := c.run(t, "doctor", "--backend", "kubernetes", "--namespace", c.namespace, "--image", testenv.TestImage)
	t.Logf("doctor (exit %d):\n%s%s", code, stdout, stderr)
	for _, want := range []string{"ok   API server", "ok   permissions in " + c.namespace, "NetworkPolicy agentbox-deny-all", "network plugin", "ok   guest binary: the Pods run agentbox-guest"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("doctor does not say %q", want)
		}
	}
	// Every node Ready, however many the cluster has (make test-k8s: two).
	if m := regexp.MustCompile(`ok   nodes: (\d+) of (\d+) Ready`).FindStringSubmatch(stdout); m == nil || m[1] != m[2] || m[1] == "0" {
		t.Errorf("doctor does not say every node is Ready (\"ok   nodes: N of N Ready\"), got %q", m)
	}
	if !strings.Contains(stdout, "ok   guest image: "+ref+" is on every Ready node") {
		t.Errorf("doctor does not say %s is on every Ready node", ref)
	}
}

// TestRegistryPush: `agentbox image build --guest --push REPO` pushes the
// guest image to a registry, and a Pod with --image REPO pulls it from
// there (the script's registry on loopback; the node was never given the
// image otherwise).
func TestRegistryPush(t *testing.T) {
	requireCluster(t)
	reg := os.Getenv("AGENTBOX_K8S_REGISTRY")
	testenv.Require(t, testenv.Probe("$AGENTBOX_K8S_REGISTRY: a registry the cluster pulls from (scripts/k8s-cluster.sh env sets it)", func(context.Context) error {
		if reg == "" {
			return errors.New("not set")
		}
		return nil
	}))
	c := newCluster(t, "")
	repo := fmt.Sprintf("%s/agentbox-push-test/runtime:t%d", reg, time.Now().UnixNano()%1e9)
	stdout, stderr, code := c.run(t, "image", "build", "--guest", "--from", testenv.RuntimeImage, "--push", repo)
	t.Logf("push (exit %d):\n%s%s", code, stdout, stderr)
	if code != 0 {
		t.Fatal("agentbox image build --guest --push failed")
	}
	id, _ := guestKey(c.bin)
	pushed := images.GuestRef(repo, id)
	t.Cleanup(func() {
		exec.Command("docker", "image", "rm", pushed, images.GuestRef(testenv.RuntimeImage, id)).Run()
	})
	if !strings.Contains(stdout, "pushed "+pushed) {
		t.Errorf("the output does not name %s", pushed)
	}
	_, p := c.observedPod(t, environment.Config{Image: repo, GuestBinary: c.bin})
	if got := p.Status.ContainerStatuses[0].ImageID; !strings.Contains(got, reg+"/agentbox-push-test/runtime@sha256:") {
		t.Errorf("the container's image ID %q is not the registry's", got)
	}
}
