package docker_test

import (
	"context"
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
// with the test image (xev, xterm, xcalc).
func TestConformance(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.TestImage))
	envtest.Run(t, envtest.Options{
		Backend: &docker.Backend{},
		Config: environment.Config{
			Image:       testenv.TestImage,
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
