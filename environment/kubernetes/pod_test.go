package kubernetes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

// TestPodSpec: the Pod is hardened as the Docker backend's container is,
// sized by the flags, and labelled for gc.
func TestPodSpec(t *testing.T) {
	cfg := environment.Config{RunID: "run-1", Runtime: "gvisor"}
	res := environment.Resources{CPUs: 1.5, MemoryMB: 768, TmpfsMB: 128, ShmMB: 32}.WithDefaults()
	small := podGuest{ref: "img:tag-guest-0123", id: "0123", small: true}
	p := podSpec("agentbox-run-1-abcd", "ns", small, cfg, res, 2*time.Hour, "", "g1")
	c := p.Spec.Containers[0]
	sc := c.SecurityContext
	tmp, shm := p.Spec.Volumes[0].EmptyDir, p.Spec.Volumes[1].EmptyDir
	checks := []struct {
		what string
		ok   bool
	}{
		{"one container", len(p.Spec.Containers) == 1 && len(p.Spec.InitContainers) == 0},
		{"runs as uid/gid 1000, non-root", *sc.RunAsUser == 1000 && *sc.RunAsGroup == 1000 && *sc.RunAsNonRoot && *p.Spec.SecurityContext.RunAsNonRoot},
		{"read-only root", *sc.ReadOnlyRootFilesystem},
		{"all capabilities dropped", len(sc.Capabilities.Drop) == 1 && sc.Capabilities.Drop[0] == "ALL" && len(sc.Capabilities.Add) == 0},
		{"no privilege escalation, not privileged", !*sc.AllowPrivilegeEscalation && !*sc.Privileged},
		{"RuntimeDefault seccomp", sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault && p.Spec.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault},
		{"no service-account token", !*p.Spec.AutomountServiceAccountToken},
		{"no service links", !*p.Spec.EnableServiceLinks},
		{"no host namespaces", !p.Spec.HostNetwork && !p.Spec.HostPID && !p.Spec.HostIPC && (p.Spec.ShareProcessNamespace == nil || !*p.Spec.ShareProcessNamespace)},
		{"never restarted", p.Spec.RestartPolicy == corev1.RestartPolicyNever},
		{"no cluster DNS", p.Spec.DNSPolicy == corev1.DNSNone && len(p.Spec.DNSConfig.Nameservers) == 1 && p.Spec.DNSConfig.Nameservers[0] == "127.0.0.1" && len(p.Spec.DNSConfig.Searches) == 0},
		{"activeDeadlineSeconds", *p.Spec.ActiveDeadlineSeconds == 7200},
		{"RuntimeClass from --runtime", p.Spec.RuntimeClassName != nil && *p.Spec.RuntimeClassName == "gvisor"},
		{"memory-backed /tmp of --tmpfs", tmp.Medium == corev1.StorageMediumMemory && tmp.SizeLimit.Value() == 128<<20 && c.VolumeMounts[0].MountPath == "/tmp"},
		{"memory-backed /dev/shm", shm.Medium == corev1.StorageMediumMemory && shm.SizeLimit.Value() == 32<<20 && c.VolumeMounts[1].MountPath == "/dev/shm"},
		{"CPU limit", c.Resources.Limits.Cpu().MilliValue() == 1500},
		{"memory limit = request", c.Resources.Limits.Memory().Value() == 768<<20 && c.Resources.Requests.Memory().Value() == 768<<20},
		{"the guest on attached stdin, once", c.Stdin && c.StdinOnce && !c.TTY},
		{"the guest (agentbox-guest) awaits the host", strings.Join(c.Command, " ") == "/opt/agentbox/agentbox-guest guest --sandboxed --await-host"},
		{"the guest image", c.Image == "img:tag-guest-0123"},
		{"labels for the policy, gc and spreading", p.Labels[LabelTool] == "agentbox" && p.Labels[LabelRun] == "run-1" && p.Labels[LabelGroup] == "g1"},
		{"owner annotations", p.Annotations[AnnotationRun] == "run-1" && p.Annotations[AnnotationOwnerPID] != "" && p.Annotations[AnnotationOwnerStart] != ""},
		{"the guest image's key", p.Annotations[AnnotationGuest] == "0123"},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: no", c.what)
		}
	}
	// An image without agentbox-guest: agentbox itself is the guest, in
	// a Pod hardened exactly as the other — only the command differs.
	whole := podSpec("agentbox-run-1-abcd", "ns", podGuest{ref: "img:tag-guest-0123", id: "0123"}, cfg, res, 2*time.Hour, "", "g1")
	if got := strings.Join(whole.Spec.Containers[0].Command, " "); got != "/opt/agentbox/agentbox guest --sandboxed --await-host" {
		t.Errorf("agentbox alone: the command is %q", got)
	}
	whole.Spec.Containers[0].Command = p.Spec.Containers[0].Command
	if !reflect.DeepEqual(whole, p) {
		t.Errorf("the Pods of the two guests differ beyond the command:\n%+v\n%+v", whole.Spec, p.Spec)
	}
	if p := podSpec("n", "ns", podGuest{ref: "i", id: "g"}, environment.Config{}, res, time.Hour, "", "g1"); p.Spec.RuntimeClassName != nil {
		t.Errorf("a RuntimeClass without --runtime: %q", *p.Spec.RuntimeClassName)
	}
	// The deny-all policy selects exactly the Pods' label and allows nothing.
	np := denyAll("ns")
	if np.Spec.PodSelector.MatchLabels[LabelTool] != p.Labels[LabelTool] || len(np.Spec.PolicyTypes) != 2 || len(np.Spec.Ingress)+len(np.Spec.Egress) != 0 {
		t.Errorf("policy = %+v", np.Spec)
	}
}

// TestNames: run IDs of any length and alphabet make valid label values
// and Pod names, distinct for distinct IDs.
func TestNames(t *testing.T) {
	long := strings.Repeat("envtest-TestConformance-LaunchErrors-window-never-appears-", 3)
	seen := map[string]string{}
	for _, id := range []string{"20261201-124732-mover-5b9929", "", "a/b c", "UPPER_case.dots", long, long + "x", "-leading-", "日本語"} {
		l := RunLabel(id)
		if errs := validation.IsValidLabelValue(l); len(errs) > 0 {
			t.Errorf("RunLabel(%q) = %q: %v", id, l, errs)
		}
		if prev, dup := seen[l]; dup {
			t.Errorf("RunLabel(%q) = RunLabel(%q) = %q", id, prev, l)
		}
		seen[l] = id
		n := podName(id)
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			t.Errorf("podName(%q) = %q: %v", id, n, errs)
		}
	}
	if RunLabel("simple-run") != "simple-run" {
		t.Errorf("a valid ID changed: %q", RunLabel("simple-run"))
	}
}

// TestUnreachable: no cluster configured, and a cluster that does not
// answer, end Create with an environment error naming the cause, quickly.
func TestUnreachable(t *testing.T) {
	guest := testenv.Build(t, "./cmd/agentbox")
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o600)
	closed := filepath.Join(dir, "closed")
	os.WriteFile(closed, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600)
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a cluster
	t.Setenv("HOME", dir)
	for _, c := range []struct{ name, kubeconfig, want string }{
		{"none configured", empty, "no cluster configured"},
		{"does not answer", closed, "https://127.0.0.1:1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", c.kubeconfig)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			env, err := (&Backend{}).Create(ctx, environment.Config{RunID: "unreachable", GuestBinary: guest})
			if err == nil {
				env.Close(ctx)
			}
			t.Logf("%v (after %v)", err, time.Since(start).Round(time.Millisecond))
			if !errors.Is(err, environment.ErrUnavailable) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("want an environment error naming %q, got %v", c.want, err)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("it took %v", d)
			}
			if err := (&Backend{}).Probe(ctx); !errors.Is(err, environment.ErrUnavailable) {
				t.Errorf("Probe = %v, want ErrUnavailable", err)
			}
		})
	}
}

// TestAPIError: an API error says what it is: a permission the
// credentials lack, a refusal by an admission rule (a RuntimeClass that
// does not exist), a namespace that does not exist.
func TestAPIError(t *testing.T) {
	c := &cluster{namespace: "ns", host: "https://api:6443"}
	pods := schema.GroupResource{Resource: "pods"}
	for _, k := range []struct {
		name string
		err  error
		want string
		not  string
	}{
		{"rbac", apierrors.NewForbidden(pods, "p", errors.New(`User "u" cannot create resource "pods" in API group "" in the namespace "ns"`)), `permission denied in namespace "ns"`, "refused"},
		{"admission", apierrors.NewForbidden(pods, "p", errors.New(`pod rejected: RuntimeClass "gvisor" not found`)), `refused by the cluster in namespace "ns" (not a missing permission): pods "p" is forbidden: pod rejected: RuntimeClass "gvisor" not found`, "permission denied"},
		{"no namespace", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "ns"), `namespace "ns" does not exist`, ""},
		{"unauthorized", apierrors.NewUnauthorized("bad token"), "refused our credentials", ""},
		{"transport", errors.New("dial tcp: connection refused"), "the API server at https://api:6443: dial tcp: connection refused", ""},
	} {
		err := c.apiError("create pod p", k.err)
		if !errors.Is(err, environment.ErrUnavailable) || !strings.Contains(err.Error(), k.want) || k.not != "" && strings.Contains(err.Error(), k.not) {
			t.Errorf("%s: %v; want %q", k.name, err, k.want)
		}
	}
}

// TestSpread: --spread's modes as topology spread constraints over the
// nodes, by the Backend's group label; soft is the default.
func TestSpread(t *testing.T) {
	res := environment.Resources{}.WithDefaults()
	for _, c := range []struct {
		spread string
		want   corev1.UnsatisfiableConstraintAction // "": no constraint
	}{
		{"", corev1.ScheduleAnyway},
		{SpreadSoft, corev1.ScheduleAnyway},
		{SpreadHard, corev1.DoNotSchedule},
		{SpreadNone, ""},
	} {
		p := podSpec("n", "ns", podGuest{ref: "i", id: "g"}, environment.Config{}, res, time.Hour, c.spread, "g1")
		tsc := p.Spec.TopologySpreadConstraints
		if c.want == "" {
			if len(tsc) != 0 {
				t.Errorf("spread %q: constraints %+v", c.spread, tsc)
			}
			continue
		}
		if len(tsc) != 1 {
			t.Fatalf("spread %q: constraints %+v", c.spread, tsc)
		}
		k := tsc[0]
		if k.WhenUnsatisfiable != c.want || k.MaxSkew != 1 || k.TopologyKey != corev1.LabelHostname ||
			k.LabelSelector.MatchLabels[LabelGroup] != "g1" || len(k.LabelSelector.MatchLabels) != 1 ||
			*k.NodeTaintsPolicy != corev1.NodeInclusionPolicyHonor {
			t.Errorf("spread %q: %+v", c.spread, k)
		}
	}
	if err := CheckSpread("wide"); err == nil || !strings.Contains(err.Error(), `"wide"`) {
		t.Errorf("CheckSpread(wide) = %v", err)
	}
	if _, err := environment.Lookup(Name, environment.Options{Spread: "wide"}); err == nil {
		t.Error("the factory took spread \"wide\"")
	}
	b, err := environment.Lookup(Name, environment.Options{Spread: SpreadHard})
	if err != nil || b.(*Backend).Spread != SpreadHard {
		t.Errorf("Lookup with spread hard: %v, %v", b, err)
	}
	// One group per Backend: the Pods of one eval, not of another.
	b1, b2 := &Backend{}, &Backend{}
	first := b1.groupLabel()
	if again := b1.groupLabel(); again != first || first == b2.groupLabel() {
		t.Errorf("group labels %q %q %q", first, again, b2.groupLabel())
	}
	if errs := validation.IsValidLabelValue(b1.groupLabel()); len(errs) > 0 {
		t.Errorf("group label %q: %v", b1.groupLabel(), errs)
	}
}
