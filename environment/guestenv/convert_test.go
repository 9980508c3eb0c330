package guestenv

import (
	"math/rand/v2"
	"testing"
)

// TestBGRXToRGBA holds the word-at-a-time conversion to the byte one, at
// lengths with and without an odd pixel at the end.
func TestBGRXToRGBA(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 4, 8, 12, 4 * 641, 4 * 640 * 3} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(r.IntN(256))
		}
		want := make([]byte, n)
		for i := 0; i+3 < n; i += 4 {
			want[i], want[i+1], want[i+2], want[i+3] = src[i+2], src[i+1], src[i], 0xff
		}
		got := make([]byte, n)
		BGRXToRGBA(got, src)
		if string(got) != string(want) {
			t.Fatalf("%d bytes: got %v, want %v", n, got[:min(n, 16)], want[:min(n, 16)])
		}
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
