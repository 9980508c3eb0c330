package kubernetes

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/codegirl-games/agentbox/images"
)

// serveManifest is the manifest that runs agentbox serve in a cluster.
var serveManifest = filepath.Join("..", "..", "deploy", "kubernetes", "serve.yaml")

// TestServeManifest holds deploy/kubernetes/serve.yaml to what the backend
// needs and to agentbox's posture: its Role grants exactly the permissions
// Check asks for and the events lastWarning reads (no more), serve runs the binary the guest image carries,
// not as root, without capabilities, on a read-only root, and every object
// is in one namespace the RoleBinding's subject names.
func TestServeManifest(t *testing.T) {
	data, err := os.ReadFile(serveManifest)
	if err != nil {
		t.Fatal(err)
	}
	var (
		role *rbacv1.Role
		dep  *appsv1.Deployment
		bind *rbacv1.RoleBinding
		kind []string
	)
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("%s: %v\n%s", serveManifest, err, doc)
		}
		kind = append(kind, gvk.Kind)
		switch o := obj.(type) {
		case *rbacv1.Role:
			role = o
		case *rbacv1.RoleBinding:
			bind = o
		case *appsv1.Deployment:
			dep = o
		case *corev1.ServiceAccount, *corev1.Service:
		default:
			t.Errorf("unexpected %s", gvk.Kind)
		}
		if ns := obj.(interface{ GetNamespace() string }).GetNamespace(); ns != "agentbox" {
			t.Errorf("%s in namespace %q, want agentbox", gvk.Kind, ns)
		}
	}
	if !slices.Equal(kind, []string{"ServiceAccount", "Role", "RoleBinding", "Deployment", "Service"}) {
		t.Fatalf("kinds %v", kind)
	}

	type grant struct{ verb, resource, group string }
	var granted, want []grant
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					granted = append(granted, grant{v, res, g})
				}
			}
		}
	}
	for _, p := range permissions {
		res := p.resource
		if p.sub != "" {
			res += "/" + p.sub
		}
		want = append(want, grant{p.verb, res, p.group})
	}
	// Not required (Check does not ask), read for the error's message.
	want = append(want, grant{"list", "events", ""})
	cmp := func(a, b grant) int {
		return strings.Compare(a.group+"|"+a.resource+"|"+a.verb, b.group+"|"+b.resource+"|"+b.verb)
	}
	slices.SortFunc(granted, cmp)
	slices.SortFunc(want, cmp)
	if !slices.Equal(granted, want) {
		t.Errorf("the Role grants\n%v\nthe backend needs (check.go's permissions)\n%v", granted, want)
	}
	if s := bind.Subjects; len(s) != 1 || s[0].Kind != "ServiceAccount" || s[0].Name != "agentbox-serve" || s[0].Namespace != "agentbox" || bind.RoleRef.Name != role.Name {
		t.Errorf("RoleBinding %+v → %+v", bind.Subjects, bind.RoleRef)
	}

	pod := dep.Spec.Template.Spec
	if pod.ServiceAccountName != "agentbox-serve" || len(pod.Containers) != 1 {
		t.Fatalf("pod spec: %+v", pod)
	}
	c := pod.Containers[0]
	if !slices.Equal(c.Command, []string{images.GuestPath}) || c.Image != "IMAGE" {
		t.Errorf("container runs %v of %q; want %s of the placeholder IMAGE", c.Command, c.Image, images.GuestPath)
	}
	for _, a := range []string{"serve", "--backend=kubernetes", "--tls-cert=/etc/agentbox/tls/tls.crt", "--tls-key=/etc/agentbox/tls/tls.key"} {
		if !slices.Contains(c.Args, a) {
			t.Errorf("args %v lack %s", c.Args, a)
		}
	}
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || sc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.Privileged != nil && *sc.Privileged {
		t.Errorf("posture: pod %+v, container %+v", psc, sc)
	}
	token := false
	for _, e := range c.Env {
		if e.Name == "AGENTBOX_TOKEN" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			token = true
		}
	}
	if !token {
		t.Error("the token is not read from a Secret")
	}
}
