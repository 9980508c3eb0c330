package connlimit

import (
	"net"
	"testing"
	"time"
)

// dial opens a connection to ln from the loopback address from, and
// reports whether the listener kept it (it answers a byte) or closed it.
func dial(t *testing.T, ln net.Listener, from string) (net.Conn, bool) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	_, err = c.Read(b[:])
	return c, err == nil
}

func TestBounds(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(raw, 3, 2)
	defer l.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte{1})
			accepted <- c
		}
	}()
	for i, tt := range []struct {
		from string
		kept bool
	}{
		{"127.0.0.2", true},
		{"127.0.0.2", true},
		{"127.0.0.2", false}, // a third from one address
		{"127.0.0.1", true},  // another address is served
		{"127.0.0.3", false}, // a fourth in all
	} {
		if _, kept := dial(t, l, tt.from); kept != tt.kept {
			t.Fatalf("connection %d from %s: kept %v, want %v", i+1, tt.from, kept, tt.kept)
		}
	}
	if open, refused := l.Open(); open != 3 || refused != 2 {
		t.Errorf("open %d, refused %d; want 3 and 2", open, refused)
	}
	// Closing one (twice: counted once) gives its place back.
	c := <-accepted
	c.Close()
	c.Close()
	if _, kept := dial(t, l, "127.0.0.3"); !kept {
		t.Errorf("a connection after one was closed was refused")
	}
	if open, _ := l.Open(); open != 3 {
		t.Errorf("open %d, want 3", open)
	}
}
