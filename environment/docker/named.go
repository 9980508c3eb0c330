package docker

import (
	"context"
	"fmt"
	"strconv"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv"
	"github.com/codegirl-games/agentbox/environment/named"
)

// A named sandbox's home is a Docker volume, agentbox-home-NAME, labelled
// as agentbox's (LabelTool) and with its name (LabelSandbox), mounted at
// the home over the tmpfs's. Its lock and record are on this host
// (environment/named). Its root is given to the sandbox's user once, when
// the volume is made, by a container of the sandbox's image that runs
// chown as root with CAP_CHOWN alone.
//
// Docker mounts a volume without nosuid and nodev (its API has no such
// options for a volume): in the sandbox, no-new-privileges makes a
// set-user-ID bit give nothing and the dropped capabilities (CAP_MKNOD)
// let no device be made; on the host, the volume's directory below
// Docker's root is root's alone. Its size is held at the start of every
// run (named.Lock.CheckSize, measured by the daemon) and measured at the
// end of each: the default local driver caps nothing while a run goes on.

// LabelSandbox is the label of a named sandbox's volume: its name.
const LabelSandbox = "dev.agentbox.sandbox"

// VolumeName is the Docker volume of a named sandbox's home.
func VolumeName(name string) string { return "agentbox-home-" + name }

// namedHome takes a named sandbox's lock, makes its volume if it is the
// name's first run, and checks its size against the tmpfs's.
func namedHome(ctx context.Context, cli *client.Client, cfg environment.Config, image string, res environment.Resources) (*named.Lock, error) {
	root, err := named.Root()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", environment.ErrUnavailable, err)
	}
	lock, err := named.Acquire(root, cfg.Name, Name, cfg.RunID)
	if err != nil {
		return nil, err
	}
	err = ensureVolume(ctx, cli, cfg, image)
	if err == nil {
		var size int64
		if size, err = volumeSize(ctx, cli, cfg.Name); err == nil {
			err = lock.CheckSize(size, int64(res.TmpfsMB)<<20)
		}
	}
	if err != nil {
		lock.Abandon()
		return nil, err
	}
	return lock, nil
}

// homeMount mounts the named sandbox's volume at the home.
func homeMount(name string) mount.Mount {
	return mount.Mount{Type: mount.TypeVolume, Source: VolumeName(name), Target: guestenv.Home,
		VolumeOptions: &mount.VolumeOptions{NoCopy: true}}
}

// ensureVolume makes the name's volume, owned by the sandbox's user, unless
// it exists; one of the name that is not agentbox's is refused.
func ensureVolume(ctx context.Context, cli *client.Client, cfg environment.Config, image string) error {
	vol := VolumeName(cfg.Name)
	got, err := cli.VolumeInspect(ctx, vol, client.VolumeInspectOptions{})
	if err == nil {
		if got.Volume.Labels[LabelTool] != "agentbox" || got.Volume.Labels[LabelSandbox] != cfg.Name {
			return fmt.Errorf("%w: Docker volume %s exists but is not agentbox's sandbox %s (its labels); remove or rename it, or use another name", environment.ErrUnavailable, vol, cfg.Name)
		}
		return nil
	}
	if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("%w: inspect volume %s: %w", environment.ErrUnavailable, vol, err)
	}
	labels := map[string]string{LabelTool: "agentbox", LabelSandbox: cfg.Name, LabelCreated: time.Now().UTC().Format(time.RFC3339)}
	if _, err := cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: vol, Labels: labels}); err != nil {
		return fmt.Errorf("%w: create volume %s: %w", environment.ErrUnavailable, vol, err)
	}
	if err := chownVolume(ctx, cli, cfg, image, vol); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = cli.VolumeRemove(rctx, vol, client.VolumeRemoveOptions{})
		return err
	}
	return nil
}

// chownVolume gives the new volume's root to the sandbox's user: chown,
// run as root in the sandbox's image with CAP_CHOWN alone, no network.
func chownVolume(ctx context.Context, cli *client.Client, cfg environment.Config, image, vol string) error {
	no := false
	owner := strconv.Itoa(containerUID) + ":" + strconv.Itoa(containerUID)
	cr, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: "agentbox-" + sanitize(cfg.RunID) + "-home",
		Config: &container.Config{
			Image: image, Entrypoint: []string{"chown"}, Cmd: []string{owner, "/home"},
			User: "0:0", Labels: Labels(cfg.RunID),
		},
		HostConfig: &container.HostConfig{
			NetworkMode: "none", ReadonlyRootfs: true,
			CapDrop: []string{"ALL"}, CapAdd: []string{"CHOWN"},
			SecurityOpt: []string{"no-new-privileges"}, Init: &no,
			LogConfig: container.LogConfig{Type: "none"}, Runtime: cfg.Runtime,
			Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: vol, Target: "/home", VolumeOptions: &mount.VolumeOptions{NoCopy: true}}},
		},
	})
	if err != nil {
		return fmt.Errorf("%w: create the container that prepares volume %s: %w", environment.ErrUnavailable, vol, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = cli.ContainerRemove(rctx, cr.ID, client.ContainerRemoveOptions{Force: true})
	}()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	wait := cli.ContainerWait(wctx, cr.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := cli.ContainerStart(ctx, cr.ID, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("%w: start the container that prepares volume %s: %w", environment.ErrUnavailable, vol, err)
	}
	select {
	case r := <-wait.Result:
		if r.StatusCode != 0 {
			return fmt.Errorf("%w: `chown %s` of volume %s in %s exited %d (the image needs chown)", environment.ErrImage, owner, vol, image, r.StatusCode)
		}
		return nil
	case err := <-wait.Error:
		return fmt.Errorf("%w: wait for the container that prepares volume %s: %w", environment.ErrUnavailable, vol, err)
	}
}

// volumeSize asks the daemon how many bytes the name's volume holds; 0
// when there is none, -1 when the daemon does not say.
func volumeSize(ctx context.Context, cli *client.Client, name string) (int64, error) {
	du, err := cli.DiskUsage(ctx, client.DiskUsageOptions{Volumes: true, Verbose: true})
	if err != nil {
		return -1, fmt.Errorf("%w: measure volume %s: %w", environment.ErrUnavailable, VolumeName(name), err)
	}
	for _, v := range du.Volumes.Items {
		if v.Name == VolumeName(name) {
			if v.UsageData == nil {
				return -1, nil
			}
			return v.UsageData.Size, nil
		}
	}
	return 0, nil
}

var _ environment.NamedHomes = (*Backend)(nil)

// HomeSize implements environment.NamedHomes: the volume's size as the
// daemon measures it.
func (*Backend) HomeSize(ctx context.Context, name string) (int64, error) {
	cli, err := NewClient(ctx)
	if err != nil {
		return -1, err
	}
	defer cli.Close()
	return volumeSize(ctx, cli, name)
}

// RemoveHome implements environment.NamedHomes: the volume goes.
func (*Backend) RemoveHome(ctx context.Context, name string) error {
	cli, err := NewClient(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.VolumeRemove(ctx, VolumeName(name), client.VolumeRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove volume %s: %w", VolumeName(name), err)
	}
	return nil
}

// releaseHome measures the volume once the sandbox is gone and lets the
// name go.
func releaseHome(ctx context.Context, lock *named.Lock, name string) error {
	size := int64(-1)
	cli, err := NewClient(ctx)
	if err == nil {
		size, _ = volumeSize(ctx, cli, name)
		cli.Close()
	}
	return lock.Release(size)
}
