package guest

import (
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/wire"
)

func TestCheckNetSetup(t *testing.T) {
	ok := wire.NetSetup{Dir: "/run/agentbox/net", Listen: []wire.NetListen{{Port: 3128, Socket: "proxy.sock"}, {Port: 8080, Socket: "forward-8080.sock"}}, ProxyPort: 3128}
	for _, c := range []struct {
		name string
		edit func(n *wire.NetSetup)
		want string
	}{
		{"ok", func(*wire.NetSetup) {}, ""},
		{"relative dir", func(n *wire.NetSetup) { n.Dir = "run/net" }, "clean absolute"},
		{"unclean dir", func(n *wire.NetSetup) { n.Dir = "/run/../etc" }, "clean absolute"},
		{"no ports", func(n *wire.NetSetup) { n.Listen = nil }, "0 ports"},
		{"a privileged port", func(n *wire.NetSetup) { n.Listen[1].Port = 80 }, "out of range"},
		{"a port twice", func(n *wire.NetSetup) { n.Listen[1].Port = 3128 }, "given twice"},
		{"a socket path", func(n *wire.NetSetup) { n.Listen[1].Socket = "../../etc/x" }, "not a file name"},
		{"a socket in a subdirectory", func(n *wire.NetSetup) { n.Listen[1].Socket = "a/b.sock" }, "not a file name"},
		{"the proxy port missing", func(n *wire.NetSetup) { n.ProxyPort = 9999 }, "not among"},
		{"the channel", func(n *wire.NetSetup) { n.Dir, n.Channel = "", true }, ""},
		{"the channel and a directory", func(n *wire.NetSetup) { n.Channel = true }, "and the channel both"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := ok
			n.Listen = append([]wire.NetListen(nil), ok.Listen...)
			c.edit(&n)
			err := checkNetSetup(&n)
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("checkNetSetup = %v, want %q", err, c.want)
			}
		})
	}
}

// echoAfter serves ln until the test ends: each connection gets
// "echo:" and all it sent, once the client has half-closed it.
func echoAfter(t *testing.T, ln net.Listener) {
	testenv.Serve(t, ln, func(c net.Conn) {
		b, _ := io.ReadAll(c)
		c.Write(append([]byte("echo:"), b...))
	})
}

// freePort is a free port on this machine's loopback (the test is skipped
// where that is below the relay's lowest).
func freePort(t *testing.T) int {
	t.Helper()
	probe, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := probe.Addr().(*net.TCPAddr).Port
	probe.Close()
	if port < minNetPort {
		t.Skipf("got port %d", port)
	}
	return port
}

// sayHello sends "hello" to port on the loopback, half-closes, and reads
// the answer to its end.
func sayHello(port int) (string, error) {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.Write([]byte("hello"))
	c.(*net.TCPConn).CloseWrite()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	got, err := io.ReadAll(c)
	return string(got), err
}

// TestRelay: a TCP connection to the relay's port reaches the unix socket
// behind it, both ways, with half-closes passed on; the proxy variables
// name the proxy's port; closing stops listening.
func TestRelay(t *testing.T) {
	dir, err := os.MkdirTemp("", "abx-relay-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("unix", filepath.Join(dir, "echo.sock"))
	if err != nil {
		t.Fatal(err)
	}
	echoAfter(t, ln)
	port := freePort(t)
	r, err := startNet(&wire.NetSetup{Dir: dir, Listen: []wire.NetListen{{Port: port, Socket: "echo.sock"}}, ProxyPort: port}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if env := strings.Join(r.env(), " "); !strings.Contains(env, "HTTPS_PROXY=http://127.0.0.1:") || !strings.Contains(env, "NO_PROXY=localhost,127.0.0.1,::1") {
		t.Errorf("env: %s", env)
	}
	if got, err := sayHello(port); err != nil || got != "echo:hello" {
		t.Fatalf("through the relay: %q, %v", got, err)
	}
	r.close()
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second); err == nil {
		c.Close()
		t.Error("the relay still listens after close")
	}
}

// TestRelayChannel: with NetSetup.Channel, a TCP connection to the relay's
// port is carried over the guest's own stream to the host, which dials the
// socket by its name; both ways, half-closes passed on.
func TestRelayChannel(t *testing.T) {
	guestIn, hostOut := io.Pipe()
	hostIn, guestOut := io.Pipe()
	g := newGuest(guestIn, guestOut, io.Discard, Options{})
	served := make(chan struct{})
	go func() {
		defer close(served)
		g.serve()
	}()
	// The host's end: a unix-free echo behind the socket's name.
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	echoAfter(t, echo)
	hc := wire.NewConn(hostIn, hostOut)
	asked := make(chan string, 4)
	host := wire.NewTunnel(func(m string, s wire.NetStream, p []byte) error {
		b, _ := json.Marshal(s)
		return hc.Write(&wire.Header{Type: wire.Request, Method: m, Body: b}, p)
	}, func(name string) (net.Conn, error) {
		asked <- name
		return net.Dial("tcp", echo.Addr().String())
	}, 8)
	go hc.Serve(func(m *wire.Message) { host.Handle(m.Method, m.Body, m.Payload) })
	defer func() {
		host.Close()
		hostOut.Close()
		<-served
	}()
	port := freePort(t)
	r, err := startNet(&wire.NetSetup{Channel: true, Listen: []wire.NetListen{{Port: port, Socket: "echo.sock"}}}, g.tunnel, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	if got, err := sayHello(port); err != nil || got != "echo:hello" {
		t.Fatalf("over the channel: %q, %v", got, err)
	}
	if name := <-asked; name != "echo.sock" || len(asked) != 0 {
		t.Errorf("the host was asked for %q (and %d more)", name, len(asked))
	}
	if _, err := startNet(&wire.NetSetup{Channel: true, Listen: []wire.NetListen{{Port: port + 1, Socket: "x.sock"}}}, nil, nil); err == nil {
		t.Error("a channel setup without a tunnel was taken")
	}
}
