package testenv

import (
	"io"
	"net"
	"testing"
)

// Echo listens on the loopback (TCP, a free port) until the test ends and
// answers every connection with what it was sent, closing its write side
// once the client has closed its own (a half-close: the client reads
// everything back, then EOF).
func Echo(t testing.TB) *net.TCPAddr {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	Serve(t, ln, func(c net.Conn) {
		io.Copy(c, c)
		c.(*net.TCPConn).CloseWrite()
	})
	return ln.Addr().(*net.TCPAddr)
}

// Serve accepts connections on ln until the test ends (ln is closed then),
// each handled by handle on its own goroutine and closed after it.
func Serve(t testing.TB, ln net.Listener, handle func(net.Conn)) {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
}
