package kubernetes

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/plural"
)

var (
	_ environment.Checker = (*Backend)(nil)
	_ environment.Prober  = (*Backend)(nil)
)

// Probe implements environment.Prober: a cluster is configured and its API
// server answers.
func (b *Backend) Probe(ctx context.Context) error {
	c, err := b.connect()
	if err != nil {
		return err
	}
	return c.ping(ctx)
}

// permissions are what Create, Close and gc do in the namespace.
var permissions = []struct{ verb, resource, sub, group string }{
	{"create", "pods", "", ""},
	{"get", "pods", "", ""},
	{"watch", "pods", "", ""},
	{"delete", "pods", "", ""},
	{"list", "pods", "", ""},
	{"create", "pods", "attach", ""},
	{"get", "pods", "attach", ""},
	{"create", "networkpolicies", "", "networking.k8s.io"},
	{"get", "networkpolicies", "", "networking.k8s.io"},
}

// Check implements environment.Checker: the client configuration, the API
// server, the permissions agentbox needs in the namespace, the nodes, the
// NetworkPolicy (and that its enforcement is the network plugin's), the
// RuntimeClass for --runtime, the guest binary and whether a node has its
// image.
func (b *Backend) Check(ctx context.Context, cfg environment.Config) []environment.Check {
	var out []environment.Check
	add := func(name string, ok bool, detail, fix string) {
		if ok {
			fix = ""
		}
		out = append(out, environment.Check{Name: name, OK: ok, Detail: detail, Fix: fix})
	}
	c, err := b.connect()
	if err != nil {
		add("kubernetes client configuration", false, err.Error(), "set KUBECONFIG (or ~/.kube/config); scripts/k8s-cluster.sh up makes a one-node cluster here")
		return out
	}
	add("kubernetes client configuration", true, fmt.Sprintf("API server %s, namespace %s", c.host, c.namespace), "")
	ver, err := c.cs.Discovery().ServerVersion()
	if err != nil {
		add("API server", false, fmt.Sprintf("%s does not answer: %v", c.host, err), "start the cluster, or check KUBECONFIG's server and credentials")
		return out
	}
	add("API server", true, fmt.Sprintf("%s (Kubernetes %s)", c.host, ver.GitVersion), "")

	if _, err := c.cs.CoreV1().Namespaces().Get(ctx, c.namespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		add("namespace "+c.namespace, false, "does not exist", "kubectl create namespace "+c.namespace+", or choose another with --namespace")
	}
	var denied []string
	for _, p := range permissions {
		r, err := c.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authv1.SelfSubjectAccessReview{Spec: authv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authv1.ResourceAttributes{Namespace: c.namespace, Verb: p.verb, Resource: p.resource, Subresource: p.sub, Group: p.group},
		}}, metav1.CreateOptions{})
		if err != nil || !r.Status.Allowed {
			res := p.resource
			if p.sub != "" {
				res += "/" + p.sub
			}
			denied = append(denied, p.verb+" "+res)
		}
	}
	if len(denied) > 0 {
		add("permissions in "+c.namespace, false, "missing: "+strings.Join(denied, ", "), "grant them with a Role and RoleBinding in the namespace (see SECURITY.md, Kubernetes)")
	} else {
		add("permissions in "+c.namespace, true, "pods (create, get, watch, list, delete, attach), networkpolicies (create, get)", "")
	}

	nodes, nodesErr := c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if nodesErr != nil {
		add("nodes", true, "cannot be listed with these credentials ("+apiMessage(nodesErr)+"); not needed", "")
	} else {
		ready := 0
		for _, n := range nodes.Items {
			if nodeReady(n) {
				ready++
			}
		}
		add("nodes", ready > 0, fmt.Sprintf("%d of %d Ready", ready, len(nodes.Items)), "no node is Ready: check the kubelets")
	}

	np, err := c.cs.NetworkingV1().NetworkPolicies(c.namespace).Get(ctx, PolicyName, metav1.GetOptions{})
	const enforce = "; enforced only where the cluster's network plugin enforces NetworkPolicy (Calico, Cilium, … do; bridge, flannel and kindnet before 1.31 do not): agentbox cannot see that through the API, verify it with your plugin"
	switch {
	case apierrors.IsNotFound(err):
		add("NetworkPolicy "+PolicyName, true, "not there yet: the first Pod creates it"+enforce, "")
	case err != nil:
		add("NetworkPolicy "+PolicyName, false, apiMessage(err), "grant get and create on networkpolicies")
	case !reflect.DeepEqual(np.Spec, denyAll(c.namespace).Spec):
		add("NetworkPolicy "+PolicyName, false, "changed: it no longer denies all traffic of agentbox's Pods", "kubectl -n "+c.namespace+" delete networkpolicy "+PolicyName)
	default:
		add("NetworkPolicy "+PolicyName, true, "denies all ingress and egress of agentbox's Pods"+enforce, "")
	}

	if cfg.Runtime != "" {
		_, err := c.cs.NodeV1().RuntimeClasses().Get(ctx, cfg.Runtime, metav1.GetOptions{})
		if err != nil {
			add("RuntimeClass "+cfg.Runtime, false, apiMessage(err), "create a RuntimeClass for the handler (gVisor's runsc, Kata) on nodes that have it")
		} else {
			add("RuntimeClass "+cfg.Runtime, true, "present", "")
		}
	}

	guest, err := guestImage(cfg)
	if err != nil {
		add("guest binary", false, err.Error(), "build with CGO_ENABLED=0 (make build)")
		return out
	}
	add("guest binary", true, guest.about, "")
	if nodesErr == nil {
		out = append(out, guestImageCheck(guest.base, guest.ref, nodes.Items))
	}
	return out
}

// nodeReady says whether n is Ready.
func nodeReady(n corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// guestImageCheck says whether the guest image ref (layered on base) is on
// every node a Pod may be placed on (Ready, not cordoned), from the images
// the nodes list. The Pods pull only what a node lacks
// (IfNotPresent): an image loaded into some nodes only (not pushed to a
// registry) fails with a pull error on the others, so a node without it
// fails the check, by name.
func guestImageCheck(base, ref string, nodes []corev1.Node) environment.Check {
	const name = "guest image"
	var on, missing []string
	for _, n := range nodes {
		if !nodeReady(n) || n.Spec.Unschedulable {
			continue
		}
		if nodeHasImage(n, ref) {
			on = append(on, n.Name)
		} else {
			missing = append(missing, n.Name)
		}
	}
	const lists = "a node lists only its 50 largest images, and a load there only a minute or so later"
	build := "agentbox image build --guest --from " + base + " (--save FILE for an archive), then "
	if base == ref { // --image named the guest-layered image itself
		build = ""
	}
	load := build + "scripts/k8s-cluster.sh load " + ref + " (the project's test cluster: into every node); " +
		"elsewhere load its archive into each node (ctr -n k8s.io images import, kind load image-archive), or push it to a registry the nodes pull from (--push REPO)"
	switch {
	case len(missing) == 0 && len(on) == 0:
		return environment.Check{Name: name, OK: true, Detail: ref + ": no Ready node to look on"}
	case len(missing) == 0:
		return environment.Check{Name: name, OK: true, Detail: ref + " is on every Ready node (" + plural.S(len(on), "node") + ")"}
	case len(on) == 0:
		return environment.Check{Name: name, Detail: ref + " is on no Ready node (" + lists + "; a registry may still have it)", Fix: load}
	}
	return environment.Check{Name: name,
		Detail: fmt.Sprintf("%s is on %d of %d Ready nodes, not on %s: a Pod placed there fails to pull it unless a registry has it (%s)",
			ref, len(on), len(on)+len(missing), strings.Join(missing, ", "), lists),
		Fix: load}
}

// nodeHasImage says whether n lists ref (as given, or as containerd names
// a Docker Hub image).
func nodeHasImage(n corev1.Node, ref string) bool {
	for _, im := range n.Status.Images {
		for _, name := range im.Names {
			if name == ref || name == "docker.io/"+ref || name == "docker.io/library/"+ref {
				return true
			}
		}
	}
	return false
}
