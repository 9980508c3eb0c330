package xserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/guest/xdial"
)

// Defaults applied by Start to zero fields of Config.
const (
	DefaultWidth  = 640
	DefaultHeight = 480
	DefaultDepth  = 24
	DefaultXvfb   = "Xvfb"
	// SocketDir is where Xvfb creates its sockets. It is compiled into Xvfb.
	SocketDir = xdial.SocketDir
)

// ErrRuntimeDir is returned by Start when Config.RuntimeDir names a directory
// Xvfb cannot use.
var ErrRuntimeDir = errors.New("xserver: Xvfb keeps its sockets and locks in /tmp (compiled in); RuntimeDir must be /tmp")

// ErrNotReady is wrapped by Start's error when Xvfb exits, or its readiness
// pipe closes, before it reports a display number.
var ErrNotReady = errors.New("xserver: Xvfb exited before it was ready")

// Config describes the X server to start. The zero value is a 640×480×24
// screen on a free display number.
type Config struct {
	// Width, Height and Depth of screen 0 (defaults 640, 480, 24). The guest's
	// capture code needs depth 24 (32 bits per pixel).
	Width, Height, Depth int
	// Display is the display number to use; 0 lets Xvfb pick the first free
	// one (so :0 itself cannot be requested explicitly).
	Display int
	// Xvfb is the server executable, a path or a name looked up in PATH
	// (default "Xvfb").
	Xvfb string
	// NoGLX starts the server without its GLX extension (-extension GLX):
	// for apps that draw without OpenGL, it saves loading Mesa's software
	// renderer at every start (see ExtraArgs).
	NoGLX bool
	// ExtraArgs are appended to the command line. For applications that do
	// not use OpenGL, "-extension", "GLX" saves Xvfb's loading of Mesa's
	// software renderer: measured 74 ms instead of 252 ms to ready (p50 of
	// 10, Xvfb 21.1.7, 2 vCPU).
	ExtraArgs []string
	// Env is the server's environment; nil means the current process's.
	Env []string
	// Stderr receives the server's stderr (and stdout). The caller bounds it;
	// nil discards it (the last few KiB are kept for error messages either
	// way).
	Stderr io.Writer
	// RuntimeDir is the directory that holds .X11-unix. Xvfb compiles /tmp in;
	// "" means /tmp, anything else is rejected with ErrRuntimeDir.
	RuntimeDir string
}

// Server is a running Xvfb.
type Server struct {
	p       *proc
	display int
	ready   time.Duration
	cfg     Config
}

// Start runs Xvfb and returns once it accepts connections, as reported on the
// -displayfd pipe. ctx bounds only the start; cancel it afterwards freely and
// stop the server with Stop. If Xvfb exits before it is ready, the error wraps
// ErrNotReady and includes the tail of its stderr. If ctx ends first, the
// half-started server is killed and the error wraps ctx.Err().
func Start(ctx context.Context, cfg Config) (*Server, error) {
	t0 := time.Now()
	if cfg.Width == 0 {
		cfg.Width = DefaultWidth
	}
	if cfg.Height == 0 {
		cfg.Height = DefaultHeight
	}
	if cfg.Depth == 0 {
		cfg.Depth = DefaultDepth
	}
	if cfg.Xvfb == "" {
		cfg.Xvfb = DefaultXvfb
	}
	if cfg.Width < 0 || cfg.Height < 0 || cfg.Width > 32767 || cfg.Height > 32767 {
		return nil, fmt.Errorf("xserver: bad screen size %dx%d", cfg.Width, cfg.Height)
	}
	if cfg.Display < 0 {
		return nil, fmt.Errorf("xserver: bad display number %d", cfg.Display)
	}
	if cfg.RuntimeDir != "" && filepath.Clean(cfg.RuntimeDir) != "/tmp" {
		return nil, fmt.Errorf("%w (got %q)", ErrRuntimeDir, cfg.RuntimeDir)
	}
	path, err := exec.LookPath(cfg.Xvfb)
	if err != nil {
		return nil, fmt.Errorf("xserver: %w", err)
	}
	if err := ensureSocketDir(); err != nil {
		return nil, err
	}
	env := cfg.Env
	if env == nil {
		env = os.Environ()
	}

	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("xserver: displayfd pipe: %w", err)
	}
	defer r.Close()
	p, err := startProc("Xvfb", path, Args(cfg, 3), env, cfg.Stderr, []*os.File{w})
	w.Close() // the child has its copy; EOF on r now means the child is gone
	if err != nil {
		return nil, err
	}

	type result struct {
		n   int
		err error
	}
	got := make(chan result, 1)
	go func() {
		line, err := bufio.NewReader(r).ReadString('\n')
		if err != nil {
			got <- result{err: err}
			return
		}
		n, err := strconv.Atoi(strings.TrimSpace(line))
		got <- result{n: n, err: err}
	}()

	select {
	case res := <-got:
		if res.err != nil {
			if errors.Is(res.err, io.EOF) {
				// Xvfb closed the pipe without writing: it is exiting.
				select {
				case <-p.done:
				case <-ctx.Done():
					_ = p.terminate(context.Background())
				}
				return nil, fmt.Errorf("%w: %w", ErrNotReady, p.exitError("did not start"))
			}
			_ = p.terminate(context.Background())
			return nil, fmt.Errorf("xserver: reading Xvfb's display number: %w", res.err)
		}
		if cfg.Display != 0 && res.n != cfg.Display {
			_ = p.terminate(context.Background())
			return nil, fmt.Errorf("xserver: asked for display :%d, Xvfb reported :%d", cfg.Display, res.n)
		}
		return &Server{p: p, display: res.n, ready: time.Since(t0), cfg: cfg}, nil
	case <-ctx.Done():
		// Unblocks the reader goroutine too: the child's end closes when it dies.
		_ = p.terminate(context.Background())
		return nil, fmt.Errorf("xserver: waiting for Xvfb to be ready: %w", ctx.Err())
	}
}

// Args is Xvfb's command line (without the program) as Start runs it for
// cfg (its defaults applied), reporting readiness on descriptor
// displayFD. The cold-start floor of the local backend (environment/local)
// runs the same server.
func Args(cfg Config, displayFD int) []string {
	if cfg.Width == 0 {
		cfg.Width = DefaultWidth
	}
	if cfg.Height == 0 {
		cfg.Height = DefaultHeight
	}
	if cfg.Depth == 0 {
		cfg.Depth = DefaultDepth
	}
	args := []string{}
	if cfg.Display != 0 {
		args = append(args, ":"+strconv.Itoa(cfg.Display))
	}
	args = append(args,
		"-displayfd", strconv.Itoa(displayFD),
		"-screen", "0", fmt.Sprintf("%dx%dx%d", cfg.Width, cfg.Height, cfg.Depth),
		"-nolisten", "tcp",
		"-noreset",
		"+extension", "XTEST",
		"+extension", "MIT-SHM",
		"-dpi", "96",
	)
	if cfg.NoGLX {
		args = append(args, "-extension", "GLX")
	}
	return append(args, cfg.ExtraArgs...)
}

// ensureSocketDir creates /tmp/.X11-unix with mode 1777 if it is missing.
// Xvfb would create it too; doing it here reports a read-only or missing /tmp
// as a clear error. An existing directory is left as it is.
func ensureSocketDir() error {
	fi, err := os.Lstat(SocketDir)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("xserver: %s exists and is not a directory", SocketDir)
		}
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("xserver: %w", err)
	}
	const mode = 0o777 | os.ModeSticky
	if err := os.Mkdir(SocketDir, mode); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("xserver: create socket directory: %w", err)
	}
	// Mkdir is subject to the umask.
	if err := os.Chmod(SocketDir, mode); err != nil {
		return fmt.Errorf("xserver: chmod socket directory: %w", err)
	}
	return nil
}

// Display returns the DISPLAY string, ":N".
func (s *Server) Display() string { return ":" + strconv.Itoa(s.display) }

// Pid is the X server's process ID.
func (s *Server) Pid() int { return s.p.pid() }

// Number returns the display number N.
func (s *Server) Number() int { return s.display }

// SocketPath returns the path of the server's Unix socket.
func (s *Server) SocketPath() string { return SocketDir + "/X" + strconv.Itoa(s.display) }

// ReadyAfter returns how long Start took from its call until Xvfb reported
// readiness.
func (s *Server) ReadyAfter() time.Duration { return s.ready }

// Done is closed when Xvfb has exited, for whatever reason.
func (s *Server) Done() <-chan struct{} { return s.p.done }

// Stop sends SIGTERM, waits up to two seconds (or until ctx is done), then
// sends SIGKILL, and returns once Xvfb has been reaped. It is safe to call more
// than once and after Xvfb has exited.
func (s *Server) Stop(ctx context.Context) error { return s.p.terminate(ctx) }
