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
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
				c.(*net.TCPConn).CloseWrite()
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr)
}
