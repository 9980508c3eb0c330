package wire

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is returned by calls on a connection whose stream has ended.
var ErrClosed = errors.New("wire: connection closed")

// Handler receives the frames a Conn does not route to a pending call:
// events on the host, requests on the guest. It runs on the read loop, so it
// must not block for long; the guest queues requests to a worker.
type Handler func(m *Message)

// Conn is one end of the stream. Writes are serialised; reads happen in
// Serve.
type Conn struct {
	r *bufio.Reader
	w io.Writer

	wmu  sync.Mutex
	wbuf []byte // the frame being written, reused under wmu

	limit Limit // set before Serve

	mu      sync.Mutex
	nextID  uint32
	pending map[uint32]pendingCall
	err     error // why the stream ended; set once
	done    chan struct{}

	// lastRead is when bytes last arrived (unix nanoseconds).
	lastRead atomic.Int64
}

type pendingCall struct {
	method string
	ch     chan *Message // buffered
}

// A Limit bounds what a Conn accepts from its peer. It sees each incoming
// frame's header (with the JSON body still undecoded in Body) and the
// length of its payload before a byte of the payload is read or allocated,
// and refuses the frame by returning an error: the stream then ends with
// ErrProtocol. Responses reach the limit only when they answer a pending
// call and name that call's method (others are discarded unread), so the
// limit can trust a response's Method.
type Limit func(h *Header, payload int) error

// SetLimit installs l; call it before ReadFrame and Serve.
func (c *Conn) SetLimit(l Limit) { c.limit = l }

// NewConn wraps a stream. Call Serve (usually in a goroutine) to read.
func NewConn(r io.Reader, w io.Writer) *Conn {
	c := &Conn{
		w:       w,
		pending: make(map[uint32]pendingCall),
		done:    make(chan struct{}),
	}
	c.r = bufio.NewReaderSize(activityReader{r, &c.lastRead}, 256<<10)
	c.lastRead.Store(time.Now().UnixNano())
	return c
}

// activityReader notes the time of every read that returns bytes, so a
// frame that takes long to arrive still counts as the peer speaking.
type activityReader struct {
	r    io.Reader
	last *atomic.Int64
}

func (a activityReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.last.Store(time.Now().UnixNano())
	}
	return n, err
}

// LastRead is when bytes last arrived from the peer (or when the Conn was
// made, before any did). A frame that takes long to arrive counts as the
// peer speaking all along.
func (c *Conn) LastRead() time.Time { return time.Unix(0, c.lastRead.Load()) }

// Abort ends the connection from this side: every pending call and every
// later one fails with ErrClosed wrapping why. It does not close the
// underlying stream; the caller does that.
func (c *Conn) Abort(why error) { c.close(why) }

// ReadFrame reads one frame directly, under the limit; use it only before
// Serve, for the handshake.
func (c *Conn) ReadFrame() (*Message, error) {
	m, err := readFrame(c.r, c.admit)
	if errors.Is(err, errSkip) {
		return nil, fmt.Errorf("%w: an answer to no request", ErrProtocol)
	}
	return m, err
}

// admit decides, from its header, whether an incoming frame is read:
// responses must answer a pending call (others, such as late answers to
// cancelled calls, are skipped without reading their payload) and name its
// method; then the limit has its say.
func (c *Conn) admit(h *Header, payload int) error {
	if h.Type == Response {
		c.mu.Lock()
		p, ok := c.pending[h.ID]
		c.mu.Unlock()
		if !ok {
			return errSkip
		}
		if h.Method != p.method {
			return fmt.Errorf("response to request %d (%s) is for %q", h.ID, p.method, h.Method)
		}
	}
	if c.limit != nil {
		return c.limit(h, payload)
	}
	return nil
}

// Serve reads frames until the stream ends, delivering responses to their
// callers and everything else to h. It returns the reason the stream ended
// (nil for a clean EOF) and fails every pending call.
func (c *Conn) Serve(h Handler) error {
	var err error
	for {
		var m *Message
		m, err = readFrame(c.r, c.admit)
		if errors.Is(err, errSkip) {
			continue
		}
		if err != nil {
			break
		}
		if m.Type == Response {
			c.mu.Lock()
			p, ok := c.pending[m.ID]
			delete(c.pending, m.ID)
			c.mu.Unlock()
			if ok {
				p.ch <- m // buffered
			}
			continue
		}
		if h != nil {
			h(m)
		}
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	c.close(err)
	return err
}

func (c *Conn) close(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.done:
		return
	default:
	}
	if err == nil {
		err = ErrClosed
	} else {
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	c.err = err
	close(c.done)
	for id, p := range c.pending {
		close(p.ch)
		delete(c.pending, id)
	}
}

// Done is closed when the stream has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the stream ended, or nil while it is open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Write sends one frame.
func (c *Conn) Write(h *Header, payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var err error
	c.wbuf, err = writeFrame(c.w, c.wbuf, h, payload)
	if cap(c.wbuf) > maxKeptWriteBuf {
		c.wbuf = nil // a rare large frame's buffer is not kept
	}
	if err != nil {
		err = fmt.Errorf("wire: write %s %s: %w", h.Type, h.Method, err)
		var se *streamError
		if errors.As(err, &se) {
			// A frame may be half written: the stream is over, and a
			// call waiting on it says so (ErrClosed) rather than the
			// writer's error alone (a backend ending its stream — a
			// Pod's attach cancelled — fails the write with
			// context.Canceled before the read side sees the end).
			c.close(err)
		}
		return err
	}
	return nil
}

// maxKeptWriteBuf bounds the write buffer a Conn keeps between frames.
const maxKeptWriteBuf = 256 << 10

// Call sends a request and waits for its response. The response body is
// decoded into out (if non-nil); its payload is returned. A RemoteError from
// the peer is returned as is. If ctx ends first, Call returns ctx's error and
// the late response is dropped.
func (c *Conn) Call(ctx context.Context, method string, in, out any, payload []byte) ([]byte, error) {
	p, err := c.Send(method, in, payload)
	if err != nil {
		return nil, err
	}
	return p.Wait(ctx, out)
}

// Pending is a request sent whose response has not been waited for
// (Send). Requests reach the peer in the order they were sent: a guest
// that answers them in turn can be sent several at once (a file's chunks)
// and its answers waited for after.
type Pending struct {
	c      *Conn
	id     uint32
	method string
	ch     chan *Message
}

// Send writes a request and returns at once: its response is Wait's. A
// Pending that is never waited for must be dropped with Forget.
func (c *Conn) Send(method string, in any, payload []byte) (*Pending, error) {
	body, err := marshal(in)
	if err != nil {
		return nil, fmt.Errorf("wire: %s: %w", method, err)
	}
	ch := make(chan *Message, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = pendingCall{method: method, ch: ch}
	c.mu.Unlock()

	if err := c.Write(&Header{Type: Request, ID: id, Method: method, Body: body, bodyJSON: true}, payload); err != nil {
		c.forget(id)
		if cerr := c.Err(); cerr != nil {
			// The stream was ended under the write (Abort): say why.
			return nil, fmt.Errorf("wire: %s: %w", method, cerr)
		}
		return nil, err
	}
	return &Pending{c: c, id: id, method: method, ch: ch}, nil
}

// Wait waits for the response to p, as Call does. If ctx ends first, it
// returns ctx's error, tells the peer to stop working on the request and
// drops the late response.
func (p *Pending) Wait(ctx context.Context, out any) ([]byte, error) {
	c, method := p.c, p.method
	select {
	case m, ok := <-p.ch:
		if !ok {
			return nil, fmt.Errorf("wire: %s: %w", method, c.Err())
		}
		if m.Error != nil {
			return nil, m.Error
		}
		if out != nil && m.Value != nil && reflect.TypeOf(out) == reflect.TypeOf(m.Value) {
			// The limit decoded the body already (Header.Value).
			reflect.ValueOf(out).Elem().Set(reflect.ValueOf(m.Value).Elem())
		} else if out != nil && len(m.Body) > 0 {
			if err := json.Unmarshal(m.Body, out); err != nil {
				return nil, fmt.Errorf("wire: %s: decode response: %w", method, err)
			}
		}
		return m.Payload, nil
	case <-ctx.Done():
		p.Forget()
		return nil, fmt.Errorf("wire: %s: %w", method, ctx.Err())
	}
}

// Forget drops p's response and tells the peer to stop working on it.
func (p *Pending) Forget() {
	p.c.forget(p.id)
	_ = p.c.Write(&Header{Type: Request, Method: MethodCancel, Body: cancelBody(p.id)}, nil)
}

// MethodCancel asks the peer to abandon request CancelRequest.ID. It has no
// ID of its own and gets no response.
const MethodCancel = "cancel"

// CancelRequest is the body of a cancel request.
type CancelRequest struct {
	ID uint32 `json:"id"`
}

func cancelBody(id uint32) json.RawMessage {
	b, _ := json.Marshal(CancelRequest{ID: id})
	return b
}

func (c *Conn) forget(id uint32) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// Reply answers request id. A non-nil err is sent as a RemoteError (its Code
// is CodeInternal unless err is or wraps a *RemoteError).
func (c *Conn) Reply(id uint32, method string, out any, payload []byte, err error) error {
	h := &Header{Type: Response, ID: id, Method: method}
	if err != nil {
		var re *RemoteError
		if !errors.As(err, &re) {
			re = &RemoteError{Code: CodeInternal, Message: err.Error()}
		} else if re.Message != err.Error() {
			re = &RemoteError{Code: re.Code, Message: err.Error()}
		}
		h.Error = re
		payload = nil
	} else {
		body, merr := marshal(out)
		if merr != nil {
			h.Error = &RemoteError{Code: CodeInternal, Message: merr.Error()}
		}
		h.Body, h.bodyJSON = body, true
	}
	return c.Write(h, payload)
}

// Notify sends an event.
func (c *Conn) Notify(event string, body any, payload []byte) error {
	b, err := marshal(body)
	if err != nil {
		return fmt.Errorf("wire: %s: %w", event, err)
	}
	return c.Write(&Header{Type: Event, Method: event, Body: b, bodyJSON: true}, payload)
}

// marshal is json.Marshal, whose output is JSON (it checks what a
// json.Marshaler returns): a frame built with it need not check its body
// again (Header.bodyJSON). A step's answer is written without reflection
// (appendStep), the same bytes.
func marshal(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	if r, ok := v.(StepResponse); ok {
		n := 256
		if r.Shot != nil && r.Shot.State != nil {
			n += 128 * len(r.Shot.State.Windows)
		}
		if b, ok := appendStep(make([]byte, 0, n), &r); ok {
			return b, nil // json.Marshal's bytes (stepjson.go)
		}
	}
	return json.Marshal(v)
}

// Errorf builds a RemoteError with a code.
func Errorf(code, format string, args ...any) error {
	return &RemoteError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// IsCode reports whether err carries a RemoteError with the given code.
func IsCode(err error, code string) bool {
	var re *RemoteError
	return errors.As(err, &re) && re.Code == code
}
