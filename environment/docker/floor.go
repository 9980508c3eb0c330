package docker

import (
	"context"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv"
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
	cli, err := NewClient(ctx)
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	image := cfg.Image
	if image == "" {
		image = DefaultImage
	}
	guestBin, err := GuestBinary(cfg.GuestBinary)
	if err == nil {
		guestBin, err = guestenv.Staged(guestBin)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: the guest binary: %w", environment.ErrGuest, err)
	}
	res := cfg.Resources.WithDefaults()
	if err := res.Validate(); err != nil {
		return 0, err
	}
	create := floorOptions(cfg, image, guestBin, res)

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

// floorOptions is createOptions with `true` as the command and no stdio
// attached.
func floorOptions(cfg environment.Config, image, guestBin string, res environment.Resources) client.ContainerCreateOptions {
	o := createOptions(cfg, image, guestBin, res)
	o.Name += "-floor"
	o.Config.Cmd = []string{"true"}
	o.Config.OpenStdin, o.Config.StdinOnce = false, false
	o.Config.AttachStdin, o.Config.AttachStdout, o.Config.AttachStderr = false, false, false
	return o
}
