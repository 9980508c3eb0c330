// Package atspi is the sandbox's accessibility bus and the guest's screen
// reader: it starts a private D-Bus session bus and AT-SPI's bus launcher
// (which starts the accessibility bus and, on first use, its registry), gives
// the app the environment GTK (atk-bridge) and Qt need to expose their
// widgets there, and reads the tree of every application on it over D-Bus
// (github.com/godbus/dbus/v5): one read at a time, every call under a
// deadline, bounded in elements, depth and time.
//
// Nothing here is started unless asked for (--a11y): a run without it
// costs nothing.
package atspi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
)

// Programs the bus needs (Debian: dbus-daemon, at-spi2-core).
const (
	DBusDaemon = "dbus-daemon"
	// Launcher is AT-SPI's bus launcher; Debian installs it in
	// /usr/libexec.
	Launcher = "at-spi-bus-launcher"
)

var launcherDirs = []string{"/usr/libexec", "/usr/lib/at-spi2-core", "/usr/libexec/at-spi2", "/usr/lib/x86_64-linux-gnu/at-spi2-core"}

// ErrMissing is wrapped when the image or host lacks the bus's programs.
var ErrMissing = errors.New("the accessibility bus's programs are missing")

// Config says where and how to start the bus.
type Config struct {
	// Dir is a private writable directory for the session bus's socket
	// and configuration (the sandbox's $XDG_RUNTIME_DIR).
	Dir string
	// Env is the base environment of the bus's processes (DISPLAY, HOME,
	// PATH, XDG_RUNTIME_DIR, …).
	Env []string
	// Stderr receives the bus processes' diagnostics.
	Stderr io.Writer
}

// Bus is a running accessibility bus.
type Bus struct {
	session  string // the session bus's address
	a11y     string // the accessibility bus's address
	daemon   *exec.Cmd
	launcher *exec.Cmd
	started  time.Duration

	mu   sync.Mutex // one read at a time
	conn *dbus.Conn // to the accessibility bus
	// roleNames caches GetRoleName answers of roles outside AT-SPI's table.
	roleNames map[string]string
}

// sessionConf is the private session bus's configuration: it listens on
// one socket in the sandbox's runtime directory, authenticates by uid
// (every process in the sandbox is the same user), activates no services,
// and bounds what one connection may queue.
const sessionConf = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
  <limit name="max_incoming_bytes">16777216</limit>
  <limit name="max_outgoing_bytes">16777216</limit>
  <limit name="max_message_size">4194304</limit>
  <limit name="max_completed_connections">64</limit>
  <limit name="max_connections_per_user">64</limit>
  <limit name="max_names_per_connection">64</limit>
  <limit name="max_match_rules_per_connection">512</limit>
</busconfig>
`

// Start starts the session bus and the launcher and waits until the
// launcher answers with the accessibility bus's address.
func Start(ctx context.Context, cfg Config) (b *Bus, err error) {
	t := time.Now()
	daemonPath, err := exec.LookPath(DBusDaemon)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not on the PATH (Debian: dbus-daemon)", ErrMissing, DBusDaemon)
	}
	launcherPath := findLauncher()
	if launcherPath == "" {
		return nil, fmt.Errorf("%w: %s is not in %s (Debian: at-spi2-core)", ErrMissing, Launcher, strings.Join(launcherDirs, ", "))
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("accessibility bus: %w", err)
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	sock := filepath.Join(cfg.Dir, "bus")
	_ = os.Remove(sock)
	conf := filepath.Join(cfg.Dir, "session.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(sessionConf, sock)), 0o600); err != nil {
		return nil, fmt.Errorf("accessibility bus: %w", err)
	}
	b = &Bus{roleNames: map[string]string{}}
	defer func() {
		if err != nil {
			b.Stop()
		}
	}()

	// The session bus: it prints its address once it listens.
	b.daemon = exec.Command(daemonPath, "--config-file="+conf, "--nofork", "--nopidfile", "--print-address=1")
	b.daemon.Env = cfg.Env
	b.daemon.Stderr = cfg.Stderr
	b.daemon.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := b.daemon.StdoutPipe()
	if err != nil {
		return b, fmt.Errorf("accessibility bus: %w", err)
	}
	if err := b.daemon.Start(); err != nil {
		return b, fmt.Errorf("start %s: %w", daemonPath, err)
	}
	addr, err := firstLine(ctx, out)
	if err != nil {
		return b, fmt.Errorf("the session bus did not say its address: %w", err)
	}
	b.session = addr

	// AT-SPI's launcher: it takes org.a11y.Bus on the session bus and
	// starts the accessibility bus at once.
	env := append(append([]string(nil), cfg.Env...), "DBUS_SESSION_BUS_ADDRESS="+b.session)
	b.launcher = exec.Command(launcherPath, "--launch-immediately")
	b.launcher.Env = env
	b.launcher.Stdout, b.launcher.Stderr = cfg.Stderr, cfg.Stderr
	b.launcher.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := b.launcher.Start(); err != nil {
		return b, fmt.Errorf("start %s: %w", launcherPath, err)
	}
	if b.a11y, err = waitAddress(ctx, b.session); err != nil {
		return b, err
	}
	conn, err := dbus.Connect(b.a11y, dbus.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return b, fmt.Errorf("connect to the accessibility bus %s: %w", b.a11y, err)
	}
	b.conn = conn
	// Activate the registry now, not on the app's first call: the app
	// registers with it as it starts.
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := conn.Object(registryName, rootPath).CallWithContext(cctx, ifaceAccessible+".GetChildren", 0).Err; err != nil {
		return b, fmt.Errorf("the accessibility registry did not answer: %w", err)
	}
	b.started = time.Since(t)
	return b, nil
}

func findLauncher() string {
	if p, err := exec.LookPath(Launcher); err == nil {
		return p
	}
	for _, d := range launcherDirs {
		p := filepath.Join(d, Launcher)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// firstLine reads the first line of r, under ctx.
func firstLine(ctx context.Context, r io.Reader) (string, error) {
	ch := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(r).ReadString('\n')
		if err != nil {
			errc <- err
			return
		}
		ch <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, r)
	}()
	select {
	case l := <-ch:
		return l, nil
	case err := <-errc:
		return "", err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// waitAddress asks the launcher for the accessibility bus's address until
// it answers.
func waitAddress(ctx context.Context, session string) (string, error) {
	conn, err := dbus.Connect(session, dbus.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return "", fmt.Errorf("connect to the session bus %s: %w", session, err)
	}
	defer conn.Close()
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		var addr string
		err := conn.Object("org.a11y.Bus", "/org/a11y/bus").CallWithContext(cctx, "org.a11y.Bus.GetAddress", 0).Store(&addr)
		cancel()
		if err == nil && addr != "" {
			return addr, nil
		}
		last = err
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("AT-SPI's bus launcher did not answer (org.a11y.Bus.GetAddress): %v: %w", last, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Env is what the app needs to expose its widgets on the bus: the session
// bus (where GTK and Qt ask for the accessibility bus), the accessibility
// bus itself (GTK's atk-bridge reads AT_SPI_BUS_ADDRESS first), and Qt's
// switch that turns its bridge on without a screen reader announcing
// itself.
func (b *Bus) Env() []string {
	return []string{
		"DBUS_SESSION_BUS_ADDRESS=" + b.session,
		"AT_SPI_BUS_ADDRESS=" + b.a11y,
		"QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1",
		"QT_ACCESSIBILITY=1",
		"GTK_A11Y=atk",
	}
}

// Started is how long Start took.
func (b *Bus) Started() time.Duration { return b.started }

// PIDs are the bus's own processes (for measuring what it costs).
func (b *Bus) PIDs() []int {
	var out []int
	for _, c := range []*exec.Cmd{b.daemon, b.launcher} {
		if c != nil && c.Process != nil {
			out = append(out, c.Process.Pid)
		}
	}
	return out
}

// Stop ends the bus: the launcher and what it started (the accessibility
// bus and the registry, in its process group), then the session bus.
func (b *Bus) Stop() {
	b.mu.Lock()
	if b.conn != nil {
		b.conn.Close()
		b.conn = nil
	}
	b.mu.Unlock()
	for _, c := range []*exec.Cmd{b.launcher, b.daemon} {
		if c == nil || c.Process == nil {
			continue
		}
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Second):
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
}
