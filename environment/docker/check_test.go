package docker

import (
	"errors"
	"strings"
	"testing"
)

// TestDaemonFix: doctor's advice when the daemon does not answer. A user
// the socket refuses is told to join the docker group (or use the local
// backend), not to install docker.io and start dockerd, which are there.
func TestDaemonFix(t *testing.T) {
	denied := errors.New("permission denied while trying to connect to the docker API at unix:///var/run/docker.sock")
	absent := errors.New("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?")
	for _, tt := range []struct {
		name        string
		err         error
		haveDockerd bool
		want, not   string
	}{
		{"denied", denied, true, "join the docker group (as root: usermod -aG docker ann", "install"},
		{"denied, no dockerd here", denied, false, "or use --backend local", "apt-get"},
		{"not running", absent, true, "start the daemon", "docker group"},
		{"not installed", absent, false, "apt-get install docker.io", "docker group"},
	} {
		got := daemonFix(tt.err, tt.haveDockerd, "ann")
		if !strings.Contains(got, tt.want) || strings.Contains(got, tt.not) {
			t.Errorf("%s: %q, want %q and not %q", tt.name, got, tt.want, tt.not)
		}
	}
}
