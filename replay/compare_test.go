package replay

import (
	"image"
	"image/color"
	"testing"
)

func solid(w, h int, c color.RGBA) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for p := 0; p < len(img.Pix); p += 4 {
		img.Pix[p], img.Pix[p+1], img.Pix[p+2], img.Pix[p+3] = c.R, c.G, c.B, 255
	}
	return img
}

func paint(img *image.RGBA, r image.Rectangle, c color.RGBA) *image.RGBA {
	out := image.NewRGBA(img.Rect)
	copy(out.Pix, img.Pix)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			out.SetRGBA(x, y, c)
		}
	}
	return out
}

func TestCompare(t *testing.T) {
	bg := color.RGBA{32, 32, 32, 255}
	base := solid(100, 100, bg)
	screen := Rules{Area: AreaScreen, Tolerance: 8, MaxDiff: 0.01}
	tests := []struct {
		name     string
		got      *image.RGBA
		rules    Rules
		at       Regions
		pixels   int
		compared int
		diverged bool
	}{
		{"identical", base, screen, Regions{}, 0, 10000, false},
		{"noise within tolerance", solid(100, 100, color.RGBA{40, 24, 32, 255}), screen, Regions{}, 0, 10000, false},
		{"noise beyond tolerance", solid(100, 100, color.RGBA{41, 32, 32, 255}), screen, Regions{}, 10000, 10000, true},
		{"few pixels under max diff", paint(base, image.Rect(0, 0, 10, 10), color.RGBA{255, 0, 0, 255}), screen, Regions{}, 100, 10000, false},
		{"more pixels than max diff", paint(base, image.Rect(0, 0, 10, 11), color.RGBA{255, 0, 0, 255}), screen, Regions{}, 110, 10000, true},
		{"exact rules", paint(base, image.Rect(5, 5, 6, 6), color.RGBA{255, 0, 0, 255}), Rules{Area: AreaScreen}, Regions{}, 1, 10000, true},
		{"ignored region", paint(base, image.Rect(0, 0, 50, 50), color.RGBA{255, 0, 0, 255}),
			Rules{Area: AreaScreen, Ignore: []image.Rectangle{image.Rect(0, 0, 50, 50)}}, Regions{}, 0, 7500, false},
		{"cursor area", paint(base, image.Rect(40, 40, 56, 56), color.RGBA{255, 255, 255, 255}),
			Rules{Area: AreaScreen, CursorArea: 32}, Regions{Cursors: []image.Point{{48, 48}}}, 0, 10000 - 32*32, false},
		{"cursor area off", paint(base, image.Rect(40, 40, 56, 56), color.RGBA{255, 255, 255, 255}),
			Rules{Area: AreaScreen}, Regions{Cursors: []image.Point{{48, 48}}}, 256, 10000, true},
		{"decorations outside the windows", paint(base, image.Rect(0, 0, 100, 20), color.RGBA{0, 0, 255, 255}),
			Rules{Area: AreaWindows}, Regions{Windows: []image.Rectangle{image.Rect(0, 20, 100, 100)}}, 0, 8000, false},
		{"screen area sees decorations", paint(base, image.Rect(0, 0, 100, 20), color.RGBA{0, 0, 255, 255}),
			Rules{Area: AreaScreen}, Regions{Windows: []image.Rectangle{image.Rect(0, 20, 100, 100)}}, 2000, 10000, true},
		{"no windows: the whole screen", paint(base, image.Rect(0, 0, 1, 1), color.RGBA{0, 0, 255, 255}),
			Rules{Area: AreaWindows}, Regions{}, 1, 10000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Compare(base, tt.got, tt.rules, tt.at)
			if d.Pixels != tt.pixels || d.Compared != tt.compared || d.Diverged(tt.rules) != tt.diverged {
				t.Errorf("got %d of %d differ, diverged %v; want %d of %d, %v (%s)", d.Pixels, d.Compared, d.Diverged(tt.rules), tt.pixels, tt.compared, tt.diverged, d)
			}
		})
	}
}

func TestCompareSizeAndBounds(t *testing.T) {
	a := solid(100, 100, color.RGBA{})
	if d := Compare(a, solid(100, 99, color.RGBA{}), DefaultRules(), Regions{}); !d.SizeMismatch || !d.Diverged(DefaultRules()) {
		t.Errorf("size mismatch not reported: %+v", d)
	}
	b := paint(a, image.Rect(10, 20, 30, 25), color.RGBA{255, 0, 0, 255})
	d := Compare(a, b, Rules{Area: AreaScreen}, Regions{})
	if d.Bounds != image.Rect(10, 20, 30, 25) || d.MaxDelta != 255 {
		t.Errorf("bounds %v max delta %d", d.Bounds, d.MaxDelta)
	}
	diff := DiffImage(a, b, Rules{Area: AreaScreen}, Regions{})
	if c := diff.RGBAAt(15, 22); c != diffRed {
		t.Errorf("a differing pixel is %v in the diff image, want red", c)
	}
	if c := diff.RGBAAt(12, 16); c != diffBox {
		t.Errorf("the box around the differences is missing: %v", c)
	}
	cmp := CompareImage(a, b, diff, [3]string{"recorded", "replayed", "diff"})
	if cmp.Bounds().Dx() != 3*100+4*8 {
		t.Errorf("side by side is %v", cmp.Bounds())
	}
}

func TestRulesValidate(t *testing.T) {
	for _, r := range []Rules{
		{Area: "desk"}, {Area: AreaScreen, Tolerance: 256}, {Area: AreaScreen, MaxDiff: 1.5},
		{Area: AreaScreen, CursorArea: -1}, {Area: AreaScreen, Ignore: []image.Rectangle{{}}},
	} {
		if r.Validate() == nil {
			t.Errorf("%+v is accepted", r)
		}
	}
	if err := DefaultRules().Validate(); err != nil {
		t.Error(err)
	}
}
