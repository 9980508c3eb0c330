package docker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv"
	"github.com/codegirl-games/agentbox/wire"
)

// env is one container.
type env struct {
	cli     *client.Client
	cfg     environment.Config
	id      string
	image   string
	imageID string
	hijack  *client.HijackedResponse
	guest   *guestenv.Client
	start   wire.StartResponse
	timings map[string]int64

	tailMu sync.Mutex
	tail   []string // the guest's last stderr lines, for error messages

	closeOnce sync.Once
	closeErr  error
	demuxDone chan struct{}

	// frozen: Freeze succeeded and Thaw has not; Close thaws first, or the
	// frozen guest could not stop the app.
	frozen atomic.Bool
}

var (
	_ environment.Environment = (*env)(nil)
	_ environment.Freezer     = (*env)(nil)
)

// demux splits the attached stream: stdout carries wire frames, stderr the
// guest's diagnostics.
func (e *env) demux(logf func(string)) io.Reader {
	pr, pw := io.Pipe()
	lr, lw := io.Pipe()
	e.demuxDone = make(chan struct{})
	go func() {
		defer close(e.demuxDone)
		_, err := stdcopy.StdCopy(pw, lw, e.hijack.Reader)
		if err == nil {
			err = io.EOF
		}
		pw.CloseWithError(err)
		lw.Close()
	}()
	go func() {
		sc := bufio.NewScanner(lr)
		sc.Buffer(make([]byte, 64<<10), 64<<10)
		for sc.Scan() {
			line := sc.Text()
			e.tailMu.Lock()
			e.tail = append(e.tail, line)
			if len(e.tail) > 20 {
				e.tail = e.tail[len(e.tail)-20:]
			}
			e.tailMu.Unlock()
			if logf != nil {
				logf(line)
			}
		}
		io.Copy(io.Discard, lr)
	}()
	return pr
}

// explain adds what the container said and how it ended to a start error.
func (e *env) explain(ctx context.Context, err error) error {
	var parts []string
	if e.id != "" {
		ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		// Give the guest a moment to flush its last words.
		select {
		case <-e.demuxDone:
		case <-time.After(200 * time.Millisecond):
		}
		if ir, ierr := e.cli.ContainerInspect(ictx, e.id, client.ContainerInspectOptions{}); ierr == nil && ir.Container.State != nil {
			st := ir.Container.State
			if !st.Running && st.Status != "created" {
				parts = append(parts, fmt.Sprintf("container %s (exit code %d%s)", st.Status, st.ExitCode, oomNote(st.OOMKilled)))
			}
			if st.Error != "" {
				parts = append(parts, "docker: "+st.Error)
			}
		}
	}
	e.tailMu.Lock()
	tail := strings.Join(e.tail, "\n  ")
	e.tailMu.Unlock()
	if tail != "" {
		parts = append(parts, "guest said:\n  "+tail)
	}
	if len(parts) == 0 {
		return err
	}
	return fmt.Errorf("%w; %s", err, strings.Join(parts, "; "))
}

func oomNote(oom bool) string {
	if oom {
		return ", OOM-killed"
	}
	return ""
}

// Info implements environment.Environment.
func (e *env) Info() environment.Info {
	return environment.Info{
		Backend: Name,
		ID:      e.id,
		Image:   e.image,
		ImageID: e.imageID,
		Runtime: e.cfg.Runtime,
		Display: e.start.Display,
		WM:      e.start.WM,
		SHM:     e.start.SHM,
		Timings: e.timings,
	}
}

// Launch implements environment.Environment.
func (e *env) Launch(ctx context.Context, spec environment.LaunchSpec) (environment.LaunchResult, error) {
	sums, err := e.guest.Stage(ctx, spec.App)
	if err != nil {
		return environment.LaunchResult{}, e.explain(ctx, fmt.Errorf("stage the app: %w", err))
	}
	r, err := e.guest.Launch(ctx, spec, nil)
	r.Files = sums
	if errors.Is(err, environment.ErrGuest) {
		return r, e.explain(ctx, err)
	}
	if spec.App.InImage && wire.IsCode(err, wire.CodeNotFound) {
		err = e.whereIsApp(ctx, spec.App.Manifest.Command, err)
	}
	return r, err // the app's own failure: its output is in the trace
}

// Observe implements environment.Environment.
func (e *env) Observe(ctx context.Context) (*action.Frame, environment.State, error) {
	f, st, err := e.guest.Observe(ctx)
	if errors.Is(err, environment.ErrGuest) {
		err = e.explain(ctx, err) // how the container ended (killed, stopped), what the guest said
	}
	return f, st, err
}

// Act implements environment.Environment.
func (e *env) Act(ctx context.Context, a action.Action) (action.Result, error) {
	r, err := e.guest.Act(ctx, a)
	if errors.Is(err, environment.ErrGuest) {
		err = e.explain(ctx, err)
	}
	return r, err
}

// Freeze pauses every process in the container (cgroup freezer).
func (e *env) Freeze(ctx context.Context) error {
	err := retryStalePaused(ctx, pausedFlagRetry, "is already paused", func(ctx context.Context) error {
		_, err := e.cli.ContainerPause(ctx, e.id, client.ContainerPauseOptions{})
		return err
	})
	if err == nil {
		e.frozen.Store(true)
	}
	return err
}

// Thaw resumes a frozen container.
func (e *env) Thaw(ctx context.Context) error {
	err := retryStalePaused(ctx, pausedFlagRetry, "is not paused", func(ctx context.Context) error {
		_, err := e.cli.ContainerUnpause(ctx, e.id, client.ContainerUnpauseOptions{})
		return err
	})
	if err == nil {
		e.frozen.Store(false)
	}
	return err
}

// Docker (20.10 and later) keeps a container's Paused flag in two places
// that race: the pause and unpause handlers set it, and so does its monitor
// when containerd's paused and resumed events arrive, later and in their
// own queue. When a pause follows an unpause closely (an agent that decides
// in milliseconds) and the daemon is busy, the previous transition's late
// event can flip the flag back, and Docker refuses the next request ("is
// not paused", "is already paused") for a container that is in fact in the
// state the request would leave. The flag is right again once the queued
// events are processed, so such a refusal is retried for up to
// pausedFlagRetry. (Reproduced with three loops of `docker run --rm`
// beside the conformance suite's FreezeThaw: it failed within ten cycles;
// see docs/architecture.md.)
const pausedFlagRetry = 3 * time.Second

// retryStalePaused calls op until it succeeds, fails with an error that
// does not contain refusal, or within has passed.
func retryStalePaused(ctx context.Context, within time.Duration, refusal string, op func(context.Context) error) error {
	deadline := time.Now().Add(within)
	delay := 5 * time.Millisecond
	for {
		err := op(ctx)
		if err == nil || !strings.Contains(err.Error(), refusal) || !time.Now().Add(delay).Before(deadline) {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (retrying: %w)", err, ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// Close implements environment.Environment: the guest stops the app and the
// display, its stdin closes, and the container is removed (it is also
// AutoRemove, and labelled for `agentbox gc`).
func (e *env) Close(ctx context.Context) error {
	e.closeOnce.Do(func() { e.closeErr = e.close(ctx) })
	return e.closeErr
}

func (e *env) close(ctx context.Context) error {
	var errs []error
	if e.frozen.Load() {
		tctx, cancel := context.WithTimeout(ctx, pausedFlagRetry+2*time.Second)
		_ = e.Thaw(tctx) // best effort: removal kills a frozen container too
		cancel()
	}
	if e.guest != nil {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if _, err := e.guest.Stop(sctx, 2*time.Second); err != nil && !errors.Is(err, environment.ErrGuest) {
			errs = append(errs, err)
		}
		cancel()
	}
	if e.hijack != nil {
		_ = e.hijack.CloseWrite() // the guest sees EOF and exits
	}
	if e.id != "" {
		if err := e.remove(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if e.hijack != nil {
		e.hijack.Close()
	}
	if e.cli != nil {
		e.cli.Close()
	}
	return errors.Join(errs...)
}

// remove waits briefly for the container to exit on its own, then removes it
// by force; it verifies the container is gone.
func (e *env) remove(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	wr := e.cli.ContainerWait(wctx, e.id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case <-wr.Result:
	case <-wr.Error:
	case <-wctx.Done():
	}
	cancel()
	_, err := e.cli.ContainerRemove(ctx, e.id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) && !isRemovalInProgress(err) {
		return fmt.Errorf("remove container %.12s: %w", e.id, err)
	}
	// AutoRemove may still be in progress: wait until it is really gone.
	for i := 0; i < 50; i++ {
		_, err := e.cli.ContainerInspect(ctx, e.id, client.ContainerInspectOptions{})
		if cerrdefs.IsNotFound(err) {
			return nil
		}
		if ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("container %.12s still exists after removal", e.id)
}

func isRemovalInProgress(err error) bool {
	return err != nil && strings.Contains(err.Error(), "is already in progress")
}
