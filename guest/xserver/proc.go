package xserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopGrace is how long a child gets to exit after SIGTERM before it is
// killed with SIGKILL. Xvfb and Openbox exit within a few milliseconds.
const stopGrace = 2 * time.Second

// tailSize bounds the stderr kept for error messages.
const tailSize = 4 << 10

// proc is a child process with a two-stage stop: SIGTERM through
// exec.Cmd.Cancel, SIGKILL after exec.Cmd.WaitDelay.
type proc struct {
	name string
	cmd  *exec.Cmd
	stop context.CancelFunc
	done chan struct{}
	err  error // exit result of cmd.Wait; valid after done is closed
	tail *tailBuffer
}

// startProc starts path with args. Its stdout and stderr go to stderr (if
// non-nil) and to a bounded tail kept for error messages. extra become fds 3, 4, … in the
// child. The child is killed if the calling process dies (Pdeathsig).
func startProc(name, path string, args, env []string, stderr io.Writer, extra []*os.File) (*proc, error) {
	stopCtx, stop := context.WithCancel(context.Background())
	cmd := exec.CommandContext(stopCtx, path, args...)
	cmd.Env = env
	cmd.Stdin = nil
	tail := &tailBuffer{max: tailSize}
	var out io.Writer = tail
	if stderr != nil {
		out = io.MultiWriter(tail, lenient{stderr})
	}
	// Both streams go to one writer: Openbox prints its messages (such as
	// "A window manager is already running") on stdout.
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group: a terminal's ^C reaches the guest, which then
		// stops its children in order, instead of killing them first.
		Setpgid: true,
		// If the guest dies, so do its X server and window manager.
		Pdeathsig: syscall.SIGKILL,
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = stopGrace
	if err := cmd.Start(); err != nil {
		stop()
		return nil, fmt.Errorf("xserver: start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, stop: stop, done: make(chan struct{}), tail: tail}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// terminate sends SIGTERM, waits up to stopGrace (or until ctx is done) and
// then SIGKILL. It returns once the process has been reaped. An exit caused by
// our own signal is not an error.
func (p *proc) terminate(ctx context.Context) error {
	p.stop() // Cancel: SIGTERM now, SIGKILL after WaitDelay.
	select {
	case <-p.done:
	case <-ctx.Done():
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return nil
}

// exitError describes an unexpected exit, with the tail of stderr.
func (p *proc) exitError(what string) error {
	<-p.done
	msg := strings.TrimSpace(p.tail.String())
	if msg == "" {
		msg = "(no output on stderr)"
	}
	cause := p.err
	if cause == nil {
		cause = errors.New("exit status 0")
	}
	return fmt.Errorf("xserver: %s %s: %w; stderr tail:\n%s", p.name, what, cause, msg)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(b)
	if len(b) >= t.max {
		b = b[len(b)-t.max:]
		t.buf = append(t.buf[:0], b...)
		return n, nil
	}
	if over := len(t.buf) + len(b) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, b...)
	return n, nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// lenient forwards writes and hides failures, so that a failing caller-owned
// writer never stops the copy of a child's stderr (the child would then get
// EPIPE, or block).
type lenient struct{ w io.Writer }

func (l lenient) Write(b []byte) (int, error) {
	_, _ = l.w.Write(b)
	return len(b), nil
}
