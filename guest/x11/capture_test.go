package x11

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"

	"github.com/codegirl-games/agentbox/guest/xserver"
)

// paint draws known colours with a second client: an override-redirect
// window at (x, y) filled with four 50×25 rectangles (red, green, blue,
// white) over a grey background. It returns once the server has drawn them.
func paint(t testing.TB, xc *xgb.Conn, x, y int) {
	t.Helper()
	scr := xproto.Setup(xc).DefaultScreen(xc)
	wid, err := xproto.NewWindowId(xc)
	if err != nil {
		t.Fatal(err)
	}
	err = xproto.CreateWindowChecked(xc, scr.RootDepth, wid, scr.Root, int16(x), int16(y), 100, 60, 0,
		xproto.WindowClassInputOutput, scr.RootVisual, xproto.CwBackPixel|xproto.CwOverrideRedirect,
		[]uint32{0x808080, 1}).Check()
	if err != nil {
		t.Fatal(err)
	}
	if err := xproto.MapWindowChecked(xc, wid).Check(); err != nil {
		t.Fatal(err)
	}
	gc, err := xproto.NewGcontextId(xc)
	if err != nil {
		t.Fatal(err)
	}
	if err := xproto.CreateGCChecked(xc, gc, xproto.Drawable(wid), 0, nil).Check(); err != nil {
		t.Fatal(err)
	}
	for i, col := range []uint32{0xff0000, 0x00ff00, 0x0000ff, 0xffffff} {
		xproto.ChangeGC(xc, gc, xproto.GcForeground, []uint32{col})
		r := xproto.Rectangle{X: int16(50 * (i % 2)), Y: int16(25 * (i / 2)), Width: 50, Height: 25}
		xproto.PolyFillRectangle(xc, xproto.Drawable(wid), gc, []xproto.Rectangle{r})
	}
	if _, err := xproto.GetInputFocus(xc).Reply(); err != nil {
		t.Fatal(err)
	}
}

func pixel(f Frame, x, y int) [3]byte {
	i := (y-f.Y)*f.Stride + (x-f.X)*4
	return [3]byte{f.Pix[i+2], f.Pix[i+1], f.Pix[i]} // R, G, B
}

func TestCaptureColoursSHMAndCore(t *testing.T) {
	e := newEnv(t, xserver.Config{Width: 320, Height: 240}, false)
	core, err := Open(testCtx(t, 10*time.Second), e.srv.Display(), WithCoreCapture())
	if err != nil {
		t.Fatal(err)
	}
	defer core.Close()
	if !e.c.SHM() {
		t.Fatalf("MIT-SHM not used: %v", e.c.SHMFailure())
	}
	if core.SHM() {
		t.Fatal("WithCoreCapture Conn uses MIT-SHM")
	}
	paint(t, client(t, e.srv.Display()), 10, 20)

	ctx := testCtx(t, 10*time.Second)
	fs, err := e.c.Capture(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	fc, err := core.Capture(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fs.Width != 320 || fs.Height != 240 || fs.Stride != 320*4 || len(fs.Pix) != 320*240*4 {
		t.Fatalf("frame %dx%d stride %d len %d", fs.Width, fs.Height, fs.Stride, len(fs.Pix))
	}
	if !bytes.Equal(fs.Pix, fc.Pix) {
		t.Fatal("MIT-SHM and core captures differ")
	}
	for _, c := range []struct {
		x, y int
		rgb  [3]byte
	}{
		{15, 25, [3]byte{0xff, 0, 0}},
		{65, 25, [3]byte{0, 0xff, 0}},
		{15, 50, [3]byte{0, 0, 0xff}},
		{105, 65, [3]byte{0xff, 0xff, 0xff}},
		{105, 75, [3]byte{0x80, 0x80, 0x80}}, // window background
		{5, 5, [3]byte{0, 0, 0}},             // root background
	} {
		if got := pixel(fs, c.x, c.y); got != c.rgb {
			t.Errorf("pixel (%d,%d) = %x, want %x", c.x, c.y, got, c.rgb)
		}
	}

	// A rectangle equals the same part of the full frame, on both paths, and
	// the destination buffer is reused.
	buf := make([]byte, 0, 64*48*4)
	for _, conn := range []*Conn{e.c, core} {
		r, err := conn.CaptureRect(ctx, 40, 30, 64, 48, buf)
		if err != nil {
			t.Fatal(err)
		}
		if &r.Pix[0] != &buf[:1][0] {
			t.Error("CaptureRect did not reuse dst")
		}
		for y := range 48 {
			got := r.Pix[y*r.Stride : y*r.Stride+64*4]
			want := fs.Pix[(30+y)*fs.Stride+40*4 : (30+y)*fs.Stride+(40+64)*4]
			if !bytes.Equal(got, want) {
				t.Fatalf("row %d of the rectangle differs from the full frame", y)
			}
		}
	}
	for _, r := range [][4]int{{-1, 0, 10, 10}, {0, 0, 321, 10}, {310, 230, 11, 10}, {0, 0, 0, 5}} {
		if _, err := e.c.CaptureRect(ctx, r[0], r[1], r[2], r[3], nil); !errors.Is(err, ErrBadArgument) {
			t.Errorf("CaptureRect%v = %v, want ErrBadArgument", r, err)
		}
	}
}

func TestCapture1080p(t *testing.T) {
	e := newEnv(t, xserver.Config{Width: 1920, Height: 1080}, false)
	core, err := Open(testCtx(t, 10*time.Second), e.srv.Display(), WithCoreCapture())
	if err != nil {
		t.Fatal(err)
	}
	defer core.Close()
	paint(t, client(t, e.srv.Display()), 1800, 1000)
	ctx := testCtx(t, 10*time.Second)
	fs, err := e.c.Capture(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	fc, err := core.Capture(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fs.Width != 1920 || fs.Height != 1080 || !bytes.Equal(fs.Pix, fc.Pix) {
		t.Fatalf("1080p captures: %dx%d, equal %v", fs.Width, fs.Height, bytes.Equal(fs.Pix, fc.Pix))
	}
	if got := pixel(fs, 1805, 1005); got != [3]byte{0xff, 0, 0} {
		t.Errorf("pixel = %x", got)
	}
	if !e.c.SHM() {
		t.Errorf("SHM given up: %v", e.c.SHMFailure())
	}
}

func TestCaptureUnsupportedDepth(t *testing.T) {
	e := newEnv(t, xserver.Config{Depth: 16}, false)
	if _, err := e.c.Capture(testCtx(t, 5*time.Second), nil); !errors.Is(err, ErrUnsupportedFormat) {
		t.Fatalf("Capture at depth 16 = %v, want ErrUnsupportedFormat", err)
	}
	// Input still works.
	if err := e.c.MouseMove(testCtx(t, 5*time.Second), 10, 10); err != nil {
		t.Fatal(err)
	}
}
