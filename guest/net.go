package guest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/codegirl-games/agentbox/wire"
)

// The sandbox has no network interface but loopback, and nothing in it
// may leave except through agentbox's proxy and forwards, which listen on
// unix sockets on the host, mounted into the sandbox. Apps speak TCP: the
// guest listens on the sandbox's own 127.0.0.1 (and ::1 where the sandbox
// has it) at each port of the setup and relays every connection to its
// socket, byte for byte. It parses nothing and decides nothing — the host
// does, on the other side of the socket — so the app gains nothing by
// talking to it that it could not do by opening the socket itself.
//
// Where the host cannot mount its sockets into the sandbox (a Kubernetes
// Pod), the relay carries each connection over the guest's own stream
// instead (wire.Tunnel): the host dials the socket there.
//
// The relay runs in the guest, the sandbox's init, because that is the one
// process in the sandbox's network namespace agentbox controls from the
// start; its listeners are up before the app starts.

// netRelay is the guest's relay of the sandbox's ports to the host's
// sockets.
type netRelay struct {
	proxyPort int
	lns       []net.Listener
	slots     chan struct{} // bounds the connections relayed at once
	// tunnel, with NetSetup.Channel, carries the connections over the
	// guest's stream instead of to sockets in a directory (a Kubernetes
	// Pod, which has no mount of the host's).
	tunnel *wire.Tunnel
}

// maxRelayed bounds the connections the guest relays at once; beyond it
// new ones are closed at once (the host bounds them too).
const maxRelayed = 512

// Bounds of a NetSetup.
const (
	maxNetListen = 64
	minNetPort   = 1024
)

// checkNetSetup holds a setup to what the host sends: an absolute
// directory, plain socket names, distinct unprivileged ports.
func checkNetSetup(n *wire.NetSetup) error {
	if n.Channel {
		if n.Dir != "" {
			return fmt.Errorf("net: a directory %q and the channel both", n.Dir)
		}
	} else if !filepath.IsAbs(n.Dir) || filepath.Clean(n.Dir) != n.Dir {
		return fmt.Errorf("net: directory %q is not a clean absolute path", n.Dir)
	}
	if len(n.Listen) == 0 || len(n.Listen) > maxNetListen {
		return fmt.Errorf("net: %d ports (want 1 to %d)", len(n.Listen), maxNetListen)
	}
	seen := map[int]bool{}
	proxy := n.ProxyPort == 0
	for _, l := range n.Listen {
		if l.Port < minNetPort || l.Port > 65535 || seen[l.Port] {
			return fmt.Errorf("net: port %d is out of range (%d to 65535) or given twice", l.Port, minNetPort)
		}
		seen[l.Port] = true
		if !filepath.IsLocal(l.Socket) || filepath.Base(l.Socket) != l.Socket {
			return fmt.Errorf("net: socket %q is not a file name", l.Socket)
		}
		proxy = proxy || l.Port == n.ProxyPort
	}
	if !proxy {
		return fmt.Errorf("net: the proxy port %d is not among the ports", n.ProxyPort)
	}
	return nil
}

// startNet listens on every port of the setup; on error nothing is left
// listening. tunnel carries the connections with NetSetup.Channel.
func startNet(n *wire.NetSetup, tunnel *wire.Tunnel, logf func(format string, a ...any)) (*netRelay, error) {
	if err := checkNetSetup(n); err != nil {
		return nil, wire.Errorf(wire.CodeInvalid, "start: %v", err)
	}
	r := &netRelay{proxyPort: n.ProxyPort, slots: make(chan struct{}, maxRelayed)}
	if n.Channel {
		if tunnel == nil {
			return nil, wire.Errorf(wire.CodeInvalid, "start: net: no channel to carry the connections")
		}
		r.tunnel = tunnel
	}
	for _, l := range n.Listen {
		ln, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Port)))
		if err != nil {
			r.close()
			return nil, fmt.Errorf("start: listen on the sandbox's 127.0.0.1:%d: %w", l.Port, err)
		}
		r.lns = append(r.lns, ln)
		sock := l.Socket // the channel's name for it
		if !n.Channel {
			sock = filepath.Join(n.Dir, l.Socket)
		}
		go r.serve(ln, sock)
		// localhost may resolve to ::1 first; offer the port there too
		// where the sandbox's loopback has IPv6.
		if ln6, err := net.Listen("tcp6", net.JoinHostPort("::1", strconv.Itoa(l.Port))); err == nil {
			r.lns = append(r.lns, ln6)
			go r.serve(ln6, sock)
		} else if logf != nil {
			logf("no IPv6 loopback for port %d: %v", l.Port, err)
		}
	}
	return r, nil
}

// proxyURL is the app's HTTP(S) proxy, or "".
func (r *netRelay) proxyURL() string {
	if r == nil || r.proxyPort == 0 {
		return ""
	}
	return "http://127.0.0.1:" + strconv.Itoa(r.proxyPort)
}

// env is what the app's environment gains: the proxy for HTTP and HTTPS
// (upper and lower case, as tools read either), and the loopback kept
// direct, so forwarded ports are reached without it.
func (r *netRelay) env() []string {
	u := r.proxyURL()
	if u == "" {
		return nil
	}
	const direct = "localhost,127.0.0.1,::1"
	return []string{"http_proxy=" + u, "HTTP_PROXY=" + u, "https_proxy=" + u, "HTTPS_PROXY=" + u,
		"no_proxy=" + direct, "NO_PROXY=" + direct}
}

func (r *netRelay) serve(ln net.Listener, sock string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like: do not spin
			continue
		}
		select {
		case r.slots <- struct{}{}:
		default:
			c.Close() // too many at once
			continue
		}
		go func() {
			defer func() { <-r.slots }()
			if r.tunnel != nil {
				r.tunnel.Join(c, sock)
				return
			}
			relayTo(c, sock)
		}()
	}
}

// relayTo copies c to and from a new connection to the unix socket sock
// until both directions end, passing half-closes on.
func relayTo(c net.Conn, sock string) {
	defer c.Close()
	up, err := net.DialTimeout("unix", sock, 10*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
			_ = cw.CloseWrite()
		} else {
			dst.Close()
			src.Close()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}

// close stops listening; relayed connections end with the sandbox (or
// the channel's with the tunnel).
func (r *netRelay) close() {
	if r == nil {
		return
	}
	for _, ln := range r.lns {
		ln.Close()
	}
	if r.tunnel != nil {
		r.tunnel.Close()
	}
}
