// Package docker is the Docker backend: one hardened container per
// environment, created through the Engine API Go client. The container's
// init (PID 1) is the agentbox binary itself (`agentbox guest`),
// bind-mounted read-only from a neutral copy, speaking the wire protocol
// over the attached stdio. Only this package may import the Docker SDK.
package docker

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv"
	"github.com/codegirl-games/agentbox/internal/owner"
)

// Name is the backend's registered name.
const Name = "docker"

// DefaultImage is the runtime image `agentbox image build` makes.
const DefaultImage = RuntimeImageRef

// guestPath is where the agentbox binary is mounted in the container.
const guestPath = "/opt/agentbox/agentbox"

func init() {
	environment.Register(Name, func(environment.Options) (environment.Backend, error) { return &Backend{}, nil })
}

// Backend creates Docker environments.
type Backend struct{}

var _ environment.Backend = (*Backend)(nil)

// Name implements environment.Backend.
func (*Backend) Name() string { return Name }

var _ environment.Capable = (*Backend)(nil)

// Capabilities implements environment.Capable: images of the user's choice,
// OCI runtimes registered with the daemon, pause, reaping by label, the
// container's cgroup for CPU, memory and processes, and the seed-style
// step by docker exec, and a network by policy (a bind-mounted socket
// directory), and reset in place (the guest's, guestenv.Env.Reset).
func (*Backend) Capabilities() environment.Capabilities {
	return environment.Capabilities{
		Images:     true,
		OCIRuntime: true,
		Freeze:     true,
		Reap:       true,
		Limits:     environment.Limits{CPU: true, Memory: true, PIDs: true},
		SeedStep:   true,
		Network:    true,
		// The runtime image carries libfaketime; a custom image without
		// it fails the launch, saying so.
		VirtualClock: true,
		Relaunch:     true,
		Named:        true,
	}
}

var _ environment.HostLimiter = (*Backend)(nil)

// HostLimits implements environment.HostLimiter: the daemon refuses a
// container more CPUs than its host has ("Range of CPUs is from 0.01 to
// 2.00"). Docker's own memory minimum (6 MB) is below what the shared
// rule asks (tmpfs and /dev/shm below the limit, at least 66 MiB), and the
// desktop fits in it: the guest, Xvfb, Openbox and xterm peaked at 40 MiB
// and ran at --tmpfs 1m --memory 66m.
func (*Backend) HostLimits(ctx context.Context) (environment.HostLimits, error) {
	cli, err := NewClient(ctx)
	if err != nil {
		return environment.HostLimits{}, err
	}
	defer cli.Close()
	info, err := cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return environment.HostLimits{}, fmt.Errorf("%w: docker info: %w", environment.ErrUnavailable, err)
	}
	return environment.HostLimits{CPUs: float64(info.Info.NCPU)}, nil
}

// containerUID is the user the container's processes run as (Config.User).
const containerUID = 1000

// NewClient connects to the Docker daemon named by the environment
// (DOCKER_HOST, …) and checks that it answers.
func NewClient(ctx context.Context) (*client.Client, error) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("%w: docker: %w", environment.ErrUnavailable, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("%w: no Docker daemon answers at %s (%v); start dockerd, or see `agentbox doctor`", environment.ErrUnavailable, cli.DaemonHost(), err)
	}
	return cli, nil
}

// Create implements environment.Backend: it creates and starts a hardened
// container, performs the guest handshake and brings up the display. On
// error the container is removed.
func (b *Backend) Create(ctx context.Context, cfg environment.Config) (_ environment.Environment, retErr error) {
	t0 := time.Now()
	cli, err := NewClient(ctx)
	if err != nil {
		return nil, err
	}
	image := cfg.Image
	if image == "" {
		image = DefaultImage
	}
	img, err := cli.ImageInspect(ctx, image)
	if err != nil {
		cli.Close()
		if cerrdefs.IsNotFound(err) {
			hint := "run `agentbox image build`"
			if image != DefaultImage {
				hint = "build or load it, or drop --image to use " + DefaultImage
			}
			return nil, fmt.Errorf("%w: image %s is not present: %s", environment.ErrImage, image, hint)
		}
		return nil, fmt.Errorf("%w: inspect %s: %w", environment.ErrImage, image, err)
	}
	files, err := stageFiles(cfg)
	if err != nil {
		cli.Close()
		return nil, err
	}

	res := cfg.Resources.WithDefaults()
	if err := res.Validate(); err != nil {
		cli.Close()
		return nil, err
	}
	// A named sandbox: its lock, held until the sandbox is gone, and its
	// volume (named.go).
	opts := guestenv.Options{Backend: Name, Config: cfg, Began: t0}
	if cfg.Name != "" {
		lock, err := namedHome(ctx, cli, cfg, image, res)
		if err != nil {
			cli.Close()
			return nil, err
		}
		opts.AfterTeardown = func(ctx context.Context) error { return releaseHome(ctx, lock, cfg.Name) }
	}
	sb := &sandbox{cli: cli, runtime: cfg.Runtime, image: image, imageID: img.ID}
	g := guestenv.New(sb, opts)
	defer func() {
		if retErr != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if sb.id == "" {
				// The create request may have reached the daemon even though
				// we gave up waiting for its answer: find it by its label.
				removeRun(cctx, cli, cfg.RunID)
			}
			g.Close(cctx)
		}
	}()

	// The sandbox's network, if it has one: the proxy's and the forwards'
	// sockets, reached by the container's user (uid 1000) alone.
	netDir, err := g.Network(containerUID)
	if err != nil {
		return nil, err
	}
	create := createOptions(cfg, image, files, res)
	if cfg.Name != "" {
		create.HostConfig.Mounts = append(create.HostConfig.Mounts, homeMount(cfg.Name))
	}
	if netDir != "" {
		create.HostConfig.Mounts = append(create.HostConfig.Mounts, mount.Mount{
			Type: mount.TypeBind, Source: netDir, Target: guestenv.NetDir, ReadOnly: true,
		})
	}
	t := time.Now()
	cr, err := cli.ContainerCreate(ctx, create)
	if err != nil {
		return nil, fmt.Errorf("%w: create container: %w", environment.ErrUnavailable, err)
	}
	sb.id = cr.ID
	g.Timing("container_create", time.Since(t))

	// Attach before start so no byte of the guest's hello is lost.
	att, err := cli.ContainerAttach(ctx, sb.id, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		return nil, fmt.Errorf("%w: attach: %w", environment.ErrUnavailable, err)
	}
	sb.hijack = &att.HijackedResponse
	stdout, stderr := sb.demux()
	g.KeepStderr(stderr)

	t = time.Now()
	if _, err := cli.ContainerStart(ctx, sb.id, client.ContainerStartOptions{}); err != nil {
		return nil, fmt.Errorf("%w: start container: %w", environment.ErrUnavailable, err)
	}
	g.Timing("container_start", time.Since(t))
	return g.Start(ctx, stdout, att.Conn, nil)
}

// createOptions is the hardened container: no network, read-only root,
// bounded tmpfs with exec, non-root, no capabilities, no new privileges,
// CPU/memory/PID limits, logs off, ownership labels.
//
// The guest is the container's init (PID 1), not a child of Docker's
// docker-init: an init holds the container's attached stdio, which is the
// protocol channel, and docker-init runs as the app's user and is
// dumpable, so the app could open /proc/1/fd/1 and write frames of its
// own. The guest is non-dumpable and reaps orphans itself (guest/init.go);
// as the namespace's init it cannot be stopped or killed from inside.
// Docker stops it with SIGKILL (StopSignal): the guest ignores catchable
// signals, which anything inside the sandbox could send.
func createOptions(cfg environment.Config, image string, files sandboxFiles, res environment.Resources) client.ContainerCreateOptions {
	no := false
	mem := int64(res.MemoryMB) << 20
	pids := int64(res.PIDs)
	cmd := append([]string{guestPath, "guest", "--sandboxed"}, guestenv.DisplayArgs(cfg)...)
	return client.ContainerCreateOptions{
		Name: "agentbox-" + sanitize(cfg.RunID),
		Config: &container.Config{
			Image:        image,
			Cmd:          cmd,
			Entrypoint:   []string{},
			User:         strconv.Itoa(containerUID) + ":" + strconv.Itoa(containerUID),
			WorkingDir:   "/tmp",
			Env:          []string{"HOME=" + guestenv.Home, "LANG=C.UTF-8", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			OpenStdin:    true,
			StdinOnce:    true,
			AttachStdin:  true,
			AttachStdout: true,
			AttachStderr: true,
			Tty:          false,
			Labels:       Labels(cfg.RunID),
			StopSignal:   "SIGKILL",
			// No Docker networking at all, not even its "none" network:
			// runc still gives the container a network namespace of its
			// own with only its loopback, up (what "none" gives), but
			// Docker makes no network sandbox for it, so each start runs
			// no prestart hook and no re-execution of dockerd
			// (libnetwork-setkey, set-ipv6) and the removal no network
			// teardown. Docker then writes no /etc/hosts: the loopback
			// names are mounted (files.Hosts), and /etc/resolv.conf is
			// the image's, empty (no resolver: the sandbox has none to
			// reach; its egress is the guest's relay, by policy).
			NetworkDisabled: true,
		},
		HostConfig: &container.HostConfig{
			NetworkMode:    "none",
			ReadonlyRootfs: true,
			Tmpfs: map[string]string{
				"/tmp": fmt.Sprintf("rw,exec,nosuid,nodev,size=%dm,mode=1777", res.TmpfsMB),
			},
			ShmSize:     int64(res.ShmMB) << 20,
			CapDrop:     []string{"ALL"},
			SecurityOpt: []string{"no-new-privileges"},
			IpcMode:     "private",
			Init:        &no,
			AutoRemove:  true,
			LogConfig:   container.LogConfig{Type: "none"},
			Runtime:     cfg.Runtime,
			Resources: container.Resources{
				NanoCPUs:   int64(res.CPUs * 1e9),
				Memory:     mem,
				MemorySwap: mem, // no swap beyond the limit
				PidsLimit:  &pids,
			},
			Mounts: []mount.Mount{{
				Type:     mount.TypeBind,
				Source:   files.Guest,
				Target:   guestPath,
				ReadOnly: true,
			}, {
				Type:     mount.TypeBind,
				Source:   files.Hosts,
				Target:   "/etc/hosts",
				ReadOnly: true,
			}},
		},
	}
}

// sandboxFiles are the host files a sandbox mounts read-only, from the
// stage directory (guestenv.Staged): the guest binary and /etc/hosts.
type sandboxFiles struct {
	Guest, Hosts string
}

// stageFiles stages what the sandbox mounts: the guest binary cfg names
// (GuestBinary) as its neutral copy — the sandbox's mount table shows the
// source of every bind mount — and the loopback hosts file.
func stageFiles(cfg environment.Config) (sandboxFiles, error) {
	bin, err := GuestBinary(cfg.GuestBinary)
	if err == nil {
		if bin, err = guestenv.Staged(bin); err != nil {
			err = fmt.Errorf("%w: stage the guest binary: %w", environment.ErrGuest, err)
		}
	}
	if err != nil {
		return sandboxFiles{}, err
	}
	hosts, err := guestenv.HostsFile()
	if err != nil {
		return sandboxFiles{}, fmt.Errorf("%w: the sandbox's /etc/hosts: %w", environment.ErrUnavailable, err)
	}
	return sandboxFiles{Guest: bin, Hosts: hosts}, nil
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	if b.Len() == 0 {
		return strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	return b.String()
}

// Labels are the ownership labels put on every container, so `agentbox gc`
// can find what a killed agentbox left behind.
func Labels(runID string) map[string]string {
	host, _ := os.Hostname()
	return map[string]string{
		LabelTool:       "agentbox",
		LabelRun:        runID,
		LabelOwnerPID:   strconv.Itoa(os.Getpid()),
		LabelOwnerHost:  host,
		LabelOwnerStart: strconv.FormatUint(owner.Start(os.Getpid()), 10),
		LabelCreated:    time.Now().UTC().Format(time.RFC3339),
	}
}

// Label keys.
const (
	LabelTool       = "dev.agentbox.tool"
	LabelRun        = "dev.agentbox.run"
	LabelOwnerPID   = "dev.agentbox.owner.pid"
	LabelOwnerHost  = "dev.agentbox.owner.host"
	LabelOwnerStart = "dev.agentbox.owner.start"
	LabelCreated    = "dev.agentbox.created"
)

// removeRun removes the containers labelled with a run, looking for a short
// while: a create whose answer we abandoned may still be completing.
func removeRun(ctx context.Context, cli *client.Client, runID string) {
	if runID == "" {
		return
	}
	f := make(client.Filters).Add("label", LabelRun+"="+runID)
	for i := 0; i < 20 && ctx.Err() == nil; i++ {
		list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
		if err == nil {
			for _, c := range list.Items {
				cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}
