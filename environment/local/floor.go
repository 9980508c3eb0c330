package local

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv"
)

var _ environment.ColdFloorer = (*Backend)(nil)

// ColdFloor implements environment.ColdFloorer: bubblewrap's own floor for
// a cold start, bubblewrap with the arguments Create gives it
// (sandboxArgs: the same namespaces, mounts, tmpfs sizes and environment)
// running /usr/bin/true instead of the guest, timed from its start until
// it has exited. Left out, as agentbox's own work: the sandbox's cgroup
// (where Create makes one) and the info descriptor Create reads the
// sandbox's init from.
func (b *Backend) ColdFloor(ctx context.Context, cfg environment.Config) (time.Duration, error) {
	bw := findBwrap()
	if bw.err != nil {
		return 0, bw.err
	}
	guestBin, err := GuestBinary(cfg.GuestBinary)
	if err == nil {
		guestBin, err = guestenv.Staged(guestBin)
	}
	if err != nil {
		return 0, fmt.Errorf("%w: the guest binary: %w", environment.ErrGuest, err)
	}
	res := cfg.Resources.WithDefaults()
	if err := res.Validate(); err != nil {
		return 0, err
	}
	args := floorArgs(sandboxArgs(bw, cfg, res, guestBin, rlimits(res), nil))
	cmd := exec.CommandContext(ctx, bw.path, args...)
	cmd.Env = []string{}
	cmd.SysProcAttr = sysProcAttr()
	t := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(t)
	if err != nil {
		return 0, fmt.Errorf("%w: bubblewrap running true: %w: %s%s", environment.ErrUnavailable, err,
			strings.TrimSpace(string(out)), usernsHint(string(out)))
	}
	return d, nil
}

// floorArgs turns Create's bubblewrap arguments into ones that run
// /usr/bin/true in place of the guest, without the info descriptor.
func floorArgs(args []string) []string {
	args = slices.Clone(args)
	if i := slices.Index(args, "--info-fd"); i >= 0 {
		args = slices.Delete(args, i, i+2)
	}
	// The command is the last guestPath (the first is its bind mount's
	// target) and its arguments.
	for i := len(args) - 1; i >= 0; i-- {
		if args[i] == guestPath {
			args = append(args[:i], "/usr/bin/true")
			break
		}
	}
	return args
}
