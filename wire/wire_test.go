package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

func TestFrameRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		h       Header
		payload []byte
	}{
		{"event no payload", Header{Type: Event, Method: EventHello, Body: []byte(`{"magic":"agentbox-guest"}`)}, nil},
		{"request with payload", Header{Type: Request, ID: 7, Method: MethodWriteFile}, []byte("hello\x00world")},
		{"response error", Header{Type: Response, ID: 9, Error: &RemoteError{Code: CodeInvalid, Message: "bad"}}, nil},
		{"large payload", Header{Type: Response, ID: 1}, bytes.Repeat([]byte{0xAB}, 3<<20)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteFrame(&buf, &tt.h, tt.payload); err != nil {
				t.Fatal(err)
			}
			m, err := ReadFrame(bufio.NewReader(&buf))
			if err != nil {
				t.Fatal(err)
			}
			if m.Type != tt.h.Type || m.ID != tt.h.ID || m.Method != tt.h.Method {
				t.Errorf("header = %+v, want %+v", m.Header, tt.h)
			}
			if !bytes.Equal(m.Payload, tt.payload) {
				t.Errorf("payload differs: %d bytes, want %d", len(m.Payload), len(tt.payload))
			}
			if (m.Error == nil) != (tt.h.Error == nil) {
				t.Errorf("error = %v, want %v", m.Error, tt.h.Error)
			}
			if _, err := ReadFrame(bufio.NewReader(&buf)); err != io.EOF {
				t.Errorf("after last frame: err = %v, want io.EOF", err)
			}
		})
	}
}

func TestReadFrameRejects(t *testing.T) {
	frame := func(n, hn uint32, rest string) []byte {
		b := make([]byte, 8)
		binary.BigEndian.PutUint32(b, n)
		binary.BigEndian.PutUint32(b[4:], hn)
		return append(b, rest...)
	}
	var good bytes.Buffer
	if err := WriteFrame(&good, &Header{Type: Event, Method: "x"}, []byte("payload")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"torn inside frame", good.Bytes()[:good.Len()-3], io.ErrUnexpectedEOF},
		{"torn inside prefix", good.Bytes()[:6], io.ErrUnexpectedEOF},
		{"too large", frame(MaxFrame+1, 2, "{}"), ErrFrameTooLarge},
		{"shell noise", []byte("exec /opt/agentbox: no such file or directory\n"), ErrFrameTooLarge},
		{"header longer than frame", frame(6, 5, "{}"), ErrProtocol},
		{"bad json", frame(6, 2, "{["), ErrProtocol},
		{"unknown type", frame(4+10, 10, `{"t":"zz"}`), ErrProtocol},
		{"short frame", frame(2, 0, ""), ErrProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadFrame(bufio.NewReader(bytes.NewReader(tt.in)))
			if !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// pipePair returns two connected Conns.
func pipePair(t *testing.T) (host, guest *Conn) {
	t.Helper()
	hr, gw := io.Pipe()
	gr, hw := io.Pipe()
	host = NewConn(hr, hw)
	guest = NewConn(gr, gw)
	t.Cleanup(func() { hw.Close(); gw.Close() })
	return host, guest
}

func TestCallReply(t *testing.T) {
	host, guest := pipePair(t)
	events := make(chan *Message, 1)
	go host.Serve(func(m *Message) { events <- m })
	go guest.Serve(func(m *Message) {
		switch m.Method {
		case "echo":
			var in map[string]string
			_ = jsonUnmarshal(m.Body, &in)
			_ = guest.Notify("seen", in, nil)
			_ = guest.Reply(m.ID, m.Method, in, append([]byte("p:"), m.Payload...), nil)
		case "fail":
			_ = guest.Reply(m.ID, m.Method, nil, nil, Errorf(CodeInvalid, "no such %s", "thing"))
		}
	})
	ctx := t.Context()
	var out map[string]string
	p, err := host.Call(ctx, "echo", map[string]string{"a": "b"}, &out, []byte("xyz"))
	if err != nil {
		t.Fatal(err)
	}
	if out["a"] != "b" || string(p) != "p:xyz" {
		t.Errorf("got %v %q", out, p)
	}
	select {
	case m := <-events:
		if m.Method != "seen" {
			t.Errorf("event = %q", m.Method)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no event")
	}
	_, err = host.Call(ctx, "fail", nil, nil, nil)
	if !IsCode(err, CodeInvalid) || !strings.Contains(err.Error(), "no such thing") {
		t.Errorf("err = %v, want invalid remote error", err)
	}
}

func TestCallContextAndClose(t *testing.T) {
	host, guest := pipePair(t)
	go host.Serve(nil)
	reqs := make(chan *Message, 4)
	go guest.Serve(func(m *Message) { reqs <- m }) // never replies

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := host.Call(ctx, "slow", nil, nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline", err)
	}
	<-reqs

	errc := make(chan error, 1)
	go func() {
		_, err := host.Call(context.Background(), "slow", nil, nil, nil)
		errc <- err
	}()
	<-reqs
	guest.w.(*io.PipeWriter).Close() // the guest dies
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("err = %v, want ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("pending call not failed when the stream ended")
	}
	if _, err := host.Call(t.Context(), "after", nil, nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("call after close: err = %v", err)
	}
}

func FuzzReadFrame(f *testing.F) {
	var b bytes.Buffer
	_ = WriteFrame(&b, &Header{Type: Request, ID: 1, Method: "act", Body: []byte(`{"action":{"action":"key","keys":"a"}}`)}, []byte("x"))
	f.Add(b.Bytes())
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 0})
	f.Add([]byte("\x00\x00\x00\x0e\x00\x00\x00\x0a{\"t\":\"evt\"}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		for i := 0; i < 8; i++ {
			m, err := ReadFrame(r)
			if err != nil {
				return
			}
			var out bytes.Buffer
			if err := WriteFrame(&out, &m.Header, m.Payload); err != nil {
				t.Fatalf("re-encode: %v", err)
			}
		}
	})
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// TestConnLimit: a Conn reads a frame's payload only after the limit and
// its own checks accept the header: answers to calls never made are
// skipped unread (the limit never sees them), an answer naming another
// method and a frame the limit refuses end the stream with ErrProtocol.
func TestConnLimit(t *testing.T) {
	frame := func(h *Header, payload []byte) []byte {
		var b bytes.Buffer
		if err := WriteFrame(&b, h, payload); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	answer := frame(&Header{Type: Response, ID: 1, Method: "get"}, []byte("ok"))
	tests := []struct {
		name   string
		stream []byte // what the peer sends once call 1 ("get") arrives
		want   string // the call's error; "" for success
		seen   string // the payload lengths the limit saw
	}{
		{"answer", answer, "", "[2]"},
		{"late answer skipped unread", append(frame(&Header{Type: Response, ID: 9, Method: "get"}, bytes.Repeat([]byte{1}, 1<<20)), answer...), "", "[2]"},
		{"answer for another method", frame(&Header{Type: Response, ID: 1, Method: "put"}, []byte("ok")), `protocol error: res put: response to request 1 (get) is for "put"`, "[]"},
		{"refused by the limit", frame(&Header{Type: Event, Method: "big"}, make([]byte, 100)), "protocol error: evt big: 100 bytes is too many", "[100]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hr, pw := io.Pipe()
			pr, hw := io.Pipe()
			defer pw.Close()
			defer hw.Close()
			c := NewConn(hr, hw)
			var seen []int
			c.SetLimit(func(h *Header, payload int) error {
				seen = append(seen, payload)
				if payload > 10 {
					return fmt.Errorf("%d bytes is too many", payload)
				}
				return nil
			})
			served := make(chan struct{})
			go func() { c.Serve(nil); close(served) }()
			go func() {
				if _, err := ReadFrame(bufio.NewReader(pr)); err == nil {
					pw.Write(tt.stream)
				}
			}()
			p, err := c.Call(t.Context(), "get", nil, nil, nil)
			switch {
			case tt.want == "" && (err != nil || string(p) != "ok"):
				t.Errorf("call = %q, %v", p, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrProtocol)):
				t.Errorf("err = %v, want %q", err, tt.want)
			}
			pw.Close()
			<-served
			if got := fmt.Sprint(seen); got != tt.seen {
				t.Errorf("the limit saw payloads %s, want %s", got, tt.seen)
			}
		})
	}
}

// failingWriter fails every write, as a backend's stream does once the
// backend has ended it (a Pod's attach cancelled).
type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

// TestWriteErrorEndsStream: a request that could not be written ends the
// stream (a frame may be half written): the call fails with ErrClosed
// wrapping the writer's error, and the Conn is done. A frame refused
// before a byte is written (too large) leaves the stream open.
func TestWriteErrorEndsStream(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	c := NewConn(pr, failingWriter{context.Canceled})
	go c.Serve(nil)
	_, err := c.Call(t.Context(), "screenshot", nil, nil, nil)
	if !errors.Is(err, ErrClosed) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Call = %v, want ErrClosed wrapping context.Canceled", err)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("the stream is not done after a failed write")
	}

	ok := NewConn(pr, io.Discard)
	if _, err := ok.Send("write_file", nil, make([]byte, MaxFrame)); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("Send of a frame too large = %v", err)
	}
	if ok.Err() != nil {
		t.Fatalf("a frame refused before writing ended the stream: %v", ok.Err())
	}
}

// TestServePayloadsOwned: without a Limit's PayloadBuf, each message's
// payload is a buffer of its own that no later read reuses; the guest
// keeps staged files' payloads as they came (guest.stagedApp.add).
func TestServePayloadsOwned(t *testing.T) {
	host, guest := pipePair(t)
	got := make(chan []byte, 3)
	go guest.Serve(func(m *Message) { got <- m.Payload })
	want := [][]byte{bytes.Repeat([]byte{1}, 70<<10), bytes.Repeat([]byte{2}, 70<<10), []byte("three")}
	for _, p := range want {
		if _, err := host.Send(MethodWriteFile, nil, p); err != nil {
			t.Fatal(err)
		}
	}
	var kept [][]byte
	for range want {
		select {
		case p := <-got:
			kept = append(kept, p)
		case <-time.After(5 * time.Second):
			t.Fatal("a message did not arrive")
		}
	}
	for i, p := range kept {
		if !bytes.Equal(p, want[i]) {
			t.Errorf("payload %d changed after later reads (%d bytes, first %v)", i, len(p), p[:min(len(p), 4)])
		}
	}
}
