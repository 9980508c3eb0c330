package docker_test

import (
	"context"
	"errors"
	"os"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/docker"
	"github.com/codegirl-games/agentbox/environment/envtest"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.CleanupBuilds()
	os.Exit(code)
}

// TestConformance runs the backend conformance suite against real Docker
// with the test image (xev, xterm, xcalc), on the daemon's default OCI
// runtime (runc).
func TestConformance(t *testing.T) {
	conformance(t, "")
}

// TestConformanceCrun runs the suite again on crun, which scripts/deps.sh
// registers with the daemon it starts (`--runtime crun`): the same
// hardening, asked of another runtime, must hold the same.
func TestConformanceCrun(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.TestImage), testenv.Probe("the crun runtime registered with Docker (scripts/deps.sh registers it with the daemon it starts)", func(ctx context.Context) error {
		cli, err := client.New(client.FromEnv)
		if err != nil {
			return err
		}
		defer cli.Close()
		info, err := cli.Info(ctx, client.InfoOptions{})
		if err != nil {
			return err
		}
		if _, ok := info.Info.Runtimes["crun"]; !ok {
			return errors.New("the daemon has no runtime named crun")
		}
		return nil
	}))
	conformance(t, "crun")
}

func conformance(t *testing.T, runtime string) {
	testenv.Require(t, testenv.Image(testenv.TestImage))
	envtest.Run(t, envtest.Options{
		Backend: &docker.Backend{},
		Config: environment.Config{
			Image:       testenv.TestImage,
			Runtime:     runtime,
			GuestBinary: testenv.Build(t, "./cmd/agentbox-guest"),
		},
		Mover: testenv.Build(t, "./examples/mover"),
		Gone: func(ctx context.Context, info environment.Info) (bool, error) {
			cli, err := client.New(client.FromEnv)
			if err != nil {
				return false, err
			}
			defer cli.Close()
			_, err = cli.ContainerInspect(ctx, info.ID, client.ContainerInspectOptions{})
			if cerrdefs.IsNotFound(err) {
				return true, nil
			}
			return false, err
		},
		Leftovers: func(ctx context.Context, runID string) ([]string, error) {
			cli, err := client.New(client.FromEnv)
			if err != nil {
				return nil, err
			}
			defer cli.Close()
			f := make(client.Filters).Add("label", docker.LabelRun+"="+runID)
			list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
			if err != nil {
				return nil, err
			}
			var ids []string
			for _, c := range list.Items {
				ids = append(ids, c.ID)
			}
			return ids, nil
		},
		Posture: envtest.Posture{Seccomp: true},
	})
}
