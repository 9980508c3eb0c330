package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv"
	"github.com/codegirl-games/agentbox/internal/owner"
)

// Labels select agentbox's Pods (the NetworkPolicy, gc); annotations say
// who made them (gc's owner check), as the Docker backend's labels do.
const (
	LabelTool = "agentbox.dev/tool"
	LabelRun  = "agentbox.dev/run"
	// LabelGroup is the same on the Pods one Backend creates (those of
	// one eval): Backend.Spread spreads them over the nodes by it.
	LabelGroup = "agentbox.dev/group"

	AnnotationRun        = "agentbox.dev/run-id"
	AnnotationOwnerHost  = "agentbox.dev/owner-host"
	AnnotationOwnerPID   = "agentbox.dev/owner-pid"
	AnnotationOwnerStart = "agentbox.dev/owner-start"
	AnnotationGuest      = "agentbox.dev/guest"
)

// PolicyName is the NetworkPolicy that denies all traffic to and from the
// Pods labelled LabelTool=agentbox in a namespace.
const PolicyName = "agentbox-deny-all"

// containerName is the Pod's one container.
const containerName = "guest"

// sandboxUID is the user the guest and the app run as, as in the Docker
// backend's containers.
const sandboxUID = 1000

// RunLabel is the value of LabelRun for a run ID: label values are at most
// 63 characters of [A-Za-z0-9._-], so a long or unusual ID is shortened and
// made unique with a hash of it.
func RunLabel(runID string) string {
	s := sanitize(runID, 63)
	if s == runID && s != "" {
		return s
	}
	sum := sha256.Sum256([]byte(runID))
	prefix := strings.Trim(sanitize(runID, 63-9), "-_.")
	if prefix == "" {
		prefix = "run"
	}
	return prefix + "-" + hex.EncodeToString(sum[:4])
}

// sanitize keeps the characters a label value may have (others become -),
// at most n of them, starting and ending alphanumeric.
func sanitize(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := b.String()
	if len(out) > n {
		out = out[:n]
	}
	return strings.Trim(out, "-_.")
}

// podName is a DNS label: "agentbox-" + the run's label (lowercased,
// shortened) + a random suffix.
func podName(runID string) string {
	base := strings.ToLower(strings.NewReplacer("_", "-", ".", "-").Replace(RunLabel(runID)))
	if len(base) > 40 {
		base = base[:40]
	}
	base = strings.Trim(base, "-")
	if base == "" {
		return "agentbox-" + randomSuffix()
	}
	return "agentbox-" + base + "-" + randomSuffix()
}

// podSpec is the hardened Pod: non-root, read-only root, no capabilities,
// no privilege escalation, RuntimeDefault seccomp, no service-account
// token, no service links, memory-backed emptyDirs for /tmp and /dev/shm
// sized as the flags say, CPU and memory limits, the RuntimeClass for
// --runtime, activeDeadlineSeconds, the guest (guest.command() of
// guest.ref) on attached stdin.
func podSpec(name, namespace string, guest podGuest, cfg environment.Config, res environment.Resources, deadline time.Duration, spread, group string) *corev1.Pod {
	no, yes := false, true
	uid := int64(sandboxUID)
	grace := int64(1)
	active := int64(deadline / time.Second)
	mem := resource.NewQuantity(int64(res.MemoryMB)<<20, resource.BinarySI)
	cpu := resource.NewMilliQuantity(int64(res.CPUs*1000), resource.DecimalSI)
	// Requests: all of the memory (a Pod that fits gets it; memory is not
	// given back), a quarter of the CPU (a desktop idles most of a run),
	// so an eval's Pods spread over nodes by memory.
	cpuReq := resource.NewMilliQuantity(max(int64(res.CPUs*250), 1), resource.DecimalSI)
	tmp := resource.NewQuantity(int64(res.TmpfsMB)<<20, resource.BinarySI)
	shm := resource.NewQuantity(int64(res.ShmMB)<<20, resource.BinarySI)
	host, _ := os.Hostname()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: namespace,
			Labels:    map[string]string{LabelTool: "agentbox", LabelRun: RunLabel(cfg.RunID), LabelGroup: group},
			Annotations: map[string]string{
				AnnotationRun:        cfg.RunID,
				AnnotationOwnerHost:  host,
				AnnotationOwnerPID:   strconv.Itoa(os.Getpid()),
				AnnotationOwnerStart: strconv.FormatUint(owner.Start(os.Getpid()), 10),
				AnnotationGuest:      guest.id,
			},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			// No cluster DNS in the sandbox: it has no network to use it,
			// and the cluster's search domains are not the app's business.
			// A nameserver is required: the sandbox's own loopback, where none
			// listens.
			DNSPolicy:                     corev1.DNSNone,
			DNSConfig:                     &corev1.PodDNSConfig{Nameservers: []string{"127.0.0.1"}},
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			ActiveDeadlineSeconds:         &active,
			TerminationGracePeriodSeconds: &grace,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser:      &uid,
				RunAsGroup:     &uid,
				RunAsNonRoot:   &yes,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            containerName,
				Image:           guest.ref,
				ImagePullPolicy: corev1.PullIfNotPresent,
				// The guest is the container's init (PID 1): it reaps, and
				// nothing inside can signal it (see the Docker backend).
				Command:    guest.command(),
				WorkingDir: "/tmp",
				Env: []corev1.EnvVar{
					{Name: "HOME", Value: guestenv.Home},
					{Name: "LANG", Value: "C.UTF-8"},
					{Name: "PATH", Value: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
				},
				Stdin:     true,
				StdinOnce: true,
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceCPU: *cpu, corev1.ResourceMemory: *mem},
					Requests: corev1.ResourceList{corev1.ResourceCPU: *cpuReq, corev1.ResourceMemory: *mem},
				},
				SecurityContext: &corev1.SecurityContext{
					RunAsUser:                &uid,
					RunAsGroup:               &uid,
					RunAsNonRoot:             &yes,
					Privileged:               &no,
					AllowPrivilegeEscalation: &no,
					ReadOnlyRootFilesystem:   &yes,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "tmp", MountPath: "/tmp"},
					{Name: "shm", MountPath: "/dev/shm"},
				},
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			}},
			Volumes: []corev1.Volume{
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: tmp}}},
				{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: shm}}},
			},
		},
	}
	if cfg.Runtime != "" {
		rc := cfg.Runtime
		p.Spec.RuntimeClassName = &rc
	}
	if c := spreadConstraint(spread, group); c != nil {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{*c}
	}
	return p
}

// spreadConstraint is the topology spread constraint of a spreading mode
// (Backend.Spread) over the nodes, for the Pods labelled LabelGroup=group;
// nil for SpreadNone.
func spreadConstraint(spread, group string) *corev1.TopologySpreadConstraint {
	when := corev1.ScheduleAnyway
	switch spread {
	case SpreadNone:
		return nil
	case SpreadHard:
		when = corev1.DoNotSchedule
	}
	honor := corev1.NodeInclusionPolicyHonor
	return &corev1.TopologySpreadConstraint{
		MaxSkew:           1,
		TopologyKey:       corev1.LabelHostname,
		WhenUnsatisfiable: when,
		LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{LabelGroup: group}},
		// A cordoned or tainted node (drained, NotReady) takes no Pod:
		// it does not count either, or a hard spread would wait for it.
		NodeAffinityPolicy: &honor,
		NodeTaintsPolicy:   &honor,
	}
}

// denyAll is the NetworkPolicy that selects every agentbox Pod of the
// namespace and allows no traffic in or out.
func denyAll(namespace string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: PolicyName, Namespace: namespace, Labels: map[string]string{LabelTool: "agentbox"}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelTool: "agentbox"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}

// policies remembers the namespaces whose policy this process ensured.
var (
	policies sync.Map // namespace → struct{}
	guestIDs sync.Map // file key → images.GuestID
)

// ensurePolicy creates the namespace's deny-all NetworkPolicy, or checks
// that the one there still denies all; a Pod is never created without it.
func (c *cluster) ensurePolicy(ctx context.Context) error {
	if _, ok := policies.Load(c.namespace); ok {
		return nil
	}
	want := denyAll(c.namespace)
	_, err := c.cs.NetworkingV1().NetworkPolicies(c.namespace).Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var got *networkingv1.NetworkPolicy
		got, err = c.cs.NetworkingV1().NetworkPolicies(c.namespace).Get(ctx, PolicyName, metav1.GetOptions{})
		if err == nil && !reflect.DeepEqual(got.Spec, want.Spec) {
			return fmt.Errorf("%w: kubernetes: the NetworkPolicy %s/%s no longer denies all traffic of agentbox's Pods (it was changed); delete it and agentbox makes it anew", environment.ErrUnavailable, c.namespace, PolicyName)
		}
	}
	if err != nil {
		return c.apiError(fmt.Sprintf("create the NetworkPolicy %s/%s that isolates agentbox's Pods", c.namespace, PolicyName), err)
	}
	policies.Store(c.namespace, struct{}{})
	return nil
}

// apiMessage is an API error's message.
func apiMessage(err error) string {
	if s, ok := err.(apierrors.APIStatus); ok && s.Status().Message != "" {
		return s.Status().Message
	}
	return err.Error()
}

// apiError wraps an API error as an environment error that names the
// cause: no permission, no namespace, no answer.
func (c *cluster) apiError(what string, err error) error {
	switch {
	case apierrors.IsForbidden(err) && strings.Contains(apiMessage(err), " cannot "):
		// The authorizer's words: `User "u" cannot create resource …`.
		return fmt.Errorf("%w: kubernetes: %s: permission denied in namespace %q: %v", environment.ErrUnavailable, what, c.namespace, apiMessage(err))
	case apierrors.IsForbidden(err):
		// An admission rule: a RuntimeClass that does not exist, Pod
		// Security, a quota.
		return fmt.Errorf("%w: kubernetes: %s: refused by the cluster in namespace %q (not a missing permission): %v", environment.ErrUnavailable, what, c.namespace, apiMessage(err))
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%w: kubernetes: %s: the API server at %s refused our credentials: %v", environment.ErrUnavailable, what, c.host, apiMessage(err))
	case apierrors.IsNotFound(err) && strings.Contains(err.Error(), "namespaces"):
		return fmt.Errorf("%w: kubernetes: %s: namespace %q does not exist", environment.ErrUnavailable, what, c.namespace)
	}
	if _, ok := err.(apierrors.APIStatus); ok {
		return fmt.Errorf("%w: kubernetes: %s: %v", environment.ErrUnavailable, what, apiMessage(err))
	}
	return fmt.Errorf("%w: kubernetes: %s: the API server at %s: %w", environment.ErrUnavailable, what, c.host, err)
}
