package kubernetes

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv"
	"github.com/codegirl-games/agentbox/internal/textcut"
)

// Create implements environment.Backend: it ensures the namespace's
// deny-all NetworkPolicy, creates the hardened Pod, waits for its
// container to run, attaches to it, performs the guest handshake and
// brings up the display. Every failure is an environment error that names
// its cause (no cluster, no permission, an image the cluster does not
// have, a Pod that stays Pending, one that ended), and leaves no Pod
// behind.
func (b *Backend) Create(ctx context.Context, cfg environment.Config) (_ environment.Environment, retErr error) {
	t0 := time.Now()
	res := cfg.Resources.WithDefaults()
	if err := res.Validate(); err != nil {
		return nil, err
	}
	guest, err := guestImage(cfg)
	if err != nil {
		return nil, err
	}
	c, err := b.connect()
	if err != nil {
		return nil, err
	}
	sb := &sandbox{c: c, name: podName(cfg.RunID), image: guest.ref, runtime: cfg.Runtime}
	g := guestenv.New(sb, guestenv.Options{Backend: Name, Config: cfg, Began: t0, Said: "guest said"})
	defer func() {
		if retErr != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			g.Close(cctx)
		}
	}()

	// The network by policy (--allow-net, --forward): the proxy runs here,
	// on the host; the guest carries each connection to it over the
	// attach stream, so the deny-all NetworkPolicy stays.
	if err := g.CarryNetwork(); err != nil {
		return nil, err
	}
	t := time.Now()
	if err := c.ensurePolicy(ctx); err != nil {
		return nil, err
	}
	pod := podSpec(sb.name, c.namespace, guest, cfg, res, b.deadline(), b.Spread, b.groupLabel())
	sb.created = true // from here on the Pod may exist, even if the answer is lost
	created, err := c.cs.CoreV1().Pods(c.namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		// The server's refusal (no permission, a bad spec, the name taken
		// by another by a rare chance) means there is no Pod of ours to
		// delete; a timeout or a lost answer may hide one.
		if _, answered := err.(apierrors.APIStatus); answered && !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err) {
			sb.created = false
		}
		return nil, c.apiError("create pod "+sb.name, err)
	}
	sb.uid = string(created.UID)
	g.Timing("pod_create", time.Since(t))

	t = time.Now()
	running, err := c.waitRunning(ctx, created, guest.base)
	if err != nil {
		return nil, err
	}
	sb.node = running.Spec.NodeName
	g.Timing("pod_running", time.Since(t))

	t = time.Now()
	stdout, stderr, err := sb.attach()
	if err != nil {
		return nil, fmt.Errorf("%w: attach to pod %s: %w", environment.ErrUnavailable, sb.name, err)
	}
	sb.startWatch(running.ResourceVersion)
	g.KeepStderr(stderr)
	hf := newHelloFilter(stdout)
	stdin, stop := sb.startGoAhead(ctx, hf.Seen())
	env, err := g.Start(ctx, hf, stdin, func(context.Context) error {
		g.Timing("attach", time.Since(t))
		return nil
	})
	if gerr := stop(); err != nil && gerr != nil && ctx.Err() == nil {
		return nil, g.Explain(ctx, gerr) // why there was no hello
	}
	return env, err
}

// waitRunning watches the Pod until its container runs. It fails at once,
// naming the cause, for what will not get better by waiting (an image the
// cluster has not and cannot pull, a container that cannot be created, a
// Pod that ended); a Pod that stays Pending (no node has room, a missing
// RuntimeClass handler) fails when ctx ends, with the scheduler's or
// kubelet's last word.
func (c *cluster) waitRunning(ctx context.Context, p *corev1.Pod, base string) (*corev1.Pod, error) {
	last := "Pending"
	rv := p.ResourceVersion
	for {
		if done, err := c.judge(p, base, &last); done {
			return p, err
		}
		w, err := c.cs.CoreV1().Pods(c.namespace).Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", p.Name).String(),
			ResourceVersion: rv,
		})
		if err == nil {
			for ev := range w.ResultChan() {
				switch ev.Type {
				case watch.Deleted:
					w.Stop()
					return nil, fmt.Errorf("%w: kubernetes: pod %s/%s was deleted while it started", environment.ErrUnavailable, c.namespace, p.Name)
				case watch.Added, watch.Modified:
					if np, ok := ev.Object.(*corev1.Pod); ok {
						p, rv = np, np.ResourceVersion
						if done, err := c.judge(p, base, &last); done {
							w.Stop()
							return p, err
						}
					}
				case watch.Error:
					rv = "" // expired: start from the current state
				}
			}
			w.Stop()
		}
		if ctx.Err() != nil {
			if w := c.lastWarning(context.WithoutCancel(ctx), p.Name); w != "" && !strings.Contains(last, strings.SplitN(w, ": ", 3)[len(strings.SplitN(w, ": ", 3))-1]) {
				last += "; " + w
			}
			return nil, fmt.Errorf("%w: kubernetes: pod %s/%s did not start in time (%v): %s", environment.ErrUnavailable, c.namespace, p.Name, ctx.Err(), last)
		}
		// The watch ended (an API server restarting, a timeout): read the
		// current state and watch again.
		time.Sleep(200 * time.Millisecond)
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		np, err := c.cs.CoreV1().Pods(c.namespace).Get(gctx, p.Name, metav1.GetOptions{})
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("%w: kubernetes: pod %s/%s was deleted while it started", environment.ErrUnavailable, c.namespace, p.Name)
		case err == nil:
			p, rv = np, np.ResourceVersion
		default:
			last = fmt.Sprintf("%s; the API server at %s: %v", last, c.host, err)
		}
	}
}

// lastWarning is the newest Warning event about a Pod ("FailedCreatePodSandBox:
// … no runtime for \"kata\" is configured"): where a kubelet says why a
// Pod does not start when its status does not. "" when there is none or
// events may not be read.
func (c *cluster) lastWarning(ctx context.Context, pod string) string {
	ectx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	list, err := c.cs.CoreV1().Events(c.namespace).List(ectx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": pod, "type": corev1.EventTypeWarning}.AsSelector().String(),
	})
	if err != nil || len(list.Items) == 0 {
		return ""
	}
	// A failure ("FailedCreatePodSandBox", "FailedMount") says more than
	// a notice repeated at every sync; then the newest.
	rank := func(e corev1.Event) int {
		if strings.HasPrefix(e.Reason, "Failed") {
			return 1
		}
		return 0
	}
	last := list.Items[0]
	for _, e := range list.Items[1:] {
		if r, lr := rank(e), rank(last); r > lr || r == lr && (e.LastTimestamp.After(last.LastTimestamp.Time) || e.EventTime.After(last.EventTime.Time)) {
			last = e
		}
	}
	return fmt.Sprintf("last warning: %s: %s", last.Reason, textcut.Bytes(strings.TrimSpace(last.Message), 500, "…"))
}

// judge decides on a Pod's state while it starts: done with nil when its
// container runs, done with an error when it never will; last is updated
// with what keeps it waiting.
func (c *cluster) judge(p *corev1.Pod, base string, last *string) (bool, error) {
	fail := func(class error, format string, a ...any) (bool, error) {
		return true, fmt.Errorf("%w: kubernetes: pod %s/%s: %s", class, c.namespace, p.Name, fmt.Sprintf(format, a...))
	}
	if d := podEnded(p); d != "" && p.Status.Phase != corev1.PodPending && p.Status.Phase != corev1.PodRunning {
		return true, fmt.Errorf("%w: kubernetes: %s before its guest started", environment.ErrUnavailable, d)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil {
			return true, nil
		}
		if t := cs.State.Terminated; t != nil {
			return fail(environment.ErrGuest, "the guest exited before agentbox could attach (exit code %d, %s): %s", t.ExitCode, t.Reason, textcut.Bytes(strings.TrimSpace(t.Message), 300, "…"))
		}
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName":
				return fail(environment.ErrImage, "image %s is not in the cluster and cannot be pulled (%s: %s): build it with `agentbox image build --guest --from %s` and load it into the cluster (--save FILE, then ctr -n k8s.io images import FILE or kind load image-archive FILE) or push it (--push REPO)",
					cs.Image, w.Reason, textcut.Bytes(w.Message, 300, "…"), base)
			case "CreateContainerConfigError", "CreateContainerError", "RunContainerError", "CrashLoopBackOff":
				return fail(environment.ErrUnavailable, "the container cannot start (%s): %s", w.Reason, textcut.Bytes(w.Message, 500, "…"))
			}
			*last = fmt.Sprintf("container %s: %s", w.Reason, textcut.Bytes(w.Message, 300, "…"))
		}
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
			*last = fmt.Sprintf("not scheduled (%s): %s", cond.Reason, textcut.Bytes(cond.Message, 500, "…"))
		}
	}
	if p.Spec.NodeName != "" && len(p.Status.ContainerStatuses) == 0 {
		*last = fmt.Sprintf("scheduled on node %s, whose kubelet has not started it", p.Spec.NodeName)
	}
	return false, nil
}
