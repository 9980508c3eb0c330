package observe

import (
	"bytes"
	"image/jpeg"
	"image/png"
	"testing"

	"github.com/codegirl-games/agentbox/action"
)

func testFrame(w, h int) *Frame {
	pix := make([]byte, 4*w*h)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			i := 4 * (y*w + x)
			pix[i], pix[i+1], pix[i+2], pix[i+3] = byte(x), byte(y), byte(x^y), 255
		}
	}
	return &Frame{Width: w, Height: h, Pix: pix}
}

// TestViewMappingIsExact checks, for every pixel of several scaled and
// cropped views, that mapping to the screen and back lands on the same
// pixel, and that every screen pixel maps into the view.
func TestViewMappingIsExact(t *testing.T) {
	f := testFrame(1920, 1080)
	tests := []struct {
		name         string
		region       *action.Rect
		scale        float64
		maxW, maxH   int
		wantW, wantH int
	}{
		{"unscaled", nil, 0, 0, 0, 1920, 1080},
		{"XGA class", nil, 0, 1024, 768, 1024, 576},
		{"WXGA width", nil, 0, 1280, 0, 1280, 720},
		{"half", nil, 0.5, 0, 0, 960, 540},
		{"odd factor", nil, 0, 1000, 0, 1000, 563},
		{"region", &action.Rect{100, 50, 740, 530}, 0, 0, 0, 640, 480},
		{"region scaled", &action.Rect{333, 77, 1333, 777}, 0, 640, 0, 640, 448},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := NewView(f, tt.region, tt.scale, tt.maxW, tt.maxH)
			if err != nil {
				t.Fatal(err)
			}
			if v.Frame.Width != tt.wantW || v.Frame.Height != tt.wantH {
				t.Fatalf("view %dx%d, want %dx%d", v.Frame.Width, v.Frame.Height, tt.wantW, tt.wantH)
			}
			for y := 0; y < v.Frame.Height; y++ {
				for x := 0; x < v.Frame.Width; x++ {
					sx, sy := v.ToScreen(x, y)
					bx, by, ok := v.FromScreen(sx, sy)
					if !ok || bx != x || by != y {
						t.Fatalf("view (%d,%d) → screen (%d,%d) → view (%d,%d) %v", x, y, sx, sy, bx, by, ok)
					}
				}
			}
			r := v.Region
			for _, p := range [][2]int{{r[0], r[1]}, {r[2] - 1, r[3] - 1}, {(r[0] + r[2]) / 2, (r[1] + r[3]) / 2}} {
				if _, _, ok := v.FromScreen(p[0], p[1]); !ok {
					t.Errorf("screen %v is in the region but maps outside the view", p)
				}
			}
			if _, _, ok := v.FromScreen(r[2], r[3]); ok {
				t.Errorf("a screen pixel outside the region maps into the view")
			}
		})
	}
}

func TestViewPixels(t *testing.T) {
	f := testFrame(64, 48)
	v, err := NewView(f, &action.Rect{10, 20, 30, 40}, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, g, _ := v.Frame.At(0, 0)
	if r != 10 || g != 20 || v.Frame.Width != 20 {
		t.Errorf("cropped view starts at (%d,%d), %d wide", r, g, v.Frame.Width)
	}
	if _, err := NewView(f, &action.Rect{0, 0, 65, 10}, 0, 0, 0); err == nil {
		t.Error("a region outside the frame was accepted")
	}
	for _, enc := range []struct {
		name string
		data func() ([]byte, error)
		dec  func([]byte) error
	}{
		{"png", f.PNG, func(b []byte) error { _, err := png.Decode(bytes.NewReader(b)); return err }},
		{"jpeg", func() ([]byte, error) { return f.JPEG(80) }, func(b []byte) error { _, err := jpeg.Decode(bytes.NewReader(b)); return err }},
	} {
		b, err := enc.data()
		if err != nil {
			t.Fatal(err)
		}
		if err := enc.dec(b); err != nil {
			t.Errorf("%s: %v", enc.name, err)
		}
	}
}

func TestFrameCentroid(t *testing.T) {
	f := &Frame{Width: 8, Height: 4, Pix: make([]byte, 4*8*4)}
	for _, p := range [][2]int{{2, 1}, {4, 1}, {2, 3}, {4, 3}} {
		f.Pix[4*(p[1]*8+p[0])+1] = 255
	}
	if x, y, n := f.Centroid(func(r, g, b uint8) bool { return g > 180 }); x != 3 || y != 2 || n != 4 {
		t.Errorf("Centroid = %v, %v, %d; want 3, 2, 4", x, y, n)
	}
	if x, y, n := f.Centroid(func(r, g, b uint8) bool { return r > 0 }); x != 0 || y != 0 || n != 0 {
		t.Errorf("Centroid of nothing = %v, %v, %d", x, y, n)
	}
}
