// Package connlimit bounds the connections a listener holds open: in all,
// and from one source address. A connection beyond either bound is closed
// as soon as it is accepted, before anything is read from it, so a flood
// of connections (idle ones, slowloris headers, unfinished bodies) costs
// the process at most the bounds' worth of memory, and a client at
// another address is still served while one address floods.
package connlimit

import (
	"net"
	"sync"
)

// Listener is a net.Listener whose open connections are bounded.
type Listener struct {
	net.Listener
	max, perHost int

	mu     sync.Mutex
	open   int
	byHost map[string]int
	cut    int64 // connections refused so far
}

// New bounds ln: at most max connections open at once (≤ 0: no bound),
// at most perHost of them from one source address (≤ 0: no bound).
func New(ln net.Listener, max, perHost int) *Listener {
	return &Listener{Listener: ln, max: max, perHost: perHost, byHost: map[string]int{}}
}

// Accept waits for a connection within the bounds; those beyond them are
// closed at once.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := source(c.RemoteAddr())
		l.mu.Lock()
		if (l.max > 0 && l.open >= l.max) || (l.perHost > 0 && l.byHost[host] >= l.perHost) {
			l.cut++
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.open++
		l.byHost[host]++
		l.mu.Unlock()
		return &conn{Conn: c, l: l, host: host}, nil
	}
}

// Open is the number of connections open now; Refused the number closed
// at once so far for being beyond a bound.
func (l *Listener) Open() (open int, refused int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, l.cut
}

func (l *Listener) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.byHost[host]--; l.byHost[host] <= 0 {
		delete(l.byHost, host)
	}
}

// source is an address's IP (the whole address when it has no port).
func source(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	s := a.String()
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return s
}

// conn gives its place back when it is closed (once, however often Close
// is called; a hijacked connection when its new owner closes it).
type conn struct {
	net.Conn
	l    *Listener
	host string
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.host) })
	return err
}
