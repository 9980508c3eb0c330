package mcp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrMessageTooLarge ends a stdio session whose client sent a message
// (a line) above MaxLine.
var ErrMessageTooLarge = fmt.Errorf("a message on standard input exceeds %d MiB (the limit); ending the session", MaxLine>>20)

// stdioLarge is the size above which a stdio message is large: its
// bytes beyond it are read only while no other large request is being
// handled (every message a well-behaved client sends but a tool call with
// a long text is smaller).
const stdioLarge = 64 << 10

// stdioTransport is the stdio transport: newline-delimited JSON-RPC
// messages, each at most MaxLine bytes, over in and out. Unlike the SDK's
// IOTransport, which reads every message as it arrives and queues it
// (a client sending many messages of megabytes held them all), it holds
// at most one large message at a time: the bytes of the next one beyond
// stdioLarge are read once the previous large request is answered. Small
// messages (a cancellation, a ping) are read meanwhile.
type stdioTransport struct {
	in  io.Reader
	out io.Writer
	// err is the error that ended the reading (ErrMessageTooLarge, a
	// malformed message, stdin's), nil at the end of stdin.
	mu  sync.Mutex
	err error
}

func (t *stdioTransport) Connect(context.Context) (sdk.Connection, error) {
	c := &stdioConn{t: t, out: t.out, incoming: make(chan stdioMsg), closed: make(chan struct{}), large: make(chan struct{}, 1)}
	go c.readLoop(bufio.NewReaderSize(t.in, stdioLarge))
	return c, nil
}

// readErr is the error that ended the session's reading, if any.
func (t *stdioTransport) readErr() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

type stdioMsg struct {
	msg jsonrpc.Message
	err error
}

type stdioConn struct {
	t        *stdioTransport
	out      io.Writer
	incoming chan stdioMsg
	closed   chan struct{}
	once     sync.Once

	// large holds the slot of the large request being read or handled;
	// largeID is that request's ID (released when its answer is written).
	large   chan struct{}
	mu      sync.Mutex
	largeID *jsonrpc.ID
	wmu     sync.Mutex
}

// readLoop reads messages one line at a time and hands them to Read.
func (c *stdioConn) readLoop(r *bufio.Reader) {
	// One buffer for every line (DecodeMessage copies what it keeps):
	// a line of megabytes does not leave its growing copies behind.
	var buf []byte
	for {
		line, held, err := c.readLine(r, buf[:0])
		if cap(line) > cap(buf) {
			buf = line[:0]
		}
		var msg jsonrpc.Message
		if err == nil {
			msg, err = jsonrpc.DecodeMessage(line)
			if err != nil {
				err = fmt.Errorf("a malformed message on standard input: %w", err)
			}
		}
		line = nil
		call := false
		if req, ok := msg.(*jsonrpc.Request); ok && err == nil && held && req.IsCall() {
			// Held until its answer is written.
			id := req.ID
			c.mu.Lock()
			c.largeID = &id
			c.mu.Unlock()
			call = true
		}
		if err != nil && !errors.Is(err, io.EOF) {
			c.t.mu.Lock()
			c.t.err = err
			c.t.mu.Unlock()
		}
		select {
		case c.incoming <- stdioMsg{msg, err}:
		case <-c.closed:
			return
		}
		if held && !call {
			c.release() // a notification or a response: handed over
		}
		if err != nil {
			return
		}
	}
}

// readLine reads one line, without its end, of at most MaxLine bytes;
// line is where it goes; its bytes beyond stdioLarge only with the large slot (held reports
// that it took it). Empty lines are skipped.
func (c *stdioConn) readLine(r *bufio.Reader, line []byte) (_ []byte, held bool, err error) {
	for {
		frag, err := r.ReadSlice('\n')
		if len(line)+len(frag) > MaxLine {
			return nil, held, ErrMessageTooLarge
		}
		if !held && len(line)+len(frag) > stdioLarge && err == bufio.ErrBufferFull {
			select {
			case c.large <- struct{}{}:
				held = true
			case <-c.closed:
				return nil, false, io.EOF
			}
		}
		line = append(line, frag...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && len(trimEOL(line)) > 0:
			err = nil // the last line, without its newline
		case err != nil:
			return nil, held, err
		}
		if line = trimEOL(line); len(line) == 0 {
			continue
		}
		return line, held, nil
	}
}

func trimEOL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// release frees the large slot.
func (c *stdioConn) release() {
	select {
	case <-c.large:
	default:
	}
}

func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case m := <-c.incoming:
		return m.msg, m.err
	case <-c.closed:
		return nil, io.EOF
	}
}

func (c *stdioConn) Write(_ context.Context, msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	_, err = c.out.Write(append(data, '\n'))
	c.wmu.Unlock()
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		large := c.largeID != nil && *c.largeID == resp.ID
		if large {
			c.largeID = nil
		}
		c.mu.Unlock()
		if large {
			// The large request's copies (the line decoded, its
			// arguments decoded again for the tool) are garbage now:
			// collect them before the next large message is read, so
			// that a client sending many of them finds one message's
			// worth of garbage, not as many as a loaded machine's
			// collector lets pile up (CI at f5c8bdf: 16 messages of
			// 3 MiB grew the heap by 64 MiB; 35–48 MiB quiet). A few
			// milliseconds, for messages only a tool call with a text
			// of over 64 KiB makes.
			runtime.GC()
			c.release()
		}
	}
	return err
}

func (c *stdioConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

func (c *stdioConn) SessionID() string { return "" }
