package docker

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/guest/xserver"
)

var _ environment.ColdFloorer = (*Backend)(nil)

// ColdFloor implements environment.ColdFloorer: Docker's own floor for a
// cold start, the container Create makes (createOptions: the same image,
// user, read-only root, tmpfs, capabilities, limits and mounts) running
// `true` instead of the guest, timed from its create through its start
// until it has exited. Nothing attaches to it: the attach is the guest's
// channel, part of agentbox's cold start, not of the runtime's. It is
// removed (AutoRemove, and here by force) after the time is taken.
func (b *Backend) ColdFloor(ctx context.Context, cfg environment.Config) (time.Duration, error) {
	cli, image, create, err := floorSetup(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer cli.Close()

	t := time.Now()
	cr, err := cli.ContainerCreate(ctx, create)
	if err != nil {
		return 0, fmt.Errorf("%w: create container: %w", environment.ErrUnavailable, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := cli.ContainerRemove(rctx, cr.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
			removeRun(rctx, cli, cfg.RunID)
		}
	}()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	wait := cli.ContainerWait(wctx, cr.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := cli.ContainerStart(ctx, cr.ID, client.ContainerStartOptions{}); err != nil {
		return 0, fmt.Errorf("%w: start container: %w", environment.ErrUnavailable, err)
	}
	select {
	case r := <-wait.Result:
		d := time.Since(t)
		if r.StatusCode != 0 {
			return 0, fmt.Errorf("%w: `true` in %s exited %d", environment.ErrImage, image, r.StatusCode)
		}
		return d, nil
	case err := <-wait.Error:
		return 0, fmt.Errorf("%w: wait for the container: %w", environment.ErrUnavailable, err)
	}
}

// floorSetup is what both floors need first: a client, the image, and
// the container Create would make (floorOptions).
func floorSetup(ctx context.Context, cfg environment.Config) (*client.Client, string, client.ContainerCreateOptions, error) {
	image := cfg.Image
	if image == "" {
		image = DefaultImage
	}
	files, err := stageFiles(cfg)
	if err != nil {
		return nil, "", client.ContainerCreateOptions{}, err
	}
	res := cfg.Resources.WithDefaults()
	if err := res.Validate(); err != nil {
		return nil, "", client.ContainerCreateOptions{}, err
	}
	cli, err := NewClient(ctx)
	if err != nil {
		return nil, "", client.ContainerCreateOptions{}, err
	}
	return cli, image, floorOptions(cfg, image, files, res), nil
}

// floorOptions is createOptions with `true` as the command and no stdio
// attached.
func floorOptions(cfg environment.Config, image string, files sandboxFiles, res environment.Resources) client.ContainerCreateOptions {
	o := createOptions(cfg, image, files, res)
	o.Name += "-floor"
	o.Config.Cmd = []string{"true"}
	o.Config.OpenStdin, o.Config.StdinOnce = false, false
	o.Config.AttachStdin, o.Config.AttachStdout, o.Config.AttachStderr = false, false, false
	return o
}

var _ environment.DisplayFloorer = (*Backend)(nil)

// DisplayFloor implements environment.DisplayFloorer: the container
// ColdFloor makes, running Xvfb with the guest's arguments at cfg's screen
// (xserver.Args) instead of `true`, timed from its create through its
// start until Xvfb writes its display number (its -displayfd is the
// container's stdout, attached before the start as Create attaches), then
// removed.
func (b *Backend) DisplayFloor(ctx context.Context, cfg environment.Config) (time.Duration, error) {
	cli, image, create, err := floorSetup(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	s := cfg.Screen.OrDefault()
	create.Name += "-x"
	create.Config.Cmd = append([]string{"Xvfb"}, xserver.Args(xserver.Config{Width: s.Width, Height: s.Height, Depth: s.Depth, NoGLX: cfg.NoGLX}, 1)...)
	create.Config.AttachStdout = true

	t := time.Now()
	cr, err := cli.ContainerCreate(ctx, create)
	if err != nil {
		return 0, fmt.Errorf("%w: create container: %w", environment.ErrUnavailable, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := cli.ContainerRemove(rctx, cr.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
			removeRun(rctx, cli, cfg.RunID)
		}
	}()
	att, err := cli.ContainerAttach(ctx, cr.ID, client.ContainerAttachOptions{Stream: true, Stdout: true})
	if err != nil {
		return 0, fmt.Errorf("%w: attach: %w", environment.ErrUnavailable, err)
	}
	defer att.Close()
	pr, pw := io.Pipe()
	go func() {
		_, err := stdcopy.StdCopy(pw, io.Discard, att.Reader)
		pw.CloseWithError(err)
	}()
	got := make(chan error, 1)
	go func() {
		_, err := bufio.NewReader(pr).ReadString('\n')
		got <- err
	}()
	if _, err := cli.ContainerStart(ctx, cr.ID, client.ContainerStartOptions{}); err != nil {
		return 0, fmt.Errorf("%w: start container: %w", environment.ErrUnavailable, err)
	}
	select {
	case err = <-got:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	d := time.Since(t)
	if err != nil {
		return 0, fmt.Errorf("%w: Xvfb in %s did not get ready: %w", environment.ErrImage, image, err)
	}
	return d, nil
}
