package docker

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/codegirl-games/agentbox/environment"
)

var _ environment.SeedStepper = (*Backend)(nil)

// SeedStep implements environment.SeedStepper: one observe+act step the
// way agentbox's seed spike did, for comparison in `agentbox bench`:
// `docker exec scrot` to take a PNG, `docker exec cat` to read it back,
// `docker exec xdotool mousemove` to act — three processes and three execs
// per step. The container's image must have scrot and xdotool (the test
// image does). It returns the PNG's size.
func (*Backend) SeedStep(ctx context.Context, env environment.Environment, x, y int) (int, error) {
	info := env.Info()
	if info.Backend != Name {
		return 0, fmt.Errorf("the seed-style step runs in a %s environment, not in one of %s", Name, info.Backend)
	}
	return seedStyleStep(ctx, info.ID, info.Display, x, y)
}

// seedStyleStep is SeedStep in the container containerID.
func seedStyleStep(ctx context.Context, containerID, display string, x, y int) (int, error) {
	cli, err := NewClient(ctx)
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	env := []string{"DISPLAY=" + display, "HOME=/tmp/home"}
	if _, err := execRun(ctx, cli, containerID, env, "scrot", "-o", "/tmp/seed.png"); err != nil {
		return 0, err
	}
	png, err := execRun(ctx, cli, containerID, env, "cat", "/tmp/seed.png")
	if err != nil {
		return 0, err
	}
	if _, err := execRun(ctx, cli, containerID, env, "xdotool", "mousemove", strconv.Itoa(x), strconv.Itoa(y)); err != nil {
		return 0, err
	}
	return len(png), nil
}

// execRun runs a command in the container as the sandbox user and returns
// its stdout.
func execRun(ctx context.Context, cli *client.Client, id string, env []string, cmd ...string) ([]byte, error) {
	ex, err := cli.ExecCreate(ctx, id, client.ExecCreateOptions{
		User: "1000:1000", Env: env, Cmd: cmd, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return nil, fmt.Errorf("exec %s: %w", cmd[0], err)
	}
	att, err := cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("exec %s: %w", cmd[0], err)
	}
	defer att.Close()
	var out, errb bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errb, att.Reader); err != nil {
		return nil, fmt.Errorf("exec %s: %w", cmd[0], err)
	}
	for i := 0; i < 100; i++ {
		st, err := cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			return nil, fmt.Errorf("exec %s: %w", cmd[0], err)
		}
		if !st.Running {
			if st.ExitCode != 0 {
				return nil, fmt.Errorf("exec %s: exit %d: %s", cmd[0], st.ExitCode, bytes.TrimSpace(errb.Bytes()))
			}
			return out.Bytes(), nil
		}
		time.Sleep(time.Millisecond)
	}
	return nil, fmt.Errorf("exec %s: still running", cmd[0])
}
