package docker

import (
	"context"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/codegirl-games/agentbox/environment"
)

var _ environment.Reaper = (*Backend)(nil)

// Reap implements environment.Reaper: it finds containers labelled as
// agentbox's whose owning process is gone (on this host), and removes them.
// Containers owned by live processes, or by other hosts, are left alone
// unless All is set.
func (*Backend) Reap(ctx context.Context, opts environment.ReapOptions) ([]environment.Reaped, error) {
	cli, err := NewClient(ctx)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	filters := make(client.Filters).Add("label", LabelTool+"=agentbox")
	if opts.RunID != "" {
		filters.Add("label", LabelRun+"="+opts.RunID)
	}
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filters})
	if err != nil {
		return nil, fmt.Errorf("%w: list containers: %w", environment.ErrUnavailable, err)
	}
	here := environment.ThisProcess()
	var out []environment.Reaped
	for _, c := range list.Items {
		l := c.Labels
		r := environment.Reaped{ID: c.ID, RunID: l[LabelRun], Owner: l[LabelOwnerHost] + "/" + l[LabelOwnerPID], Created: l[LabelCreated]}
		if len(c.Names) > 0 {
			r.Name = c.Names[0]
		}
		var reap bool
		reap, r.Reason = opts.Decide(here, environment.Owner{Host: l[LabelOwnerHost], PID: l[LabelOwnerPID], Start: l[LabelOwnerStart], RunID: l[LabelRun]})
		if !reap {
			continue
		}
		if !opts.DryRun {
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err := cli.ContainerRemove(rctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			cancel()
			if err != nil && !cerrdefs.IsNotFound(err) && !isRemovalInProgress(err) {
				r.Err = err
			} else {
				r.Removed = true
			}
		}
		out = append(out, r)
	}
	return out, nil
}
