package wire

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/internal/testenv"
)

// tunnelPair is a guest's and a host's tunnel over a real pair of Conns;
// the host dials sockets by name in dial.
func tunnelPair(t *testing.T, dial func(string) (net.Conn, error)) (guest, host *Tunnel) {
	t.Helper()
	gr, hw := io.Pipe() // host → guest
	hr, gw := io.Pipe() // guest → host
	gc, hc := NewConn(gr, gw), NewConn(hr, hw)
	guest = NewTunnel(func(m string, s NetStream, p []byte) error {
		b, _ := json.Marshal(s)
		return gc.Write(&Header{Type: Event, Method: m, Body: b}, p)
	}, nil, 64)
	host = NewTunnel(func(m string, s NetStream, p []byte) error {
		b, _ := json.Marshal(s)
		return hc.Write(&Header{Type: Request, Method: m, Body: b}, p)
	}, dial, 64)
	go gc.Serve(func(m *Message) { guest.Handle(m.Method, m.Body, m.Payload) })
	go hc.Serve(func(m *Message) { host.Handle(m.Method, m.Body, m.Payload) })
	t.Cleanup(func() {
		guest.Close()
		host.Close()
		gr.Close()
		hr.Close()
	})
	return guest, host
}

// through opens a connection to socket over the tunnel: the app's end.
func through(t *testing.T, g *Tunnel, socket string) net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	app, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	go g.Join(app, socket)
	t.Cleanup(func() { c.Close() })
	return c
}

func waitOpen(t *testing.T, ts ...*Tunnel) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := 0
		for _, x := range ts {
			n += x.Open()
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTunnelEcho: megabytes both ways over many connections at once come
// back whole, half-closes pass through, and every connection is
// forgotten on both sides afterwards.
func TestTunnelEcho(t *testing.T) {
	addr := testenv.Echo(t).String()
	var asked sync.Map
	g, h := tunnelPair(t, func(s string) (net.Conn, error) {
		asked.Store(s, true)
		return net.Dial("tcp", addr)
	})
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := through(t, g, "proxy.sock")
			data := make([]byte, 3<<20)
			rand.Read(data)
			go func() {
				c.Write(data)
				c.(*net.TCPConn).CloseWrite()
			}()
			got, err := io.ReadAll(c)
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("echo: %d of %d bytes back, equal %v, err %v", len(got), len(data), bytes.Equal(got, data), err)
			}
		}()
	}
	wg.Wait()
	if _, ok := asked.Load("proxy.sock"); !ok {
		t.Error("the host was not asked for the socket")
	}
	waitOpen(t, g, h)
}

// TestTunnelRefused: a socket the host cannot dial resets the app's
// connection, and nothing stays open.
func TestTunnelRefused(t *testing.T) {
	g, h := tunnelPair(t, func(s string) (net.Conn, error) { return nil, errors.New("no such socket") })
	c := through(t, g, "nope.sock")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil || n > 0 {
		t.Fatalf("read %d bytes, err %v; want the connection closed", n, err)
	}
	waitOpen(t, g, h)
}

// TestTunnelSlowReader: a reader that does not read holds the sender to
// the window; the stream still carries other connections meanwhile.
func TestTunnelSlowReader(t *testing.T) {
	sink := make(chan net.Conn, 1)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			sink <- c // never read
		}
	}()
	addr := testenv.Echo(t).String()
	g, h := tunnelPair(t, func(s string) (net.Conn, error) {
		if s == "stuck" {
			return net.Dial("tcp", ln.Addr().String())
		}
		return net.Dial("tcp", addr)
	})
	stuck := through(t, g, "stuck")
	wrote := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(stuck, io.LimitReader(zeroReader{}, 64<<20))
		wrote <- n
	}()
	time.Sleep(300 * time.Millisecond)
	// Another connection is carried at once.
	c := through(t, g, "echo")
	c.Write([]byte("hello"))
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 5)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("beside a stuck connection: %q, %v", buf, err)
	}
	select {
	case n := <-wrote:
		t.Fatalf("all %d bytes went into a connection nobody reads", n)
	default:
	}
	g.Close()
	h.Close()
	(<-sink).Close()
	waitOpen(t, g, h)
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestTunnelBadPeer: a peer that sends past the window, acks what was
// never sent or opens a connection twice gets resets, not memory.
func TestTunnelBadPeer(t *testing.T) {
	var sent []string
	var mu sync.Mutex
	host := NewTunnel(func(m string, s NetStream, p []byte) error {
		mu.Lock()
		sent = append(sent, m)
		mu.Unlock()
		return nil
	}, func(string) (net.Conn, error) {
		a, b := net.Pipe()
		go io.Copy(io.Discard, b)
		return a, nil
	}, 4)
	open := func(id uint32) {
		b, _ := json.Marshal(NetStream{Conn: id, Socket: "s"})
		host.Handle(NetOpen, b, nil)
	}
	open(1)
	open(1) // twice
	body, _ := json.Marshal(NetStream{Conn: 1})
	for i := 0; i < NetWindow/NetChunk+2; i++ {
		host.Handle(NetData, body, make([]byte, NetChunk))
	}
	for i := uint32(2); i < 10; i++ {
		open(i) // past max
	}
	time.Sleep(200 * time.Millisecond)
	host.Close()
	waitOpen(t, host)
	mu.Lock()
	defer mu.Unlock()
	resets := 0
	for _, m := range sent {
		if m == NetReset {
			resets++
		}
	}
	if resets < 2 {
		t.Errorf("sent %v; want resets for the second open and the connections past the bound", sent)
	}
}
