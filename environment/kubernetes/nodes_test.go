//go:build k8s

package kubernetes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
)

// The tests of a cluster of several nodes (make test-k8s brings up two):
// an eval's Pods spread over them, and a node lost mid-eval.

// readyNodes are the cluster's Ready nodes, by name; the test is skipped
// (failed under CI) with fewer than two.
func (c *cluster) readyNodes(t *testing.T) []string {
	t.Helper()
	list, err := c.cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range list.Items {
		if nodeReady(&n) && !n.Spec.Unschedulable {
			names = append(names, n.Name)
		}
	}
	sort.Strings(names)
	if len(names) < 2 {
		msg := fmt.Sprintf("%d Ready node(s) %v: this test needs two (scripts/k8s-cluster.sh up --nodes 2)", len(names), names)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return names
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// moverSuite writes a suite of one task, the mover played by script,
// with n episodes.
func moverSuite(t *testing.T, dir, script string, n int) string {
	t.Helper()
	appDir := filepath.Join(dir, "mover")
	os.MkdirAll(appDir, 0o755)
	data, err := os.ReadFile(testenv.Build(t, "./examples/mover"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(appDir, "mover"), data, 0o755)
	manifest, _ := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "mover", "agentbox.json"))
	os.WriteFile(filepath.Join(appDir, "agentbox.json"), manifest, 0o644)
	os.WriteFile(filepath.Join(dir, "play.yaml"), []byte(script), 0o644)
	suite := filepath.Join(dir, "suite.yaml")
	os.WriteFile(suite, []byte(fmt.Sprintf("name: nodes\ntasks:\n  - name: mover\n    target: mover\n    script: play.yaml\n    timeout: 10m\n    episodes: %d\n", n)), 0o644)
	return suite
}

// episodeNodes reads the node of each episode of an eval (run.json's
// env.extra.node), by episode directory.
func episodeNodes(t *testing.T, out string) map[string]string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(out, "mover", "[0-9][0-9][0-9]"))
	got := map[string]string{}
	for _, d := range dirs {
		run, err := trace.ReadRun(d)
		if err != nil {
			t.Fatal(err)
		}
		got[filepath.Base(d)] = run.Env.Extra["node"]
	}
	return got
}

type evalSummary struct {
	Totals   struct{ Episodes, Passed, Failed, Infrastructure int }
	Episodes []struct {
		N                          int `json:"episode"`
		Category, Outcome, Message string
	}
}

func readSummary(t *testing.T, out string) evalSummary {
	t.Helper()
	var sum evalSummary
	data, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatal(err)
	}
	return sum
}

// TestSpreadOverNodes: the Pods of one `eval --parallel 4` land on at least
// two nodes (the default spreading, --spread soft), and leave nothing.
func TestSpreadOverNodes(t *testing.T) {
	c := newCluster(t, testenv.TestImage)
	nodes := c.readyNodes(t)
	dir := t.TempDir()
	play, _ := os.ReadFile(filepath.Join(testenv.RepoRoot(), "examples", "mover", "play.yaml"))
	suite := moverSuite(t, dir, string(play), 4)
	out := filepath.Join(dir, "out")
	stdout, stderr, code := c.run(t, "eval", suite, "--backend", "kubernetes", "--namespace", c.namespace,
		"--image", testenv.TestImage, "--parallel", "4", "--out", out)
	t.Logf("eval:\n%s\n%s", stdout, stderr)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	got := episodeNodes(t, out)
	used := map[string]int{}
	for _, n := range got {
		used[n]++
	}
	t.Logf("episodes by node: %v (nodes %v)", got, nodes)
	if len(got) != 4 || len(used) < 2 || used[""] > 0 {
		t.Errorf("the eval's 4 Pods ran on %v: want at least two nodes", used)
	}
	c.assertNothingLeft(t)
}

// longScript is a mover play of about a minute (waits), so that a node
// can be lost while its episodes run.
const longScript = `task: Wait while the node goes.
screen: 640x480
steps:
  - wait_for: window
    title: mover
` + `  - action: wait
    ms: 1000
`

// kubeletOf is the cluster script's name for the kubelet of node among
// nodes: node 1 (the name the others extend) has "kubelet", node
// NAME-K "kubelet-K".
func kubeletOf(node string, nodes []string) string {
	base := nodes[0]
	for _, n := range nodes {
		if len(n) < len(base) {
			base = n
		}
	}
	if node == base {
		return "kubelet"
	}
	return "kubelet-" + strings.TrimPrefix(node, base+"-")
}

// TestFaultNodeLost: a node whose kubelet stops mid-eval (it goes
// NotReady) ends its episodes as infrastructure outcomes whose message
// names the node; `eval --resume` runs them again on the other node, and
// nothing is left.
func TestFaultNodeLost(t *testing.T) {
	c := newCluster(t, testenv.TestImage)
	nodes := c.readyNodes(t)
	script := os.Getenv("AGENTBOX_K8S_CLUSTER")
	if script == "" {
		t.Skip("$AGENTBOX_K8S_CLUSTER is not set (scripts/k8s-cluster.sh env sets it): the test stops a kubelet with it")
	}
	// The node to lose: the last, not node 1.
	lost := nodes[len(nodes)-1]
	kubelet := kubeletOf(lost, nodes)
	ctl := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(script, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", script, args, err, out)
		}
	}
	t.Cleanup(func() {
		// The node comes back for the tests after this one.
		if out, err := exec.Command(script, "restart", kubelet).CombinedOutput(); err != nil {
			t.Errorf("restart %s: %v\n%s", kubelet, err, out)
			return
		}
		waitNode(t, c, lost, true, 3*time.Minute)
	})

	dir := t.TempDir()
	var b strings.Builder
	b.WriteString(longScript)
	for i := 0; i < 60; i++ {
		b.WriteString("  - action: wait\n    ms: 1000\n")
	}
	suite := moverSuite(t, dir, b.String(), 4)
	out := filepath.Join(dir, "out")
	args := []string{"eval", suite, "--backend", "kubernetes", "--namespace", c.namespace, "--image", testenv.TestImage, "--parallel", "4"}
	cmd := exec.Command(c.bin, append(args, "--out", out)...)
	var evalOut strings.Builder
	cmd.Stdout, cmd.Stderr = &evalOut, &evalOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// Once a Pod runs on the node, and every episode has its Pod, the
	// node's kubelet stops.
	deadline := time.Now().Add(5 * time.Minute)
	for {
		list, err := c.cs.CoreV1().Pods(c.namespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		running, onLost := 0, 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
				if p.Spec.NodeName == lost {
					onLost++
				}
			}
		}
		if running == 4 && onLost > 0 {
			t.Logf("%d Pods running, %d on %s: stopping its kubelet", running, onLost, lost)
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the eval ended before its Pods ran on %s: %v\n%s", lost, err, evalOut.String())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no 4 running Pods with one on %s: %d running\n%s", lost, running, evalOut.String())
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // the episodes are under way
	ctl("stop", kubelet)
	var err error
	select {
	case err = <-done:
	case <-time.After(8 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("the eval did not end\n%s", evalOut.String())
	}
	t.Logf("eval with node %s lost: %v\n%s", lost, err, evalOut.String())
	sum := readSummary(t, out)
	byNode := episodeNodes(t, out)
	infra := 0
	for _, ep := range sum.Episodes {
		n := byNode[fmt.Sprintf("%03d", ep.N)]
		t.Logf("episode %d on %s: %s (%s) %s", ep.N, n, ep.Category, ep.Outcome, ep.Message)
		switch {
		case n == lost:
			infra++
			if ep.Category != "infrastructure" || !strings.Contains(ep.Message, lost) {
				t.Errorf("episode %d on the lost node: %s %q; want infrastructure, naming node %s", ep.N, ep.Category, ep.Message, lost)
			}
		case ep.Category != "passed":
			t.Errorf("episode %d on %s: %s %q", ep.N, n, ep.Category, ep.Message)
		}
	}
	if infra == 0 || sum.Totals.Episodes != 4 {
		t.Fatalf("no episode ended on the lost node: %+v", sum.Totals)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Errorf("exit %v, want 3 (only infrastructure failures)", err)
	}

	// The node is NotReady (and tainted) within the node monitor's grace
	// period: --resume runs the infrastructure's episodes on the others.
	waitNode(t, c, lost, false, 3*time.Minute)
	stdout, stderr, code := c.run(t, append(args, "--resume", out)...)
	t.Logf("eval --resume:\n%s\n%s", stdout, stderr)
	if code != 0 || !strings.Contains(stderr, fmt.Sprintf("%d of 4 episodes finished, %d to run", 4-infra, infra)) {
		t.Errorf("eval --resume: exit %d", code)
	}
	sum = readSummary(t, out)
	if sum.Totals.Passed != 4 {
		t.Errorf("after --resume: %+v", sum.Totals)
	}
	for ep, n := range episodeNodes(t, out) {
		if n == lost {
			t.Errorf("episode %s ran on the lost node again", ep)
		}
	}
	c.assertNothingLeft(t)
}

// waitNode waits until node is Ready (ready) or not.
func waitNode(t *testing.T, c *cluster, node string, ready bool, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n, err := c.cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err == nil && nodeReady(n) == ready {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s not Ready=%v within %v (%v)", node, ready, within, err)
		}
		time.Sleep(time.Second)
	}
}

// TestFaultNodeDrained: a node drained under a running sandbox (cordoned,
// its Pods evicted, as kubectl drain does) ends the run with an error that
// names the node and says it is cordoned; the next sandbox of the same
// Backend goes to another node, and nothing is left.
func TestFaultNodeDrained(t *testing.T) {
	c := newCluster(t, testenv.TestImage)
	c.readyNodes(t)
	b := c.backend()
	env, err := c.create(t, b, c.config(), 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	launchMover(t, env)
	node := env.Info().Extra["node"]
	ctx := context.Background()
	cordon := func(on bool) {
		t.Helper()
		n, err := c.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Spec.Unschedulable = on
		if _, err := c.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cordon(true)
	t.Cleanup(func() { cordon(false) })
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: env.Info().ID, Namespace: c.namespace}}
	if err := c.cs.PolicyV1().Evictions(c.namespace).Evict(ctx, ev); err != nil {
		t.Fatal(err)
	}
	err = observeUntilError(t, env, time.Minute)
	t.Logf("after the drain of %s: %v", node, err)
	if !errors.Is(err, environment.ErrGuest) || !strings.Contains(err.Error(), "node "+node+" is cordoned") {
		t.Errorf("want a guest failure naming node %s as cordoned, got %v", node, err)
	}
	env2, err := c.create(t, b, c.config(), 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if n2 := env2.Info().Extra["node"]; n2 == node || n2 == "" {
		t.Errorf("the next sandbox went to node %q, the drained one %q", n2, node)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	env.Close(cctx)
	env2.Close(cctx)
	c.assertNothingLeft(t)
}
