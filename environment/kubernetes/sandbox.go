package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv"
	"github.com/codegirl-games/agentbox/internal/textcut"
	"github.com/codegirl-games/agentbox/wire"
)

// sandbox is one Pod: guestenv.Env does everything the guest does; the Pod
// is created in Create, and attached to, explained and deleted here.
type sandbox struct {
	c       *cluster
	name    string
	image   string
	runtime string
	node    string
	uid     string
	created bool // the create request was sent (the Pod may exist)

	// The attach stream.
	cancel   context.CancelFunc // ends the stream
	stdinW   *io.PipeWriter     // what the guest reads
	streamed chan struct{}      // closed when the stream has ended
	mu       sync.Mutex
	sErr     error // why the stream ended
	protocol string

	// The watch of the Pod's deletion (watchGone), until Teardown.
	unwatch func()
	watched chan struct{}
}

var _ guestenv.Sandbox = (*sandbox)(nil)

// Info implements guestenv.Sandbox.
func (s *sandbox) Info() environment.Info {
	extra := map[string]string{"namespace": s.c.namespace, "pod": s.name}
	if s.node != "" {
		extra["node"] = s.node
	}
	if s.protocol != "" {
		extra["stream"] = s.protocol
	}
	return environment.Info{ID: s.name, Image: s.image, Runtime: s.runtime, Extra: extra}
}

// attach opens the Pod's attach stream (stdin, stdout, stderr) and returns
// the guest's stdout and stderr; stdin is s.stdinW.
func (s *sandbox) attach() (stdout, stderr io.Reader, err error) {
	req := s.c.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(s.c.namespace).Name(s.name).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Container: containerName, Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(s.c.cfg, "GET", req.URL().String())
	if err != nil {
		return nil, nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(s.c.cfg, "POST", req.URL())
	if err != nil {
		return nil, nil, err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		fallback := httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		if fallback {
			s.mu.Lock()
			s.protocol = "spdy"
			s.mu.Unlock()
		}
		return fallback
	})
	if err != nil {
		return nil, nil, err
	}
	s.protocol = "websocket"
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	// The stream outlives Create's context: it ends with Teardown.
	sctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.stdinW, s.streamed = cancel, inW, make(chan struct{})
	go func() {
		defer close(s.streamed)
		err := ex.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: errW})
		if err == nil {
			err = io.EOF
		} else {
			s.mu.Lock()
			s.sErr = err
			s.mu.Unlock()
		}
		inR.CloseWithError(err)
		outW.CloseWithError(err)
		errW.Close()
	}()
	return outR, errR, nil
}

// goAhead tells the guest that the host listens (wire.GoAhead), again every
// goAheadEvery until its hello's first byte has arrived (seen is closed) or
// ctx ends: a hello written in the moment between the stream's stdin and
// stdout being joined to the container is lost, and the guest says it
// again for each go-ahead; helloFilter drops the copies that do arrive.
// Its writes are synchronous, so once it has returned no go-ahead can
// follow: gatedWriter stops it before the host's first frame.
func (s *sandbox) goAhead(ctx context.Context, seen <-chan struct{}) error {
	t := time.NewTicker(goAheadEvery)
	defer t.Stop()
	for {
		select {
		case <-seen:
			return nil
		case <-ctx.Done():
			return nil
		default:
		}
		if _, err := s.stdinW.Write([]byte{wire.GoAhead}); err != nil {
			return fmt.Errorf("%w: the attach stream: %w", environment.ErrGuest, err)
		}
		select {
		case <-seen:
			return nil
		case <-s.streamed:
			return nil // Dial reads the end and says so
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// startGoAhead runs goAhead until the hello arrives and returns the stdin
// the protocol writes to, and stop, which ends goAhead, waits for it and
// says why it failed, if it did.
func (s *sandbox) startGoAhead(ctx context.Context, seen <-chan struct{}) (stdin io.WriteCloser, stop func() error) {
	gctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.goAhead(gctx, seen) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-ctx.Done():
				// A write the stream does not take (it never came up):
				// Create has failed, and the teardown closes stdin.
			}
		})
		return err
	}
	return &gatedWriter{w: s.stdinW, before: func() { stop() }}, stop
}

// goAheadEvery is how long the host waits for the hello before it sends
// the go-ahead again.
var goAheadEvery = time.Second

// gatedWriter is the guest's stdin as the protocol writes it: before the
// first frame it calls before (which stops goAhead and waits for it), so a
// go-ahead byte never lands among the host's frames.
type gatedWriter struct {
	w      io.WriteCloser
	once   sync.Once
	before func()
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	g.once.Do(g.before)
	return g.w.Write(p)
}

// Close closes the stream's stdin (the liveness check's last resort).
func (g *gatedWriter) Close() error { return g.w.Close() }

// streamErr is why the attach stream ended, nil while it runs or when it
// ended cleanly.
func (s *sandbox) streamErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sErr
}

// Explain implements guestenv.Sandbox: how the Pod ended, from its status
// (evicted, OOM-killed, past its deadline, deleted), and how the attach
// stream ended.
func (s *sandbox) Explain(ctx context.Context, lastWords <-chan struct{}) []string {
	if !s.created {
		return nil
	}
	select {
	case <-lastWords:
	case <-time.After(200 * time.Millisecond):
	}
	var parts []string
	node := s.node
	if err := s.streamErr(); err != nil && !errors.Is(err, context.Canceled) {
		parts = append(parts, "the attach stream broke: "+err.Error())
	}
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	p, err := s.c.cs.CoreV1().Pods(s.c.namespace).Get(gctx, s.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		parts = append(parts, fmt.Sprintf("pod %s/%s was deleted", s.c.namespace, s.name))
	case err != nil:
		parts = append(parts, fmt.Sprintf("the pod's status cannot be read (the API server at %s: %v)", s.c.host, err))
	default:
		if d := podEnded(p); d != "" {
			parts = append(parts, d)
		}
		if p.Spec.NodeName != "" {
			node = p.Spec.NodeName
		}
	}
	// The node, always: a stream that ended while the Pod still runs is
	// most often a node whose kubelet stopped (still Ready in the API
	// until the node monitor's grace period ends).
	if node != "" {
		nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		parts = append(parts, s.c.nodeState(nctx, node))
	}
	return parts
}

// nodeState says how a Pod's node is, for an episode that ended: NotReady
// (its kubelet stopped or lost), cordoned (drained), or answering; where
// the node may not be read, only its name.
func (c *cluster) nodeState(ctx context.Context, name string) string {
	n, err := c.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "the pod ran on node " + name
	}
	var b []string
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue {
			b = append(b, fmt.Sprintf("is NotReady (%s: %s)", cond.Reason, textcut.Bytes(cond.Message, 200, "…")))
		}
	}
	if n.Spec.Unschedulable {
		b = append(b, "is cordoned (unschedulable: drained, or being drained)")
	}
	if len(b) == 0 {
		// Ready still: a kubelet that just stopped is NotReady only
		// after the node monitor's grace period. Ask it through the API
		// server (where we may: nodes/proxy).
		err := c.cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/" + name + "/proxy/healthz").Do(ctx).Error()
		if err != nil && !apierrors.IsForbidden(err) && !apierrors.IsUnauthorized(err) {
			b = append(b, "does not answer: its kubelet is unreachable ("+textcut.Bytes(apiMessage(err), 200, "…")+")")
		}
	}
	if len(b) == 0 {
		return "the pod ran on node " + name + " (Ready)"
	}
	return "the pod's node " + name + " " + strings.Join(b, " and ")
}

// podEnded describes a Pod that has ended or is ending; "" while it runs.
func podEnded(p *corev1.Pod) string {
	var b []string
	if p.DeletionTimestamp != nil {
		b = append(b, "is being deleted")
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			b = append(b, fmt.Sprintf("disrupted (%s: %s)", c.Reason, c.Message))
		}
	}
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		w := "ended: " + string(p.Status.Phase)
		if p.Status.Reason != "" {
			w += ", " + p.Status.Reason
		}
		if p.Status.Message != "" {
			w += ": " + p.Status.Message
		}
		b = append(b, w)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			w := fmt.Sprintf("container %s terminated (exit code %d", cs.Name, t.ExitCode)
			if t.Signal != 0 {
				w += fmt.Sprintf(", signal %d", t.Signal)
			}
			if t.Reason != "" {
				w += ", " + t.Reason
			}
			w += ")"
			if m := strings.TrimSpace(t.Message); m != "" {
				w += ": " + textcut.Bytes(m, 300, "…")
			}
			b = append(b, w)
		}
	}
	if len(b) == 0 {
		return ""
	}
	return fmt.Sprintf("pod %s/%s %s", p.Namespace, p.Name, strings.Join(b, "; "))
}

// startWatch watches the Pod, from resource version rv, until Teardown:
// the moment it is being deleted (evicted, drained, deleted by another
// hand) or has ended, the attach stream is ended, so the guest is seen
// gone at once rather than when its kubelet gets round to stopping the
// container: a warm pool never hands out a Pod on its way out (its
// environment's Done is closed), and an episode in one ends with the
// Pod's reason (Explain). A watch the API server ends (a restart, its
// timeout) is made again from the Pod's current state.
func (s *sandbox) startWatch(rv string) {
	ctx, cancel := context.WithCancel(context.Background())
	s.unwatch, s.watched = cancel, make(chan struct{})
	go func() {
		defer close(s.watched)
		if s.watchGone(ctx, rv) {
			s.cancel() // the stream ends; the guest's client sees it
		}
	}()
}

// watchGone returns true once the Pod is being deleted or has ended,
// false when ctx ends first.
func (s *sandbox) watchGone(ctx context.Context, rv string) bool {
	ending := func(p *corev1.Pod) bool {
		return p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
	}
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		w, err := s.c.cs.CoreV1().Pods(s.c.namespace).Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", s.name).String(),
			ResourceVersion: rv,
		})
		if err == nil {
			for ev := range w.ResultChan() {
				switch ev.Type {
				case watch.Deleted:
					w.Stop()
					return true
				case watch.Added, watch.Modified:
					if p, ok := ev.Object.(*corev1.Pod); ok {
						rv = p.ResourceVersion
						if ending(p) {
							w.Stop()
							return true
						}
					}
				case watch.Error:
					rv = "" // expired: from the current state
				}
				delay = 100 * time.Millisecond
			}
			w.Stop()
		} else if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			rv = ""
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
		if rv == "" {
			// From the current state: a Pod deleted while the watch was
			// down (the API server restarting) is noticed here.
			gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			p, err := s.c.cs.CoreV1().Pods(s.c.namespace).Get(gctx, s.name, metav1.GetOptions{})
			cancel()
			switch {
			case apierrors.IsNotFound(err):
				return true
			case err == nil && ending(p):
				return true
			case err == nil:
				rv = p.ResourceVersion
			}
		}
	}
	return false
}

// Teardown implements guestenv.Sandbox: the guest's stdin closes (it stops
// and the Pod ends), the stream ends, and the Pod is deleted; it returns
// once the Pod is gone from the API (its kubelet has stopped its
// containers).
func (s *sandbox) Teardown(ctx context.Context) error {
	if s.unwatch != nil {
		s.unwatch()
		<-s.watched
	}
	if s.stdinW != nil {
		_ = s.stdinW.Close() // the guest sees EOF and exits
		select {
		case <-s.streamed:
		case <-time.After(3 * time.Second):
		case <-ctx.Done():
		}
		s.cancel()
	}
	if !s.created {
		return nil
	}
	return s.c.deletePod(ctx, s.name)
}

// deletePod deletes a Pod and waits until it is gone: first with a second
// of grace, so the object stays until its kubelet has stopped the
// containers; by force after deleteForceAfter (a node that does not
// answer). API errors are retried until ctx ends (an API server
// restarting).
func (c *cluster) deletePod(ctx context.Context, name string) error {
	grace := int64(1)
	start := time.Now()
	forced := false
	delay := 50 * time.Millisecond
	var last error
	for {
		opts := metav1.DeleteOptions{GracePeriodSeconds: &grace}
		if !forced && time.Since(start) > deleteForceAfter {
			zero := int64(0)
			opts.GracePeriodSeconds, forced = &zero, true
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := c.cs.CoreV1().Pods(c.namespace).Delete(dctx, name, opts)
		if err == nil || apierrors.IsNotFound(err) {
			_, err = c.cs.CoreV1().Pods(c.namespace).Get(dctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				cancel()
				return nil
			}
		}
		cancel()
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return c.apiError("delete pod "+name, err) // retrying cannot help
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("delete pod %s/%s: %w (last: %v)", c.namespace, name, ctx.Err(), last)
			}
			return fmt.Errorf("pod %s/%s still exists after deletion: %w", c.namespace, name, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// deleteForceAfter is how long a graceful deletion may take before the Pod
// is deleted by force.
const deleteForceAfter = 20 * time.Second
