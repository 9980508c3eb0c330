package x11

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/codegirl-games/agentbox/guest/xserver"
)

func TestDamageBands(t *testing.T) {
	r := func(x, y, w, h int) xproto.Rectangle {
		return xproto.Rectangle{X: int16(x), Y: int16(y), Width: uint16(w), Height: uint16(h)}
	}
	tests := []struct {
		name  string
		rects []xproto.Rectangle
		want  [][2]int
	}{
		{"none", nil, nil},
		{"empty rectangles", []xproto.Rectangle{r(10, 10, 0, 0), r(5, 5, 3, 0)}, nil},
		{"one", []xproto.Rectangle{r(10, 20, 30, 40)}, [][2]int{{20, 60}}},
		{"clipped to the screen", []xproto.Rectangle{r(0, -5, 10, 10), r(0, 470, 10, 30)}, [][2]int{{0, 5}, {470, 480}}},
		{"overlapping, unsorted", []xproto.Rectangle{r(0, 100, 5, 50), r(300, 90, 5, 20)}, [][2]int{{90, 150}}},
		{"close ones merge", []xproto.Rectangle{r(0, 0, 5, 10), r(0, 10+damageBandGap, 5, 10)}, [][2]int{{0, 20 + damageBandGap}}},
		{"far ones stay apart", []xproto.Rectangle{r(0, 0, 5, 10), r(0, 11+damageBandGap, 5, 10)}, [][2]int{{0, 10}, {11 + damageBandGap, 21 + damageBandGap}}},
		{"too many span them all", func() []xproto.Rectangle {
			var rs []xproto.Rectangle
			for i := range maxDamageBands + 1 {
				rs = append(rs, r(0, i*50, 5, 2))
			}
			return rs
		}(), [][2]int{{0, maxDamageBands*50 + 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := damageBands(tt.rects, 480); !slices.Equal(got, tt.want) {
				t.Errorf("damageBands = %v, want %v", got, tt.want)
			}
		})
	}
}

// fillRoot fills a rectangle of the root window with a colour from
// another client and returns once the server has drawn it.
func fillRoot(t testing.TB, xc *xgb.Conn, col uint32, x, y, w, h int) {
	t.Helper()
	scr := xproto.Setup(xc).DefaultScreen(xc)
	gc, err := xproto.NewGcontextId(xc)
	if err != nil {
		t.Fatal(err)
	}
	xproto.CreateGC(xc, gc, xproto.Drawable(scr.Root), xproto.GcForeground|xproto.GcSubwindowMode,
		[]uint32{col, xproto.SubwindowModeIncludeInferiors})
	xproto.PolyFillRectangle(xc, xproto.Drawable(scr.Root), gc,
		[]xproto.Rectangle{{X: int16(x), Y: int16(y), Width: uint16(w), Height: uint16(h)}})
	xproto.FreeGC(xc, gc)
	if _, err := xproto.GetInputFocus(xc).Reply(); err != nil {
		t.Fatal(err)
	}
}

// TestCaptureDamaged holds CaptureDamaged's frame to a full capture by
// another connection after each kind of change, and its Gen to the rule:
// the same Gen only for the same pixels, and with DAMAGE no new Gen
// without a change.
func TestCaptureDamaged(t *testing.T) {
	for _, mode := range []string{"shm", "core", "without damage"} {
		t.Run(mode, func(t *testing.T) {
			var opts []Option
			switch mode {
			case "core":
				opts = append(opts, WithCoreCapture())
			case "without damage":
				opts = append(opts, WithoutDamage())
			}
			e := newEnv(t, xserver.Config{Width: 320, Height: 240}, false, opts...)
			if got, want := e.c.Damage(), mode != "without damage"; got != want {
				t.Fatalf("Damage() = %v, want %v (%v)", got, want, e.c.DamageFailure())
			}
			if got, want := e.c.SHM(), mode != "core"; got != want {
				t.Fatalf("SHM() = %v, want %v (%v)", got, want, e.c.SHMFailure())
			}
			ref, err := Open(testCtx(t, 10*time.Second), e.srv.Display(), WithCoreCapture())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ref.Close() })
			other := client(t, e.srv.Display())
			ctx := testCtx(t, 30*time.Second)

			var gen uint64
			check := func(what string, sameGen bool) {
				t.Helper()
				var got []byte
				var g uint64
				if err := e.c.CaptureDamaged(ctx, func(f Frame) error {
					got, g = bytes.Clone(f.Pix), f.Gen
					return nil
				}); err != nil {
					t.Fatalf("%s: CaptureDamaged: %v", what, err)
				}
				want, err := ref.Capture(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want.Pix) {
					t.Errorf("%s: CaptureDamaged's frame differs from a full capture", what)
				}
				if e.c.Damage() && sameGen != (g == gen) {
					t.Errorf("%s: Gen %d after %d, want the same: %v", what, g, gen, sameGen)
				}
				if !e.c.Damage() && g == gen {
					t.Errorf("%s: Gen %d again without DAMAGE", what, g)
				}
				gen = g
			}
			check("first", false)
			check("unchanged", true)
			if err := e.c.MouseMove(ctx, 100, 100); err != nil {
				t.Fatal(err)
			}
			check("pointer moved", true)
			fillRoot(t, other, 0xff0000, 10, 20, 30, 5)
			check("a small change", false)
			check("unchanged again", true)
			fillRoot(t, other, 0x00ff00, 0, 0, 5, 5)
			fillRoot(t, other, 0x0000ff, 300, 230, 20, 10)
			fillRoot(t, other, 0xffffff, 100, 120, 10, 10)
			check("three bands", false)
			paint(t, other, 40, 50)
			check("a window mapped", false)
			if _, err := e.c.CaptureRect(ctx, 5, 5, 20, 20, nil); err != nil {
				t.Fatal(err)
			}
			check("after a partial CaptureRect", !e.c.SHM())
			if _, err := e.c.Capture(ctx, nil); err != nil {
				t.Fatal(err)
			}
			check("after a full Capture", true)
		})
	}
}

// TestCaptureDamagedNoExtension: a server without DAMAGE falls back to
// whole captures, and says why.
func TestCaptureDamagedNoExtension(t *testing.T) {
	e := newEnv(t, xserver.Config{Width: 160, Height: 120, ExtraArgs: []string{"-extension", "DAMAGE"}}, false)
	if e.c.Damage() || e.c.DamageFailure() == nil {
		t.Fatalf("Damage() = %v, DamageFailure() = %v on a server without DAMAGE", e.c.Damage(), e.c.DamageFailure())
	}
	ctx := testCtx(t, 30*time.Second)
	var gens []uint64
	for range 2 {
		if err := e.c.CaptureDamaged(ctx, func(f Frame) error { gens = append(gens, f.Gen); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if gens[0] == gens[1] {
		t.Errorf("Gen %v: the same twice without DAMAGE", gens)
	}
}

// TestDamageCheck: the check alone reports a change once, and the
// capture after a reported change still holds the whole screen.
func TestDamageCheck(t *testing.T) {
	e := newEnv(t, xserver.Config{Width: 320, Height: 240}, false)
	ctx := testCtx(t, 30*time.Second)
	other := client(t, e.srv.Display())
	capture := func() []byte {
		t.Helper()
		var pix []byte
		if err := e.c.CaptureDamaged(ctx, func(f Frame) error { pix = bytes.Clone(f.Pix); return nil }); err != nil {
			t.Fatal(err)
		}
		return pix
	}
	check := func(what string, want bool) {
		t.Helper()
		got, err := e.c.DamageCheck(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: DamageCheck = %v, want %v", what, got, want)
		}
	}
	capture()
	check("unchanged", false)
	if err := e.c.MouseMove(ctx, 50, 60); err != nil {
		t.Fatal(err)
	}
	check("pointer moved", false)
	fillRoot(t, other, 0xff0000, 10, 20, 30, 5)
	check("a change", true)
	check("the same change again", false)
	got := capture()
	want, err := e.c.Capture(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Pix) {
		t.Error("CaptureDamaged after a check that took the damage differs from a full capture")
	}
}

// TestWatchDamage: a change after a capture is reported; none is without
// one (checked after a sync, not by waiting).
func TestWatchDamage(t *testing.T) {
	e := newEnv(t, xserver.Config{Width: 320, Height: 240}, false)
	ctx := testCtx(t, 30*time.Second)
	ch, stop := e.c.WatchDamage()
	defer stop()
	other := client(t, e.srv.Display())
	for i := range 3 {
		if err := e.c.CaptureDamaged(ctx, func(Frame) error { return nil }); err != nil {
			t.Fatal(err)
		}
		// Drain a report of what the capture already took.
		select {
		case <-ch:
		default:
		}
		fillRoot(t, other, uint32(0x100000*(i+1)), 10*i, 10, 10, 10)
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("change %d: no report", i)
		}
	}
}

// BenchmarkCaptureDamaged is the guest's capture path (a capture, and the
// frame's hash when its Gen is new, as guest.keptFrame does) with and
// without DAMAGE, on an unchanged screen, after a 100×60 change and after
// a change of the whole screen. A change is drawn by another client and
// synced inside the loop, in every variant alike.
func BenchmarkCaptureDamaged(b *testing.B) {
	for _, size := range [][2]int{{640, 480}, {1920, 1080}} {
		for _, mode := range []string{"damage", "without damage"} {
			var opts []Option
			if mode == "without damage" {
				opts = append(opts, WithoutDamage())
			}
			e := newEnv(b, xserver.Config{Width: size[0], Height: size[1]}, false, opts...)
			other := client(b, e.srv.Display())
			ctx := testCtx(b, 10*time.Minute)
			for _, change := range []string{"unchanged", "100x60 changed", "whole screen changed"} {
				b.Run(fmt.Sprintf("%dx%d/%s/%s", size[0], size[1], mode, change), func(b *testing.B) {
					i := uint32(0)
					var gen uint64
					for b.Loop() {
						switch change {
						case "100x60 changed":
							i++
							fillRoot(b, other, i&0xffffff, 200, 200, 100, 60)
						case "whole screen changed":
							i++
							fillRoot(b, other, i&0xffffff, 0, 0, size[0], size[1])
						}
						if err := e.c.CaptureDamaged(ctx, func(f Frame) error {
							if f.Gen != gen {
								gen = f.Gen
								_ = xxhash.Sum64(f.Pix)
							}
							return nil
						}); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// TestCaptureDamagedCursor: the cursor read with the capture is where the
// pointer is after it, whether the screen was unchanged (read in the
// damage check's round trip), changed (read after the capture) or
// followed without DAMAGE; a pointer another client warped is seen too.
func TestCaptureDamagedCursor(t *testing.T) {
	for _, mode := range []string{"shm", "without damage"} {
		t.Run(mode, func(t *testing.T) {
			var opts []Option
			if mode == "without damage" {
				opts = append(opts, WithoutDamage())
			}
			e := newEnv(t, xserver.Config{Width: 320, Height: 240}, false, opts...)
			other := client(t, e.srv.Display())
			ctx := testCtx(t, 30*time.Second)
			root := xproto.Setup(other).DefaultScreen(other).Root
			check := func(what string, wantX, wantY int) {
				t.Helper()
				var ref []byte
				x, y, err := e.c.CaptureDamagedCursor(ctx, func(f Frame) error { ref = bytes.Clone(f.Pix); return nil })
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if x != wantX || y != wantY {
					t.Errorf("%s: cursor (%d, %d), want (%d, %d)", what, x, y, wantX, wantY)
				}
				if len(ref) == 0 {
					t.Errorf("%s: no frame", what)
				}
			}
			if err := e.c.MouseMove(ctx, 10, 20); err != nil {
				t.Fatal(err)
			}
			check("first", 10, 20)
			for i := range 5 {
				x, y := 30+i*40, 40+i*30
				if err := e.c.MouseMove(ctx, x, y); err != nil {
					t.Fatal(err)
				}
				check(fmt.Sprintf("unchanged, moved to (%d, %d)", x, y), x, y)
			}
			if err := e.c.MouseMove(ctx, 100, 110); err != nil {
				t.Fatal(err)
			}
			fillRoot(t, other, 0xff0000, 10, 20, 30, 5)
			check("changed", 100, 110)
			xproto.WarpPointer(other, 0, root, 0, 0, 0, 0, 222, 111)
			if _, err := xproto.GetInputFocus(other).Reply(); err != nil {
				t.Fatal(err)
			}
			check("warped by another client", 222, 111)
			if err := e.c.MouseMove(ctx, 1000, -5); err != nil {
				t.Fatal(err)
			}
			check("clamped to the screen", 319, 0)
		})
	}
}
