package guest

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/codegirl-games/agentbox/guest/x11"
	"github.com/codegirl-games/agentbox/wire"
)

// launchSpec is how a launch started the app: what the relaunch floor
// starts again.
type launchSpec struct {
	bin   string
	args  []string
	env   []string
	match func(string) bool // the launch's window title
}

// relaunchFloor times the least a relaunch costs in this sandbox
// (wire.MethodRelaunchFloor, for agentbox bench): the app killed as reset
// kills it and waited for until its windows are gone, its command
// started again as a minimal program starts one (no OOM score, no pipes,
// no observer), waited for until the window manager lists its window,
// and one capture. What agentbox adds to a relaunch — the X server's
// reset, the directories restored and the app restaged, the round trips,
// the trace, serve and its client — is the difference between a
// relaunch and this.
func (g *Guest) relaunchFloor(ctx context.Context) (wire.RelaunchFloorResponse, error) {
	var resp wire.RelaunchFloorResponse
	switch {
	case g.x == nil:
		return resp, wire.Errorf(wire.CodeInvalid, "relaunch_floor: the display is not up")
	case g.base == nil:
		return resp, wire.Errorf(wire.CodeInvalid, "relaunch_floor: only a sandboxed guest kills every process of its app (agentbox guest --sandboxed)")
	case sandboxInit() == "":
		return resp, wire.Errorf(wire.CodeInvalid, "relaunch_floor: PID 1 is not a sandbox's init")
	case g.launched == nil:
		return resp, wire.Errorf(wire.CodeInvalid, "relaunch_floor: no app was launched (the floor starts the last launch's command again)")
	}
	spec := g.launched
	us := func(t time.Time) int64 { return time.Since(t).Microseconds() }

	t := time.Now()
	resp.Killed = g.killApp()
	// The killed clients' windows go once the X server has handled their
	// disconnection and the window manager its unmanaging, as in a reset.
	g.waitNoWindows(ctx)
	if n := len(g.windowList()); n > 0 {
		return resp, fmt.Errorf("relaunch_floor: %d windows still listed a second after the kill", n)
	}
	resp.KillUS = us(t)

	t = time.Now()
	cmd := exec.Command(spec.bin, spec.args...)
	cmd.Dir, cmd.Env = g.appDir, spec.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return resp, fmt.Errorf("relaunch_floor: start %s: %w", spec.bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }() // reaped when a reset or the next floor kills it
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := g.waitWindow(wctx, spec.match, done); err != nil {
		return resp, fmt.Errorf("relaunch_floor: the app's window: %w", err)
	}
	resp.StartUS = us(t)

	xctx, xcancel := context.WithTimeout(ctx, xTimeout)
	defer xcancel()
	t = time.Now()
	var err error
	g.capBuf, err = g.x.CaptureShared(xctx, g.capBuf, func(x11.Frame) error { return nil })
	if err != nil {
		return resp, fmt.Errorf("relaunch_floor: capture: %w", err)
	}
	resp.CaptureUS = us(t)
	return resp, nil
}
