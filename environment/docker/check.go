package docker

import (
	"context"
	"fmt"
	"os/exec"
	"strings"

	"github.com/moby/moby/client"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv"
)

var _ environment.Checker = (*Backend)(nil)

// Check implements environment.Checker.
func (*Backend) Check(ctx context.Context, cfg environment.Config) []environment.Check {
	var out []environment.Check
	cli, err := NewClient(ctx)
	if err != nil {
		fix := "install Debian's docker.io and start dockerd (as root: apt-get install docker.io && dockerd &), or set DOCKER_HOST"
		if _, lerr := exec.LookPath("dockerd"); lerr == nil {
			fix = "start the daemon: dockerd (as root), or systemctl start docker"
		}
		return append(out, environment.Check{Name: "docker daemon", Detail: err.Error(), Fix: fix})
	}
	defer cli.Close()
	info, err := cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return append(out, environment.Check{Name: "docker daemon", Detail: err.Error(), Fix: "check the daemon's log"})
	}
	i := info.Info
	var runtimes []string
	for name := range i.Runtimes {
		runtimes = append(runtimes, name)
	}
	out = append(out, environment.Check{Name: "docker daemon", OK: true,
		Detail: fmt.Sprintf("%s at %s (API %s), %s, cgroup v%s, runtimes: %s", i.ServerVersion, cli.DaemonHost(), cli.ClientVersion(), i.Driver, i.CgroupVersion, strings.Join(runtimes, ", "))})
	if cfg.Runtime != "" {
		_, ok := i.Runtimes[cfg.Runtime]
		c := environment.Check{Name: "runtime " + cfg.Runtime, OK: ok, Detail: "registered"}
		if !ok {
			c.Detail, c.Fix = "not registered with the daemon", "add it to /etc/docker/daemon.json \"runtimes\" and restart dockerd (see SECURITY.md)"
		}
		out = append(out, c)
	}
	image := cfg.Image
	if image == "" {
		image = DefaultImage
	}
	if img, err := cli.ImageInspect(ctx, image); err != nil {
		out = append(out, environment.Check{Name: "image " + image, Detail: err.Error(), Fix: "agentbox image build"})
	} else {
		out = append(out, environment.Check{Name: "image " + image, OK: true, Detail: fmt.Sprintf("%.19s, %d MiB", img.ID, img.Size>>20)})
	}
	if bin, err := GuestBinary(cfg.GuestBinary); err != nil {
		out = append(out, environment.Check{Name: "guest binary", Detail: err.Error(), Fix: "build with CGO_ENABLED=0 (make build)"})
	} else {
		out = append(out, environment.Check{Name: "guest binary", OK: true, Detail: bin + " (static); containers mount a copy from " + guestenv.StageDir()})
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		out = append(out, environment.Check{Name: "debootstrap (offline image build)", OK: true, Detail: "not installed; needed only where no registry answers", Fix: "apt-get install debootstrap"})
	} else {
		out = append(out, environment.Check{Name: "debootstrap (offline image build)", OK: true, Detail: "installed"})
	}
	return out
}
