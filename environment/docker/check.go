package docker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
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
		_, lerr := exec.LookPath("dockerd")
		return append(out, environment.Check{Name: "docker daemon", Detail: err.Error(), Fix: daemonFix(err, lerr == nil, currentUser())})
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
		out = append(out, environment.Check{Name: "guest binary", OK: true, Detail: bin + " (static); containers mount a copy from " + guestenv.StageDir() + guestenv.SiblingNote(cfg.GuestBinary)})
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		out = append(out, environment.Check{Name: "debootstrap (offline image build)", OK: true, Detail: "not installed; needed only where no registry answers", Fix: "apt-get install debootstrap"})
	} else {
		out = append(out, environment.Check{Name: "debootstrap (offline image build)", OK: true, Detail: "installed"})
	}
	return out
}

// daemonFix is doctor's advice for a daemon that does not answer (err):
// a user the socket refuses joins the docker group (as scripts/deps.sh
// says), a daemon that is installed is started, else installed.
func daemonFix(err error, haveDockerd bool, user string) string {
	switch {
	case strings.Contains(err.Error(), "permission denied"):
		return fmt.Sprintf("the Docker socket refuses user %s: join the docker group (as root: usermod -aG docker %s, then log in again; the group is as good as root on this machine), or use --backend local", user, user)
	case haveDockerd:
		return "start the daemon: dockerd (as root), or systemctl start docker"
	}
	return "install Debian's docker.io and start dockerd (as root: apt-get install docker.io && dockerd &), or set DOCKER_HOST"
}

// currentUser is the name of the user agentbox runs as.
func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return strconv.Itoa(os.Getuid())
}
