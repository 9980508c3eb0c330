package local

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv"
	"github.com/codegirl-games/agentbox/guest/xserver"
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
	bw, args, err := floorSetup(ctx, cfg)
	if err != nil {
		return 0, err
	}
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

// floorSetup is what both floors start from: bubblewrap, and Create's
// arguments for cfg running /usr/bin/true (floorArgs).
func floorSetup(ctx context.Context, cfg environment.Config) (*bwrapInfo, []string, error) {
	bw := findBwrap()
	if bw.err != nil {
		return bw, nil, bw.err
	}
	guestBin, err := GuestBinary(cfg.GuestBinary)
	if err == nil {
		guestBin, err = guestenv.Staged(guestBin)
	}
	if err != nil {
		return bw, nil, fmt.Errorf("%w: the guest binary: %w", environment.ErrGuest, err)
	}
	res := cfg.Resources.WithDefaults()
	if err := res.Validate(); err != nil {
		return bw, nil, err
	}
	// The start-up caches too: the floors are the sandbox's, not a slower
	// one's.
	caches := startupCaches(ctx, bw).args(cfg.Name != "")
	return bw, floorArgs(sandboxArgs(bw, cfg, res, guestBin, rlimits(res), caches, nil)), nil
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

var _ environment.DisplayFloorer = (*Backend)(nil)

// DisplayFloor implements environment.DisplayFloorer: bubblewrap with
// Create's arguments (as ColdFloor) running Xvfb with the guest's
// arguments at cfg's screen (xserver.Args), timed until Xvfb writes its
// display number on its -displayfd descriptor, then ended.
func (b *Backend) DisplayFloor(ctx context.Context, cfg environment.Config) (time.Duration, error) {
	bw, args, err := floorSetup(ctx, cfg)
	if err != nil {
		return 0, err
	}
	xvfb, err := hostProgram("Xvfb")
	if err != nil {
		return 0, err
	}
	s := cfg.Screen.OrDefault()
	args = append(args[:len(args)-1], append([]string{xvfb}, xserver.Args(xserver.Config{Width: s.Width, Height: s.Height, Depth: s.Depth, NoGLX: cfg.NoGLX}, infoFD)...)...)
	r, w, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var out strings.Builder
	cmd := exec.Command(bw.path, args...)
	cmd.Env = []string{}
	cmd.SysProcAttr = sysProcAttr()
	cmd.ExtraFiles = []*os.File{w} // fd 3, as the guest gives Xvfb
	cmd.Stdout, cmd.Stderr = &out, &out
	t := time.Now()
	err = cmd.Start()
	w.Close()
	if err != nil {
		return 0, fmt.Errorf("%w: start bubblewrap: %w", environment.ErrUnavailable, err)
	}
	// bubblewrap's process group: bubblewrap, and Xvfb with it
	// (--die-with-parent).
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}
	got := make(chan error, 1)
	go func() {
		_, err := bufio.NewReader(r).ReadString('\n')
		got <- err
	}()
	select {
	case err = <-got:
	case <-ctx.Done():
		stop()
		return 0, ctx.Err()
	}
	d := time.Since(t)
	stop()
	if err != nil {
		return 0, fmt.Errorf("%w: Xvfb in bubblewrap did not get ready: %w: %s", environment.ErrUnavailable, err, strings.TrimSpace(out.String()))
	}
	return d, nil
}
