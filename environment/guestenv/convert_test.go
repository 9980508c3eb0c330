package guestenv

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/klauspost/compress/s2"
)

// bgrxToRGBABytes is the conversion a byte at a time: what a frame's
// pixels are by definition.
func bgrxToRGBABytes(src []byte) []byte {
	want := make([]byte, len(src)&^3)
	for i := 0; i+3 < len(src); i += 4 {
		want[i], want[i+1], want[i+2], want[i+3] = src[i+2], src[i+1], src[i], 0xff
	}
	return want
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return b
}

// TestBGRXToRGBA holds the word-at-a-time conversion to the byte one, at
// lengths with and without an odd pixel at the end, aligned and not, into
// another buffer and in place.
func TestBGRXToRGBA(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 4, 8, 12, 4 * 641, 4 * 640 * 3} {
		for _, off := range []int{0, 1, 4} { // off 1 and 4: not 8-aligned
			src := randomBytes(r, n+off)[off:]
			want := bgrxToRGBABytes(src)
			got := make([]byte, n+off)[off:]
			BGRXToRGBA(got, src)
			if !bytes.Equal(got, want) {
				t.Fatalf("%d bytes at offset %d: got %v, want %v", n, off, got[:min(n, 16)], want[:min(n, 16)])
			}
			BGRXToRGBA(src, src)
			if !bytes.Equal(src, want) {
				t.Fatalf("%d bytes at offset %d, in place: got %v, want %v", n, off, src[:min(n, 16)], want[:min(n, 16)])
			}
		}
	}
}

// TestDecodeFrame holds a frame decoded as the host now does (into a
// buffer a dropped frame had, converted in place) byte for byte to the
// previous path (decompressed into a buffer of its own, converted a byte
// at a time into a new one), frame after frame, the buffers dirty.
func TestDecodeFrame(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, s := range [][2]int{{640, 480}, {1920, 1080}, {3, 1}} {
		n := 4 * s[0] * s[1]
		for k := range 6 {
			src := randomBytes(r, n)
			// flat areas too, so the payload has back-references
			for i := 0; i < n/2; i++ {
				src[i] = byte(k)
			}
			payload := s2.Encode(nil, src)
			raw, err := s2.Decode(nil, payload)
			if err != nil {
				t.Fatal(err)
			}
			want := bgrxToRGBABytes(raw)
			got, err := decodeFrame(payload, n)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%v frame %d: the decoded frame differs from the byte-at-a-time conversion", s, k)
			}
			// the frame dropped and dirtied: the next one may get its buffer
			for i := range got {
				got[i] = 0x5a
			}
			got = nil
			runtime.GC()
			runtime.GC()
		}
	}
	if _, err := decodeFrame([]byte("not s2"), 16); err == nil {
		t.Fatal("a bad payload decoded")
	}
}

// TestPixPoolReuse: a buffer comes back only once nothing points into it.
func TestPixPoolReuse(t *testing.T) {
	p := &pixPool{}
	const n = 1 << 20
	a := p.get(n)
	held := a[100:200] // a sub-slice alone keeps it
	a = nil
	for range 3 {
		runtime.GC()
	}
	p.mu.Lock()
	kept := len(p.free)
	p.mu.Unlock()
	if kept != 0 {
		t.Fatalf("a buffer still referenced (a sub-slice) came back to the pool")
	}
	runtime.KeepAlive(held)
	held = nil
	// Finalizers run on their own goroutine: wait for it.
	for i := 0; ; i++ {
		runtime.GC()
		p.mu.Lock()
		kept = len(p.free)
		p.mu.Unlock()
		if kept == 1 {
			break
		}
		if i == 1000 {
			t.Fatal("a dropped buffer never came back to the pool")
		}
		runtime.Gosched()
	}
	if b := p.get(n); len(b) != n {
		t.Fatalf("got %d bytes", len(b))
	}
	if len(p.free) != 0 {
		t.Fatal("the kept buffer was not handed out")
	}
	if b := p.get(100); len(b) != 100 {
		t.Fatalf("got %d bytes", len(b))
	}
}

func BenchmarkBGRXToRGBA(b *testing.B) {
	src := make([]byte, 4*1920*1080)
	dst := make([]byte, len(src))
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		BGRXToRGBA(dst, src)
	}
}

func BenchmarkBGRXToRGBABytes(b *testing.B) {
	src := make([]byte, 4*1920*1080)
	dst := make([]byte, len(src))
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		for i := 0; i+3 < len(src) && i+3 < len(dst); i += 4 {
			dst[i], dst[i+1], dst[i+2], dst[i+3] = src[i+2], src[i+1], src[i], 0xff
		}
	}
}

// TestPixPoolSizes: a pool full of one size's buffers takes another's,
// the oldest giving way.
func TestPixPoolSizes(t *testing.T) {
	p := &pixPool{}
	for range pixPoolMax {
		p.put(make([]byte, 1000))
	}
	p.put(make([]byte, 2000))
	if len(p.free) != pixPoolMax || len(p.free[pixPoolMax-1]) != 2000 {
		t.Fatalf("the pool keeps %d buffers, the newest %d bytes", len(p.free), len(p.free[len(p.free)-1]))
	}
	if b := p.get(2000); len(b) != 2000 || len(p.free) != pixPoolMax-1 {
		t.Fatalf("got %d bytes, %d kept", len(b), len(p.free))
	}
	for _, b := range p.free {
		if len(b) != 1000 {
			t.Fatalf("a %d-byte buffer left", len(b))
		}
	}
}
