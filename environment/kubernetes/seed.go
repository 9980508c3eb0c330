package kubernetes

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/codegirl-games/agentbox/environment"
)

var _ environment.SeedStepper = (*Backend)(nil)

// SeedStep implements environment.SeedStepper: one observe+act step the
// way agentbox's seed spike did, through the Pod's exec subresource as
// `kubectl exec` does — scrot to take a PNG, cat to read it back, xdotool
// to move the mouse: three processes and three exec streams per step. The
// image must have scrot and xdotool (the test image does). It returns the
// PNG's size.
func (b *Backend) SeedStep(ctx context.Context, env environment.Environment, x, y int) (int, error) {
	info := env.Info()
	if info.Backend != Name {
		return 0, fmt.Errorf("the seed-style step runs in a %s environment, not in one of %s", Name, info.Backend)
	}
	c, err := (&Backend{Namespace: info.Extra["namespace"], Kubeconfig: b.Kubeconfig}).connect()
	if err != nil {
		return 0, err
	}
	run := func(cmd ...string) ([]byte, error) {
		return c.exec(ctx, info.ID, append([]string{"env", "DISPLAY=" + info.Display, "HOME=/tmp/home"}, cmd...))
	}
	if _, err := run("scrot", "-o", "/tmp/seed.png"); err != nil {
		return 0, err
	}
	png, err := run("cat", "/tmp/seed.png")
	if err != nil {
		return 0, err
	}
	if _, err := run("xdotool", "mousemove", strconv.Itoa(x), strconv.Itoa(y)); err != nil {
		return 0, err
	}
	return len(png), nil
}

// exec runs a command in the Pod's container and returns its stdout.
func (c *cluster) exec(ctx context.Context, pod string, cmd []string) ([]byte, error) {
	req := c.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(c.namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: containerName, Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(c.cfg, "GET", req.URL().String())
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(c.cfg, "POST", req.URL())
	if err != nil {
		return nil, err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return nil, err
	}
	var out, errb bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errb}); err != nil {
		return nil, fmt.Errorf("exec %s: %w: %s", cmd[len(cmd)-1], err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}
