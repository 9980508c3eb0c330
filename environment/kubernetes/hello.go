package kubernetes

import (
	"bytes"
	"encoding/binary"
	"io"
	"sync"

	"github.com/codegirl-games/agentbox/wire"
)

// helloFilter passes the guest's stdout on, less the copies of its first
// frame (its hello) that directly follow it. A guest started with
// --await-host says hello once per go-ahead; the host sends another
// go-ahead when no hello arrived in time (the first may have been written
// before the stream's stdout was joined to the container, and lost). The
// guest writes all its hellos before it reads anything else, so copies can
// only come directly after the first; from the first other frame on the
// filter passes everything unread.
type helloFilter struct {
	r        io.Reader
	seen     chan struct{} // closed when the first byte has arrived
	seenOnce sync.Once
	pending  []byte
	first    []byte
	state    int // 0: the first frame; 1: copies of it; 2: through
	dropped  int
}

func newHelloFilter(r io.Reader) *helloFilter {
	return &helloFilter{r: r, seen: make(chan struct{})}
}

// Seen is closed when the guest's first byte has arrived.
func (h *helloFilter) Seen() <-chan struct{} { return h.seen }

func (h *helloFilter) Read(p []byte) (int, error) {
	for len(h.pending) == 0 {
		switch h.state {
		case 0:
			f, err := h.frame()
			h.first, h.pending, h.state = f, f, 1
			if err != nil {
				h.state = 2
				if len(f) == 0 {
					return 0, err
				}
			}
		case 1:
			f, err := h.frame()
			if err == nil && bytes.Equal(f, h.first) {
				h.dropped++
				continue
			}
			h.pending, h.state = f, 2
			if err != nil && len(f) == 0 {
				return 0, err
			}
		default:
			return h.r.Read(p)
		}
	}
	n := copy(p, h.pending)
	h.pending = h.pending[n:]
	return n, nil
}

// frame reads one whole frame (its length prefix and the rest). On an
// error or an oversized length it returns what it read with the error (or
// nil for an oversized length: the protocol layer reports that).
func (h *helloFilter) frame() ([]byte, error) {
	var hdr [4]byte
	n, err := io.ReadFull(firstByte{h}, hdr[:])
	if err != nil {
		return hdr[:n], err
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if size > wire.MaxFrame {
		return hdr[:], nil
	}
	buf := make([]byte, 4+int(size))
	copy(buf, hdr[:])
	n, err = io.ReadFull(h.r, buf[4:])
	return buf[:4+n], err
}

// firstByte reads from the filter's source and closes seen at the first
// byte.
type firstByte struct{ h *helloFilter }

func (f firstByte) Read(p []byte) (int, error) {
	n, err := f.h.r.Read(p)
	if n > 0 {
		f.h.seenOnce.Do(func() { close(f.h.seen) })
	}
	return n, err
}
