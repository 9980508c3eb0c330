package wire

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
)

// A Tunnel carries byte streams (the sandbox's network connections) over
// the guest's stream, beside its requests, for sandboxes where the host
// cannot mount its sockets into the sandbox (a Kubernetes Pod: the attach
// stream is the only way between the two). The guest opens a connection
// for each one an app makes to a port of the sandbox's loopback
// (NetSetup.Channel); the host dials the socket it names, where agentbox's
// proxy or a forward answers, and the bytes go both ways in NetChunk
// pieces until both sides have ended them.
//
// Each direction of a connection has a window of NetWindow bytes: a side
// sends no more than that before the other says it has passed them on
// (net.ack), so a connection whose reader is slow holds no more than a
// window on either side and never stalls the stream's reader, and the
// guest's requests keep flowing beside it.
//
// Frames (the guest sends them as events, the host as requests without an
// ID, like cancel): net.open (guest → host), net.data with the bytes as
// payload, net.ack, net.eof (the sender's side half-closed), net.reset
// (the connection is gone).
type Tunnel struct {
	send func(method string, s NetStream, payload []byte) error
	dial func(socket string) (net.Conn, error) // nil on the guest's side
	max  int

	mu      sync.Mutex
	streams map[uint32]*tstream
	next    uint32
	closed  bool
}

// The tunnel's frames.
const (
	NetOpen  = "net.open"
	NetData  = "net.data"
	NetAck   = "net.ack"
	NetEOF   = "net.eof"
	NetReset = "net.reset"
)

// IsNet reports whether a frame's method is one of the tunnel's.
func IsNet(method string) bool { return strings.HasPrefix(method, "net.") }

// NetChunk bounds one net.data frame's payload; NetWindow is what one
// direction of a connection may have in flight.
const (
	NetChunk  = 32 << 10
	NetWindow = 256 << 10
)

// NetStream is the body of the tunnel's frames.
type NetStream struct {
	Conn   uint32 `json:"c"`
	Socket string `json:"s,omitempty"` // net.open: the socket the connection is for
	N      int    `json:"n,omitempty"` // net.ack: the bytes passed on
}

// NewTunnel makes a tunnel that sends its frames with send. dial, on the
// host, connects a connection the guest opened to the socket it names
// (refusing names it does not know); the guest passes nil. max bounds the
// connections open at once; more are reset.
func NewTunnel(send func(method string, s NetStream, payload []byte) error, dial func(socket string) (net.Conn, error), max int) *Tunnel {
	return &Tunnel{send: send, dial: dial, max: max, streams: map[uint32]*tstream{}}
}

// tstream is one connection.
type tstream struct {
	t    *Tunnel
	id   uint32
	mu   sync.Mutex
	cond *sync.Cond
	c    net.Conn // the local end; nil until dialled
	in   [][]byte // received, not yet written to c
	inN  int
	eof  bool // the peer sends no more
	// credit is what may still be sent before an ack.
	credit int
	dead   bool
	left   int // directions still running (up and down), from run on
	done   chan struct{}
}

func (t *Tunnel) newStream(id uint32, c net.Conn) *tstream {
	s := &tstream{t: t, id: id, c: c, credit: NetWindow, done: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// Join carries c as a connection to socket until both of its directions
// have ended (or the tunnel closes), then closes c. The guest calls it
// for each connection an app makes.
func (t *Tunnel) Join(c net.Conn, socket string) {
	t.mu.Lock()
	if t.closed || len(t.streams) >= t.max {
		t.mu.Unlock()
		c.Close()
		return
	}
	t.next++
	s := t.newStream(t.next, c)
	t.streams[s.id] = s
	t.mu.Unlock()
	if err := t.send(NetOpen, NetStream{Conn: s.id, Socket: socket}, nil); err != nil {
		s.kill(false)
		<-s.done
		return
	}
	s.run()
	<-s.done
}

// Handle takes one of the tunnel's frames from the peer; it reports false
// for a frame that is not one. It does not block: it runs on the stream's
// read loop.
func (t *Tunnel) Handle(method string, body json.RawMessage, payload []byte) bool {
	if !IsNet(method) {
		return false
	}
	var ns NetStream
	if json.Unmarshal(body, &ns) != nil {
		return true
	}
	if method == NetOpen {
		t.accept(ns)
		return true
	}
	t.mu.Lock()
	s := t.streams[ns.Conn]
	t.mu.Unlock()
	if s == nil {
		return true // reset meanwhile, or never known
	}
	switch method {
	case NetData:
		s.mu.Lock()
		if s.dead {
			s.mu.Unlock()
			return true
		}
		if len(payload) > NetChunk || s.inN+len(payload) > NetWindow {
			s.mu.Unlock()
			go s.kill(true) // past the window: the peer broke the rules
			return true
		}
		if len(payload) > 0 {
			s.in = append(s.in, payload)
			s.inN += len(payload)
			s.cond.Broadcast()
		}
		s.mu.Unlock()
	case NetAck:
		s.mu.Lock()
		s.credit += ns.N
		bad := ns.N <= 0 || s.credit > NetWindow
		s.cond.Broadcast()
		s.mu.Unlock()
		if bad {
			go s.kill(true)
		}
	case NetEOF:
		s.mu.Lock()
		s.eof = true
		s.cond.Broadcast()
		s.mu.Unlock()
	case NetReset:
		go s.kill(false)
	}
	return true
}

// accept is the host's side of net.open: the socket is dialled in the
// background, what arrives meanwhile waits in the window.
func (t *Tunnel) accept(ns NetStream) {
	t.mu.Lock()
	if t.dial == nil || t.closed || t.streams[ns.Conn] != nil || len(t.streams) >= t.max {
		t.mu.Unlock()
		go func() { _ = t.send(NetReset, NetStream{Conn: ns.Conn}, nil) }()
		return
	}
	s := t.newStream(ns.Conn, nil)
	t.streams[s.id] = s
	t.mu.Unlock()
	go func() {
		c, err := t.dial(ns.Socket)
		if err != nil {
			s.kill(true)
			return
		}
		s.mu.Lock()
		if s.dead {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.c = c
		s.mu.Unlock()
		s.run()
	}()
}

// run starts both directions of a connection whose local end is there.
func (s *tstream) run() {
	s.mu.Lock()
	s.left = 2
	s.mu.Unlock()
	go s.up()
	go s.down()
}

// up sends what the local end reads, within the credit.
func (s *tstream) up() {
	defer s.finish()
	buf := make([]byte, NetChunk)
	for {
		s.mu.Lock()
		for s.credit <= 0 && !s.dead {
			s.cond.Wait()
		}
		n, dead := min(s.credit, NetChunk), s.dead
		s.mu.Unlock()
		if dead {
			return
		}
		k, err := s.c.Read(buf[:n])
		if k > 0 {
			s.mu.Lock()
			s.credit -= k
			s.mu.Unlock()
			if s.t.send(NetData, NetStream{Conn: s.id}, buf[:k]) != nil {
				s.kill(false)
				return
			}
		}
		if errors.Is(err, io.EOF) {
			if s.t.send(NetEOF, NetStream{Conn: s.id}, nil) != nil {
				s.kill(false)
			}
			return
		}
		if err != nil {
			s.kill(true)
			return
		}
	}
}

// down writes what arrived to the local end and acknowledges it; after
// the peer's end it half-closes the local end.
func (s *tstream) down() {
	defer s.finish()
	for {
		s.mu.Lock()
		for len(s.in) == 0 && !s.eof && !s.dead {
			s.cond.Wait()
		}
		if s.dead {
			s.mu.Unlock()
			return
		}
		if len(s.in) == 0 { // the peer's end, all written
			s.mu.Unlock()
			if cw, ok := s.c.(interface{ CloseWrite() error }); !ok || cw.CloseWrite() != nil {
				s.kill(true)
			}
			return
		}
		b := s.in[0]
		s.in[0] = nil
		s.in = s.in[1:]
		s.mu.Unlock()
		if _, err := s.c.Write(b); err != nil {
			s.kill(true)
			return
		}
		s.mu.Lock()
		s.inN -= len(b)
		s.mu.Unlock()
		if s.t.send(NetAck, NetStream{Conn: s.id, N: len(b)}, nil) != nil {
			s.kill(false)
			return
		}
	}
}

// finish ends one direction; after both, the connection is closed and
// forgotten.
func (s *tstream) finish() {
	s.mu.Lock()
	s.left--
	last := s.left == 0
	s.mu.Unlock()
	if last {
		s.end()
	}
}

func (s *tstream) end() {
	s.mu.Lock()
	s.dead = true
	c := s.c
	select {
	case <-s.done:
		s.mu.Unlock()
		return
	default:
	}
	close(s.done)
	s.cond.Broadcast()
	s.mu.Unlock()
	if c != nil {
		c.Close()
	}
	s.t.mu.Lock()
	if s.t.streams[s.id] == s {
		delete(s.t.streams, s.id)
	}
	s.t.mu.Unlock()
}

// kill ends the connection at once, telling the peer when reset.
func (s *tstream) kill(reset bool) {
	s.mu.Lock()
	was := s.dead
	s.dead = true
	s.cond.Broadcast()
	c := s.c
	running := c != nil && s.left > 0
	s.mu.Unlock()
	if was {
		return
	}
	if reset {
		_ = s.t.send(NetReset, NetStream{Conn: s.id}, nil)
	}
	if c != nil {
		c.Close() // unblocks up's read and down's write
	}
	if !running {
		s.end() // no goroutines to finish it
	}
}

// Close ends every connection (the stream is gone or the sandbox is
// closing); later ones are refused.
func (t *Tunnel) Close() {
	t.mu.Lock()
	t.closed = true
	var all []*tstream
	for _, s := range t.streams {
		all = append(all, s)
	}
	t.mu.Unlock()
	for _, s := range all {
		s.kill(false)
	}
}

// Open is the connections open now (for tests).
func (t *Tunnel) Open() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.streams)
}
