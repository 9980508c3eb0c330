package guestenv

import (
	"encoding/binary"
	"runtime"
	"sync"
	"unsafe"

	"github.com/klauspost/compress/s2"
)

// decodeFrame decompresses a frame's payload (BGRX rows, s2) straight into
// the RGBA frame's buffer and converts it there: no second buffer, one
// pass less over the frame. n is the payload's decoded length
// (s2.DecodedLen), checked by the caller against the frame's size.
//
// The buffer is one a frame no longer referenced had (pixBuffers), or a
// new one; it is written in full, so neither needs clearing.
func decodeFrame(payload []byte, n int) ([]byte, error) {
	pix := pixBuffers.get(n)
	raw, err := s2.Decode(pix, payload)
	if err != nil {
		return nil, err
	}
	if len(raw) != n || unsafe.SliceData(raw) != unsafe.SliceData(pix) {
		// s2 decodes into dst when it is large enough, which it is; this
		// keeps the frame right should that change.
		copy(pix, raw)
	}
	BGRXToRGBA(pix, pix)
	return pix, nil
}

// pixBuffers keeps the pixel buffers of frames nothing references any
// more, for the next frame of the same size: an 8 MB allocation (its
// clearing, its page faults and the collections it brings) per new frame
// at 1920×1080 otherwise.
//
// A frame is kept by whoever got it (the session's last observation, the
// trace writer, the live page, an agent), for as long as they like, so a
// buffer is never taken back by the host's own reckoning: it comes back
// only through the garbage collector's finalizer on the buffer itself,
// which runs once no pointer into it is left anywhere (a frame, an image
// made on its pixels, a sub-slice). A buffer handed out is therefore never
// written while anything can still read it.
var pixBuffers = &pixPool{}

// pixPoolMax bounds the buffers kept (a few frames' worth; the rest are
// left to the collector).
const pixPoolMax = 4

type pixPool struct {
	mu   sync.Mutex
	free [][]byte
}

// get returns a buffer of n bytes (contents undefined) that comes back to
// the pool when it is garbage.
func (p *pixPool) get(n int) []byte {
	var b []byte
	p.mu.Lock()
	for i, f := range p.free {
		if len(f) == n {
			b = f
			p.drop(i)
			break
		}
	}
	p.mu.Unlock()
	if b == nil {
		if n < pixPoolMin {
			return make([]byte, n)
		}
		b = make([]byte, n)
	}
	// The finalizer is on the allocation's first byte (a buffer of this
	// size is an allocation of its own, which the first byte starts).
	runtime.SetFinalizer(&b[0], func(b0 *byte) { p.put(unsafe.Slice(b0, n)) })
	return b
}

// pixPoolMin is the least size worth keeping: smaller frames are cheap to
// allocate, and a small allocation shares its block with others (the
// finalizer needs an allocation of its own).
const pixPoolMin = 64 << 10

// put keeps a buffer that came back; when the pool is full, the one kept
// longest goes (a pool full of another screen size's buffers would
// otherwise keep this size's out for good).
func (p *pixPool) put(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) >= pixPoolMax {
		p.drop(0)
	}
	p.free = append(p.free, b)
}

// drop removes the i-th buffer kept, the others keeping their order
// (oldest first); p.mu is held.
func (p *pixPool) drop(i int) {
	last := len(p.free) - 1
	copy(p.free[i:], p.free[i+1:])
	p.free[last] = nil
	p.free = p.free[:last]
}

// BGRXToRGBA converts 32-bit BGRX pixels (X11's little-endian ZPixmap) to
// opaque RGBA; dst may be src (in place).
// Two pixels at a time, as 64-bit words: B and R swap places, G stays,
// X becomes opaque.
func BGRXToRGBA(dst, src []byte) {
	n := min(len(src), len(dst)) &^ 3
	src, dst = src[:n], dst[:n]
	w := n / 8
	if w > 0 && littleEndian && uintptr(unsafe.Pointer(unsafe.SliceData(src)))%8 == 0 && uintptr(unsafe.Pointer(unsafe.SliceData(dst)))%8 == 0 {
		// Aligned (as every buffer the allocator gives is): the rows as
		// 64-bit words, without a bounds check a word (about 2× the
		// speed of binary.LittleEndian's loads and stores).
		s := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(src))), w)
		d := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(dst))), w)
		d = d[:len(s)]
		for i, v := range s {
			d[i] = swapBGRX(v)
		}
		src, dst = src[8*w:], dst[8*w:]
	}
	for len(src) >= 8 && len(dst) >= 8 {
		binary.LittleEndian.PutUint64(dst, swapBGRX(binary.LittleEndian.Uint64(src)))
		src, dst = src[8:], dst[8:]
	}
	for len(src) >= 4 && len(dst) >= 4 {
		dst[0], dst[1], dst[2], dst[3] = src[2], src[1], src[0], 0xff
		src, dst = src[4:], dst[4:]
	}
}

// littleEndian: the machine's own word order is X11's (amd64, arm64), so
// the aligned path may read the rows as native words; elsewhere the
// byte-order-explicit loop below does it all.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// swapBGRX is two BGRX pixels (a little-endian word) as RGBA.
func swapBGRX(v uint64) uint64 {
	return (v>>16)&0x000000ff000000ff | v&0x0000ff000000ff00 | (v&0x000000ff000000ff)<<16 | 0xff000000ff000000
}
