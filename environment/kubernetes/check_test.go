package kubernetes

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testNode is a Node named name, Ready or not, listing images.
func testNode(name string, ready bool, images ...string) corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
	for _, im := range images {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{im}})
	}
	return n
}

// TestGuestImageCheck: doctor's guest image is ok only when every node a
// Pod may go to (Ready, not cordoned) lists it; a node without it is named,
// with the command that loads it into every node.
func TestGuestImageCheck(t *testing.T) {
	const base, ref = "agentbox/test:bookworm", "agentbox/test:bookworm-guest-0123456789abcdef"
	cordoned := testNode("n4", true)
	cordoned.Spec.Unschedulable = true
	for _, c := range []struct {
		name   string
		nodes  []corev1.Node
		ok     bool
		detail []string
	}{
		{"on both", []corev1.Node{testNode("n1", true, "docker.io/"+ref), testNode("n2", true, ref)}, true, []string{"is on every Ready node (2 nodes)"}},
		{"on one of two", []corev1.Node{testNode("n1", true, "docker.io/"+ref), testNode("n2", true, "docker.io/"+base)}, false, []string{"is on 1 of 2 Ready nodes, not on n2", "fails to pull"}},
		{"not on NotReady or cordoned nodes", []corev1.Node{testNode("n1", true, "docker.io/library/"+ref), testNode("n3", false), cordoned}, true, []string{"every Ready node (1 node)"}},
		{"on none", []corev1.Node{testNode("n1", true), testNode("n2", true)}, false, []string{"is on no Ready node"}},
		{"no node Ready", []corev1.Node{testNode("n3", false)}, true, []string{"no Ready node to look on"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ch := guestImageCheck(base, ref, c.nodes)
			if ch.OK != c.ok {
				t.Errorf("ok = %v, want %v: %+v", ch.OK, c.ok, ch)
			}
			for _, w := range c.detail {
				if !strings.Contains(ch.Detail, w) {
					t.Errorf("detail %q lacks %q", ch.Detail, w)
				}
			}
			if !c.ok && !strings.Contains(ch.Fix, "agentbox image build --guest --from "+base) || !c.ok && !strings.Contains(ch.Fix, "scripts/k8s-cluster.sh load "+ref) {
				t.Errorf("fix %q does not say how to load it", ch.Fix)
			}
		})
	}
	// --image named the guest-layered image: nothing to build.
	if ch := guestImageCheck(ref, ref, []corev1.Node{testNode("n1", true)}); strings.Contains(ch.Fix, "image build") || !strings.Contains(ch.Fix, "load "+ref) {
		t.Errorf("fix for a guest-layered --image: %q", ch.Fix)
	}
}
