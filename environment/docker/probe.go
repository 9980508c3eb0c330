package docker

import (
	"context"

	"github.com/codegirl-games/agentbox/environment"
)

var _ environment.Prober = (*Backend)(nil)

// Probe implements environment.Prober: a Docker daemon answers (within
// ctx; --backend auto gives it a second).
func (*Backend) Probe(ctx context.Context) error {
	cli, err := NewClient(ctx)
	if err != nil {
		return err
	}
	return cli.Close()
}
