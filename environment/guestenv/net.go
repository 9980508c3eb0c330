package guestenv

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/netproxy"
	"github.com/codegirl-games/agentbox/internal/owner"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

// NetDir is where a backend mounts the directory Network returns, inside
// the sandbox (read-only is enough: connecting to a socket is not a
// write to its file system).
const NetDir = "/run/agentbox/net"

// Network starts the sandbox's network when the configuration has one
// (Config.Network: a rule or a forward): agentbox's proxy and forwards,
// listening on unix sockets in a new directory on the host, which it
// returns for the backend to mount at NetDir before the sandbox starts.
// sandboxUID is the host user the sandbox's processes run as: the
// directory is that user's alone (mode 0700), so no other user of the
// host reaches the sockets. Without a network it returns "" and starts
// nothing. Close stops the proxy and removes the directory.
//
// Backends that call it declare Capabilities.Network; Start refuses a
// configuration with a network from a backend that did not call it.
func (e *Env) Network(sandboxUID int) (string, error) {
	p := e.opts.Config.Network
	if !p.Enabled() {
		return "", nil
	}
	if e.net != nil {
		return e.net.Dir(), nil
	}
	dir, err := owner.TempDir("net")
	if err != nil {
		return "", fmt.Errorf("%w: the network's socket directory: %w", environment.ErrUnavailable, err)
	}
	var perr error
	switch {
	case os.Geteuid() == 0 && sandboxUID != 0:
		perr = os.Chown(dir, sandboxUID, sandboxUID)
	case os.Geteuid() != sandboxUID:
		// Not root and not the sandbox's user (Docker run by a member of
		// the docker group): the sandbox must pass through the directory,
		// so others may too; they cannot list it, and the sockets give a
		// host user nothing it lacks (see SECURITY.md).
		perr = os.Chmod(dir, 0o711)
	}
	if perr != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("%w: the network's socket directory: %w", environment.ErrUnavailable, perr)
	}
	rec := func(observe.NetEvent) {}
	if nr, ok := e.opts.Config.Events.(environment.NetRecorder); ok {
		rec = nr.Network
	}
	srv, err := netproxy.Start(dir, netproxy.Options{Policy: *p, Record: rec})
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("%w: the sandbox's network: %w", environment.ErrUnavailable, err)
	}
	e.net = srv
	return dir, nil
}

// CarryNetwork starts the sandbox's network like Network, for a sandbox
// the host's sockets cannot be mounted into (a Kubernetes Pod): the guest
// carries each connection over its stream (wire.Tunnel) and Start's
// client dials the socket here, on the host, where the proxy records it
// as on the other backends. The directory is this process's alone (mode
// 0700): nothing in the sandbox reaches it but through the guest's
// stream. Without a network it starts nothing.
func (e *Env) CarryNetwork() error {
	p := e.opts.Config.Network
	if !p.Enabled() || e.net != nil {
		return nil
	}
	dir, err := owner.TempDir("net")
	if err != nil {
		return fmt.Errorf("%w: the network's socket directory: %w", environment.ErrUnavailable, err)
	}
	rec := func(observe.NetEvent) {}
	if nr, ok := e.opts.Config.Events.(environment.NetRecorder); ok {
		rec = nr.Network
	}
	srv, err := netproxy.Start(dir, netproxy.Options{Policy: *p, Record: rec})
	if err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("%w: the sandbox's network: %w", environment.ErrUnavailable, err)
	}
	e.net, e.netCarried = srv, true
	return nil
}

// dialSocket connects to the proxy's or a forward's socket by its name
// (the tunnel's net.open); a name the network has not is refused.
func (e *Env) dialSocket(name string) (net.Conn, error) {
	for _, s := range e.net.Sockets() {
		if s.Name == name {
			return net.DialTimeout("unix", filepath.Join(e.net.Dir(), name), 10*time.Second)
		}
	}
	return nil, fmt.Errorf("no socket %q", name)
}

// netSetup is what the guest is told about the network: a port of the
// sandbox's loopback per socket.
func (e *Env) netSetup() (*wire.NetSetup, error) {
	if !e.opts.Config.Network.Enabled() {
		return nil, nil
	}
	if e.net == nil {
		return nil, fmt.Errorf("%w: the %s backend gives a sandbox no network (--allow-net, --forward)", environment.ErrUnavailable, e.opts.Backend)
	}
	n := &wire.NetSetup{Dir: NetDir}
	if e.netCarried {
		n = &wire.NetSetup{Channel: true}
	}
	for _, s := range e.net.Sockets() {
		n.Listen = append(n.Listen, wire.NetListen{Port: s.SandboxPort, Socket: s.Name})
		if s.Proxy {
			n.ProxyPort = s.SandboxPort
		}
	}
	return n, nil
}

// closeNetwork stops the proxy (every open connection is cut and
// recorded) and removes its directory; after the sandbox is gone.
func (e *Env) closeNetwork() error {
	if e.net == nil {
		return nil
	}
	if e.guest != nil {
		e.guest.closeTunnel()
	}
	e.net.Close()
	dir := e.net.Dir()
	if filepath.Base(dir) == "" {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove the network's socket directory: %w", err)
	}
	return nil
}
