package x11

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/s2"

	"github.com/codegirl-games/agentbox/guest/xserver"
)

// BenchmarkCoreBands compares band sizes of the core GetImage path at 1080p.
func BenchmarkCoreBands(b *testing.B) {
	e := newEnv(b, xserver.Config{Width: 1920, Height: 1080}, false, WithCoreCapture())
	ctx := testCtx(b, 10*time.Minute)
	buf := make([]byte, 1920*1080*4)
	saved := coreBandBytes
	defer func() { coreBandBytes = saved }()
	for _, band := range []int{64 << 10, 65535 * 4, 1 << 20, 4 << 20, 1 << 30} {
		b.Run(fmt.Sprintf("band=%dKiB", band>>10), func(b *testing.B) {
			coreBandBytes = band
			for b.Loop() {
				if _, err := e.c.Capture(ctx, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCapture(b *testing.B) {
	for _, size := range [][2]int{{640, 480}, {1920, 1080}} {
		for _, mode := range []string{"shm", "core"} {
			b.Run(fmt.Sprintf("%s/%dx%d", mode, size[0], size[1]), func(b *testing.B) {
				var opts []Option
				if mode == "core" {
					opts = append(opts, WithCoreCapture())
				}
				e := newEnv(b, xserver.Config{Width: size[0], Height: size[1]}, false, opts...)
				ctx := testCtx(b, 10*time.Minute)
				buf := make([]byte, size[0]*size[1]*4)
				b.SetBytes(int64(len(buf)))
				for b.Loop() {
					if _, err := e.c.Capture(ctx, buf); err != nil {
						b.Fatal(err)
					}
				}
				if (mode == "shm") != e.c.SHM() {
					b.Fatalf("mode %s but SHM() = %v (%v)", mode, e.c.SHM(), e.c.SHMFailure())
				}
			})
		}
	}
}

// BenchmarkMouseMove is one XTEST motion plus the GetInputFocus sync.
func BenchmarkMouseMove(b *testing.B) {
	e := newEnv(b, xserver.Config{}, false)
	ctx := testCtx(b, 10*time.Minute)
	i := 0
	for b.Loop() {
		i++
		if err := e.c.MouseMove(ctx, i%640, i%480); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClick includes the window manager synchronisation.
func BenchmarkClick(b *testing.B) {
	for _, wm := range []bool{false, true} {
		b.Run(fmt.Sprintf("wm=%v", wm), func(b *testing.B) {
			e := newEnv(b, xserver.Config{}, wm)
			ctx := testCtx(b, 10*time.Minute)
			if err := e.c.MouseMove(ctx, 320, 240); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := e.c.Click(ctx, 1, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTypeText reports the time per character: ASCII (no remap), and
// text whose characters need spare keycodes (remap on first use).
func BenchmarkTypeText(b *testing.B) {
	texts := map[string]string{
		"ascii":   "The quick brown fox jumps over the lazy dog 0123456789!?",
		"unicode": "αβγδεζηθικλμνξοπρσ",
	}
	for name, text := range texts {
		b.Run(name, func(b *testing.B) {
			e := newEnv(b, xserver.Config{}, false)
			ctx := testCtx(b, 10*time.Minute)
			n := 0
			for b.Loop() {
				if err := e.c.TypeText(ctx, text, 0); err != nil {
					b.Fatal(err)
				}
				n += len([]rune(text))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/char")
		})
	}
	// Every character is new (CJK) and remapped. The first variant pauses
	// (off the clock) so that no spare is younger than reuseAge: the cost of
	// a remap itself. The second types new characters back to back and so
	// runs into the reuse guard: at most 19 new keysyms per reuseAge.
	for _, pause := range []bool{true, false} {
		b.Run(fmt.Sprintf("remap-every-char/pause=%v", pause), func(b *testing.B) {
			e := newEnv(b, xserver.Config{}, false)
			ctx := testCtx(b, 10*time.Minute)
			n := 0
			r := rune(0x4e00)
			for b.Loop() {
				if pause {
					b.StopTimer()
					time.Sleep(reuseAge + 10*time.Millisecond)
					b.StartTimer()
				}
				var sb strings.Builder
				for range 10 {
					sb.WriteRune(r)
					r++
				}
				if err := e.c.TypeText(ctx, sb.String(), 0); err != nil {
					b.Fatal(err)
				}
				n += 10
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/char")
		})
	}
}

// BenchmarkScreenshotPath is what the guest's screenshot does with a
// capture, through MIT-SHM: the hash (an unchanged screen) or the hash and
// the compression (a changed one), from a copy out of the segment
// (Capture) against from the segment itself (CaptureShared).
func BenchmarkScreenshotPath(b *testing.B) {
	for _, size := range [][2]int{{640, 480}, {1920, 1080}} {
		e := newEnv(b, xserver.Config{Width: size[0], Height: size[1]}, false)
		ctx := testCtx(b, 10*time.Minute)
		for _, work := range []string{"hash", "hash+s2"} {
			use := func(pix []byte, enc []byte) []byte {
				_ = xxhash.Sum64(pix)
				if work == "hash+s2" {
					enc = s2.Encode(enc[:cap(enc)], pix)
				}
				return enc
			}
			b.Run(fmt.Sprintf("copy/%s/%dx%d", work, size[0], size[1]), func(b *testing.B) {
				var buf, enc []byte
				for b.Loop() {
					f, err := e.c.Capture(ctx, buf)
					if err != nil {
						b.Fatal(err)
					}
					buf = f.Pix[:cap(f.Pix)]
					enc = use(f.Pix, enc)
				}
			})
			b.Run(fmt.Sprintf("shared/%s/%dx%d", work, size[0], size[1]), func(b *testing.B) {
				var buf, enc []byte
				for b.Loop() {
					var err error
					buf, err = e.c.CaptureShared(ctx, buf, func(f Frame) error { enc = use(f.Pix, enc); return nil })
					if err != nil {
						b.Fatal(err)
					}
				}
				if !e.c.SHM() {
					b.Fatalf("no MIT-SHM: %v", e.c.SHMFailure())
				}
			})
		}
	}
}
