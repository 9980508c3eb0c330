package docker

import (
	"reflect"
	"testing"

	"github.com/moby/moby/api/types/mount"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
)

// testFiles are the staged files the option tests mount.
var testFiles = sandboxFiles{Guest: "/srv/guest", Hosts: "/srv/hosts"}

// TestCreateOptionsNoNetworking: the container has no Docker networking
// (no network sandbox, no hook at its start), only its own namespace's
// loopback, and the loopback names mounted read-only as /etc/hosts; the
// guest is the only other bind mount.
func TestCreateOptionsNoNetworking(t *testing.T) {
	o := createOptions(environment.Config{RunID: "r"}, "img", testFiles, environment.Resources{}.WithDefaults())
	if !o.Config.NetworkDisabled || o.HostConfig.NetworkMode != "none" {
		t.Errorf("NetworkDisabled %v, NetworkMode %q", o.Config.NetworkDisabled, o.HostConfig.NetworkMode)
	}
	want := map[string]string{guestPath: testFiles.Guest, "/etc/hosts": testFiles.Hosts}
	for _, m := range o.HostConfig.Mounts {
		if want[m.Target] != m.Source || m.Type != mount.TypeBind || !m.ReadOnly {
			t.Errorf("mount %+v", m)
		}
		delete(want, m.Target)
	}
	if len(want) != 0 {
		t.Errorf("not mounted: %v", want)
	}
}

// TestFloorOptions: the cold-start floor's container is Create's, hardening
// and all, but for its command (true), its name and its stdio.
func TestFloorOptions(t *testing.T) {
	cfg := environment.Config{RunID: "r1", Runtime: "runc"}
	res := environment.Resources{}.WithDefaults()
	want := createOptions(cfg, "img", testFiles, res)
	got := floorOptions(cfg, "img", testFiles, res)
	if !reflect.DeepEqual(got.HostConfig, want.HostConfig) {
		t.Errorf("host config differs:\n%+v\n%+v", got.HostConfig, want.HostConfig)
	}
	if got.Config.Cmd[0] != "true" || len(got.Config.Cmd) != 1 || got.Config.OpenStdin || got.Config.AttachStdout {
		t.Errorf("floor container: cmd %q, stdin %v, attached %v", got.Config.Cmd, got.Config.OpenStdin, got.Config.AttachStdout)
	}
	g, w := *got.Config, *want.Config
	g.Cmd, w.Cmd = nil, nil
	g.OpenStdin, g.StdinOnce, g.AttachStdin, g.AttachStdout, g.AttachStderr = w.OpenStdin, w.StdinOnce, w.AttachStdin, w.AttachStdout, w.AttachStderr
	g.Labels[LabelCreated], w.Labels[LabelCreated] = "", ""
	if !reflect.DeepEqual(g, w) {
		t.Errorf("container config differs beyond command and stdio:\n%+v\n%+v", g, w)
	}
	if got.Name != want.Name+"-floor" {
		t.Errorf("name %q", got.Name)
	}
}

// TestCreateOptionsDisplay: the guest is told the screen and the window
// manager its start will ask for, so it brings the display up at once.
func TestCreateOptionsDisplay(t *testing.T) {
	res := environment.Resources{}.WithDefaults()
	for _, tc := range []struct {
		cfg  environment.Config
		want []string
	}{
		{environment.Config{RunID: "r"}, []string{guestPath, "guest", "--sandboxed", "--display", "640x480x24", "--wm"}},
		{environment.Config{RunID: "r", NoWM: true, Screen: observe.Screen{Width: 1920, Height: 1080, Depth: 24}}, []string{guestPath, "guest", "--sandboxed", "--display", "1920x1080x24"}},
	} {
		if got := createOptions(tc.cfg, "img", testFiles, res).Config.Cmd; !reflect.DeepEqual([]string(got), tc.want) {
			t.Errorf("cmd %q, want %q", got, tc.want)
		}
	}
}
