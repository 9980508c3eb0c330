// Package wire is the host↔guest protocol: one long-lived byte stream (the
// guest's stdin and stdout) carrying length-prefixed frames.
//
// A frame is
//
//	u32 length of the rest (big endian), at most MaxFrame
//	u32 length H of the JSON header
//	H bytes of JSON header (a Header)
//	the rest: an opaque binary payload (screen pixels, file bytes, app output)
//
// The guest speaks first: a "hello" event whose header carries Magic and the
// protocol version; the host answers with a "hello" request naming its own.
// (Where the host can join the guest's stdio only once the guest runs, as a
// Kubernetes Pod's attach stream, the guest first waits for GoAhead.)
// After that the host sends requests (each with an ID) and the guest answers
// each with a response carrying the same ID; the guest also sends events
// (app output, app exit, windows) at any time.
package wire

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Protocol is the wire protocol version. Peers with different versions
// refuse to talk; the guest is the same binary as the host, so they match
// unless a user points agentbox at a foreign guest.
//
// 2: the guest answers ping from its read loop, at once, even while a
// request is being worked on (the host's liveness check relies on it).
// 3: reset (a relaunch in place) and its event.
// 4: floor (a step's primitives timed alone, for agentbox bench), and
// the act request's wait until file (an older guest would refuse it as
// an unknown condition only once a script used it).
// 5: the trusted observer: start's observe and the activity request.
// 6: the floor's damage check (FloorResponse.Damage); watch and the
// screen event.
// 7: step (an act, the settle and a screenshot in one round trip).
// 8: the network over the stream (NetSetup.Channel, the Tunnel's frames).
// 9: hold_app (a pool's app launched ahead stopped while its sandbox is
// idle, continued at the hand-over).
// 10: relaunch_floor (the least a relaunch costs, timed in the guest,
// for agentbox bench).
const Protocol = 10

// Magic starts the guest's hello, so a stream polluted by something else
// (a shell error, a wrong entrypoint) is recognised at once.
const Magic = "agentbox-guest"

// GoAhead is the byte a host sends first to a guest started with
// --await-host: a sandbox whose stdio the host can attach to only once it
// runs (a Kubernetes Pod's attach stream), where anything the guest wrote
// before would be lost. Such a guest reads this one byte before its hello.
const GoAhead byte = 'G'

// MaxFrame bounds one frame. A 3840×2160 raw frame is 33 MB.
const MaxFrame = 64 << 20

// MaxHeader bounds the JSON header of one frame.
const MaxHeader = 4 << 20

// Type is the kind of a frame.
type Type string

// Frame types.
const (
	Request  Type = "req"
	Response Type = "res"
	Event    Type = "evt"
)

// Header is the JSON part of a frame.
type Header struct {
	Type   Type            `json:"t"`
	ID     uint32          `json:"id,omitempty"`
	Method string          `json:"m,omitempty"` // request method or event name
	Body   json.RawMessage `json:"b,omitempty"`
	Error  *RemoteError    `json:"err,omitempty"` // responses only

	// Value, set by a Limit that decoded Body to judge the frame, is that
	// decoded body (a pointer): Call hands it to its out when out is a
	// pointer of the same type, instead of decoding the body again.
	Value any `json:"-"`
	// PayloadBuf, set by a Limit, is a buffer the payload is read into
	// when it is large enough (the payload is then PayloadBuf[:n]): a
	// caller that decodes the payload and drops it can reuse one buffer
	// for every frame. Otherwise a new one is allocated.
	PayloadBuf []byte `json:"-"`

	// bodyJSON says Body came from json.Marshal (Conn's Send, Reply and
	// Notify): it is JSON, and the writer need not check it again.
	bodyJSON bool
}

// Message is one decoded frame.
type Message struct {
	Header
	Payload []byte
}

// RemoteError is an error reported by the other side.
type RemoteError struct {
	Code    string `json:"code"` // see the Code constants
	Message string `json:"msg"`
}

func (e *RemoteError) Error() string { return e.Message }

// Error codes carried by RemoteError. They let the host tell errors the
// agent caused from infrastructure failures.
const (
	CodeInvalid   = "invalid"    // bad request or action; the run goes on
	CodeTimeout   = "timeout"    // a deadline passed inside the guest
	CodeNotFound  = "not_found"  // e.g. the app's command does not exist
	CodeAppExited = "app_exited" // the app exited while it was waited for
	CodeInternal  = "internal"   // anything else: the guest is broken
)

// ErrFrameTooLarge reports a frame above MaxFrame.
var ErrFrameTooLarge = errors.New("wire: frame too large")

// ErrProtocol reports bytes on the stream that are not a valid frame.
var ErrProtocol = errors.New("wire: protocol error")

// WriteFrame writes one frame. It buffers the whole frame and issues a single
// Write, so a reader never sees a torn header on a healthy stream.
func WriteFrame(w io.Writer, h *Header, payload []byte) error {
	_, err := writeFrame(w, nil, h, payload)
	return err
}

// copyPayload is the largest payload writeFrame copies behind the header
// for one Write; a larger one is written by a second Write of its own,
// which costs less than its copy (a frame of a screen is megabytes).
const copyPayload = 64 << 10

// writeFrame is WriteFrame building the frame in buf (returned for reuse):
// one Write for the frame, or two (the header, then the payload in place)
// when the payload is larger than copyPayload. The caller serialises
// writes, so a reader never sees another frame between the two.
func writeFrame(w io.Writer, buf []byte, h *Header, payload []byte) ([]byte, error) {
	buf, err := appendHeader(append(buf[:0], 0, 0, 0, 0, 0, 0, 0, 0), h)
	if err != nil {
		return buf, fmt.Errorf("wire: encode header: %w", err)
	}
	hn := len(buf) - 8
	if hn > MaxHeader {
		return buf, fmt.Errorf("%w: header is %d bytes", ErrFrameTooLarge, hn)
	}
	n := 4 + hn + len(payload)
	if n > MaxFrame {
		return buf, fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, n)
	}
	binary.BigEndian.PutUint32(buf[0:4], uint32(n))
	binary.BigEndian.PutUint32(buf[4:8], uint32(hn))
	if len(payload) <= copyPayload {
		buf = append(buf, payload...)
		_, err = w.Write(buf)
		return buf, streamErr(err)
	}
	if _, err := w.Write(buf); err != nil {
		return buf, streamErr(err)
	}
	_, err = w.Write(payload)
	return buf, streamErr(err)
}

// streamError is a write to the stream that failed: a frame may be
// half written, so the stream is over (Conn.Write ends it). Errors
// before any byte is written (a frame too large) are not.
type streamError struct{ err error }

func (e *streamError) Error() string { return e.err.Error() }
func (e *streamError) Unwrap() error { return e.err }

func streamErr(err error) error {
	if err == nil {
		return nil
	}
	return &streamError{err}
}

// ReadFrame reads one frame. io.EOF is returned only for a clean end between
// frames; a stream that ends inside a frame yields io.ErrUnexpectedEOF.
func ReadFrame(r *bufio.Reader) (*Message, error) {
	return readFrame(r, nil)
}

// errSkip, returned by a check, makes readFrame discard the frame's payload
// unread and return errSkip: the stream stays usable.
var errSkip = errors.New("wire: frame skipped")

// readFrame reads one frame. check, if not nil, sees the decoded header
// and the payload's length before a byte of the payload is read or
// allocated: an error refuses the frame (the stream is then unusable,
// since the payload was not consumed), errSkip discards the payload.
func readFrame(r *bufio.Reader, check func(h *Header, payload int) error) (*Message, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:4]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(pre[:4])
	if n > MaxFrame {
		return nil, fmt.Errorf("%w: %d bytes (stream starts %q)", ErrFrameTooLarge, n, pre[:4])
	}
	if n < 4 {
		return nil, fmt.Errorf("%w: frame of %d bytes is shorter than its header length", ErrProtocol, n)
	}
	if _, err := io.ReadFull(r, pre[4:8]); err != nil {
		return nil, noEOF(err)
	}
	hn := binary.BigEndian.Uint32(pre[4:8])
	if hn > n-4 || hn > MaxHeader {
		return nil, fmt.Errorf("%w: header length %d exceeds frame length %d", ErrProtocol, hn, n)
	}
	var hdr []byte
	peeked := int(hn) <= r.Size()
	if peeked {
		// Decoded where it lies in the reader's buffer (the decoding
		// copies what it keeps), then skipped.
		var err error
		if hdr, err = r.Peek(int(hn)); err != nil {
			return nil, noEOF(err)
		}
	} else {
		hdr = make([]byte, hn)
		if _, err := io.ReadFull(r, hdr); err != nil {
			return nil, noEOF(err)
		}
	}
	m := &Message{}
	if err := parseHeader(hdr, &m.Header); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrProtocol, err)
	}
	if peeked {
		if _, err := r.Discard(int(hn)); err != nil {
			return nil, noEOF(err)
		}
	}
	switch m.Type {
	case Request, Response, Event:
	default:
		return nil, fmt.Errorf("%w: unknown frame type %q", ErrProtocol, m.Type)
	}
	pn := int(n - 4 - hn)
	if check != nil {
		if err := check(&m.Header, pn); errors.Is(err, errSkip) {
			if _, err := r.Discard(pn); err != nil {
				return nil, noEOF(err)
			}
			return nil, errSkip
		} else if err != nil {
			return nil, fmt.Errorf("%w: %s %s: %w", ErrProtocol, m.Type, m.Method, err)
		}
	}
	if pn > 0 {
		if cap(m.PayloadBuf) >= pn {
			m.Payload = m.PayloadBuf[:pn]
		} else {
			m.Payload = make([]byte, pn)
		}
		if _, err := io.ReadFull(r, m.Payload); err != nil {
			return nil, noEOF(err)
		}
	}
	return m, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Hello is the body of the guest's first event and of the host's answer.
type Hello struct {
	Magic    string `json:"magic"`
	Protocol int    `json:"protocol"`
	Version  string `json:"version"` // agentbox version of the sender
	PID      int    `json:"pid,omitempty"`
}
