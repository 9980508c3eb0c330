package kubernetes

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

func frame(body string) []byte {
	b := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(b, uint32(len(body)))
	copy(b[4:], body)
	return b
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestHelloFilter: copies of the first frame that directly follow it are
// dropped; everything else passes unchanged, byte for byte, also when the
// source hands it out one byte at a time; an error ends the stream after
// what was read.
func TestHelloFilter(t *testing.T) {
	hello, resp, ev := frame("hello"), frame("response"), frame("event")
	broken := errors.New("stream broke")
	for _, c := range []struct {
		name    string
		in      []byte
		err     error
		want    []byte
		dropped int
	}{
		{"one hello", cat(hello, resp, ev), nil, cat(hello, resp, ev), 0},
		{"two copies", cat(hello, hello, hello, resp), nil, cat(hello, resp), 2},
		{"a later hello passes", cat(hello, resp, hello), nil, cat(hello, resp, hello), 0},
		{"only hellos", cat(hello, hello), nil, hello, 1},
		{"nothing", nil, nil, nil, 0},
		{"cut in the first frame", hello[:6], nil, hello[:6], 0},
		{"cut after the hello", cat(hello, resp[:3]), nil, cat(hello, resp[:3]), 0},
		{"broken after a copy", cat(hello, hello, resp[:2]), broken, cat(hello, resp[:2]), 1},
		{"oversized length", cat(hello, []byte{0xff, 0xff, 0xff, 0xff, 1, 2}), nil, cat(hello, []byte{0xff, 0xff, 0xff, 0xff, 1, 2}), 0},
	} {
		for _, oneByte := range []bool{false, true} {
			var src io.Reader = bytes.NewReader(c.in)
			if c.err != nil {
				src = io.MultiReader(src, iotest.ErrReader(c.err))
			}
			if oneByte {
				src = iotest.OneByteReader(src)
			}
			f := newHelloFilter(src)
			got, err := io.ReadAll(f)
			wantErr := c.err
			if !bytes.Equal(got, c.want) || !errors.Is(err, wantErr) && !(wantErr == nil && err == nil) {
				t.Errorf("%s (one byte at a time: %v): got %q, %v; want %q, %v", c.name, oneByte, got, err, c.want, wantErr)
			}
			if f.dropped != c.dropped {
				t.Errorf("%s: dropped %d, want %d", c.name, f.dropped, c.dropped)
			}
			select {
			case <-f.Seen():
				if len(c.in) == 0 {
					t.Errorf("%s: seen closed without a byte", c.name)
				}
			default:
				if len(c.in) > 0 {
					t.Errorf("%s: seen not closed after %d bytes", c.name, len(c.in))
				}
			}
		}
	}
}
