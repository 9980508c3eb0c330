package grade

import (
	"bytes"
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"path/filepath"
)

// decodePNG decodes a PNG, its dimensions checked from its header first.
func decodePNG(data []byte) (*image.NRGBA, error) {
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("not a PNG: %v", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > MaxPixels {
		return nil, fmt.Errorf("a PNG of %d×%d, more pixels than the grader reads (%d)", cfg.Width, cfg.Height, MaxPixels)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("not a PNG: %v", err)
	}
	if n, ok := img.(*image.NRGBA); ok && n.Rect.Min == (image.Point{}) {
		return n, nil
	}
	b := img.Bounds()
	n := image.NewNRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(n, n.Rect, img, b.Min, draw.Src)
	return n, nil
}

func pngSize(data []byte) (image.Point, error) {
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return image.Point{}, fmt.Errorf("not a PNG: %v", err)
	}
	return image.Pt(cfg.Width, cfg.Height), nil
}

func checkImage(c *Check, data []byte) result {
	exp, err := readHost(c.Expected)
	if err != nil {
		return infrastructure("the expected image: %v", err)
	}
	gotSize, err := pngSize(data)
	if err != nil {
		return malformed("%s is %v", c.File, err)
	}
	wantSize, err := pngSize(exp)
	if err != nil {
		return infrastructure("the expected image %s is %v", c.Expected, err)
	}
	if gotSize != wantSize {
		return incorrect("%s is %d×%d, want %d×%d", c.File, gotSize.X, gotSize.Y, wantSize.X, wantSize.Y)
	}
	got, err := decodePNG(data)
	if err != nil {
		return malformed("%s is %v", c.File, err)
	}
	want, err := decodePNG(exp)
	if err != nil {
		return infrastructure("the expected image %s is %v", c.Expected, err)
	}
	differ := diffPixels(got, want, c.Threshold)
	total := gotSize.X * gotSize.Y
	frac := float64(differ) / float64(total)
	if frac <= c.Tolerance {
		return held("%d of %d pixels differ (%.4f%%, at most %.4f%%)", differ, total, 100*frac, 100*c.Tolerance)
	}
	return incorrect("%s differs from %s in %d of %d pixels (%.4f%%, at most %.4f%%)", c.File, filepath.Base(c.Expected), differ, total, 100*frac, 100*c.Tolerance)
}

// diffPixels counts the pixels where a channel differs by more than
// threshold (colour compared premultiplied by alpha, so fully transparent
// pixels agree whatever their colour).
func diffPixels(a, b *image.NRGBA, threshold int) int {
	n := 0
	for y := range a.Rect.Dy() {
		ra := a.Pix[y*a.Stride : y*a.Stride+4*a.Rect.Dx()]
		rb := b.Pix[y*b.Stride : y*b.Stride+4*b.Rect.Dx()]
		for i := 0; i < len(ra); i += 4 {
			aa, ab := int(ra[i+3]), int(rb[i+3])
			if absInt(aa-ab) > threshold {
				n++
				continue
			}
			for k := range 3 {
				if absInt(int(ra[i+k])*aa/255-int(rb[i+k])*ab/255) > threshold {
					n++
					break
				}
			}
		}
	}
	return n
}

func absInt(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
