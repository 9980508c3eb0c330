package replay

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"os"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// Rules say when a replayed screen matches a recorded one.
//
// A pixel differs when any of its channels differs by more than Tolerance.
// With Area "windows" (the default) only the pixels inside the app's
// windows are compared (the client areas, as recorded and as replayed): the
// window manager's decorations, whose focus colour can change a few
// milliseconds after a window maps, and the empty desktop are not the app's.
// Area "screen" compares every pixel. Pixels in an ignored region, or in a
// CursorArea×CursorArea square centred on the pointer (as recorded, and as
// replayed), are not compared. A screen diverges when more than MaxDiff of
// the compared pixels differ, or when its size differs.
type Rules struct {
	Area       string            `json:"area"`        // "windows" or "screen"
	Tolerance  int               `json:"tolerance"`   // 0–255 per channel
	MaxDiff    float64           `json:"max_diff"`    // fraction 0–1 of compared pixels
	CursorArea int               `json:"cursor_area"` // side of the square ignored at the pointer; 0: none
	Ignore     []image.Rectangle `json:"-"`           // regions never compared
}

// Defaults: small colour noise (8 per channel) and 0.5% of the pixels may
// differ — enough for a frame or two of animation timing, not for an object
// that moved a different distance — and a 32×32 square at the pointer.
const (
	DefaultTolerance  = 8
	DefaultMaxDiff    = 0.005
	DefaultCursorArea = 32
)

// DefaultRules are the rules agentbox replay uses unless told otherwise.
func DefaultRules() Rules {
	return Rules{Area: AreaWindows, Tolerance: DefaultTolerance, MaxDiff: DefaultMaxDiff, CursorArea: DefaultCursorArea}
}

// Areas compared.
const (
	AreaWindows = "windows" // the app's windows' client areas
	AreaScreen  = "screen"  // every pixel
)

// Regions are the places of one comparison that the rules refer to.
type Regions struct {
	// Cursors are the pointer positions (recorded and replayed).
	Cursors []image.Point
	// Windows are the app's windows (recorded and replayed); with Area
	// "windows" only pixels inside them are compared. None: the screen.
	Windows []image.Rectangle
}

// Validate checks the rules' ranges.
func (r Rules) Validate() error {
	switch {
	case r.Area != AreaWindows && r.Area != AreaScreen:
		return fmt.Errorf("area %q: want windows or screen", r.Area)
	case r.Tolerance < 0 || r.Tolerance > 255:
		return fmt.Errorf("tolerance %d: want 0–255 per channel", r.Tolerance)
	case r.MaxDiff < 0 || r.MaxDiff > 1:
		return fmt.Errorf("max diff %v: want a fraction between 0 and 1 (or a percentage)", r.MaxDiff)
	case r.CursorArea < 0:
		return fmt.Errorf("cursor area %d: want 0 or more pixels", r.CursorArea)
	}
	for _, g := range r.Ignore {
		if g.Empty() {
			return fmt.Errorf("ignored region %v is empty", g)
		}
	}
	return nil
}

// Diff is the comparison of two screens.
type Diff struct {
	Width        int             `json:"width"`
	Height       int             `json:"height"`
	SizeMismatch bool            `json:"size_mismatch,omitempty"`
	Compared     int             `json:"compared"`  // pixels compared
	Pixels       int             `json:"pixels"`    // pixels that differ
	Fraction     float64         `json:"fraction"`  // Pixels / Compared
	MaxDelta     int             `json:"max_delta"` // the largest channel difference
	Bounds       image.Rectangle `json:"-"`         // of the differing pixels
}

// Diverged reports whether the difference is beyond the rules.
func (d Diff) Diverged(r Rules) bool {
	if d.SizeMismatch {
		return true
	}
	return float64(d.Pixels) > r.MaxDiff*float64(d.Compared)
}

// String describes the difference in a sentence.
func (d Diff) String() string {
	if d.SizeMismatch {
		return fmt.Sprintf("the screen is %dx%d, the recording's was different", d.Width, d.Height)
	}
	if d.Pixels == 0 {
		return fmt.Sprintf("all %d compared pixels match", d.Compared)
	}
	b := d.Bounds
	return fmt.Sprintf("%d of %d pixels differ (%.2f%%, largest channel difference %d) within [%d,%d]–[%d,%d]",
		d.Pixels, d.Compared, 100*d.Fraction, d.MaxDelta, b.Min.X, b.Min.Y, b.Max.X, b.Max.Y)
}

// mask marks the pixels left out of the comparison.
func (r Rules) mask(w, h int, at Regions) []bool {
	m := make([]bool, w*h)
	bounds := image.Rect(0, 0, w, h)
	set := func(g image.Rectangle, v bool) {
		g = g.Intersect(bounds)
		for y := g.Min.Y; y < g.Max.Y; y++ {
			row := m[y*w : (y+1)*w]
			for x := g.Min.X; x < g.Max.X; x++ {
				row[x] = v
			}
		}
	}
	if r.Area == AreaWindows && len(at.Windows) > 0 {
		set(bounds, true)
		for _, g := range at.Windows {
			set(g, false)
		}
	}
	for _, g := range r.Ignore {
		set(g, true)
	}
	if r.CursorArea > 0 {
		h := r.CursorArea / 2
		for _, c := range at.Cursors {
			set(image.Rect(c.X-h, c.Y-h, c.X-h+r.CursorArea, c.Y-h+r.CursorArea), true)
		}
	}
	return m
}

// Compare compares a replayed screen with the recorded one by the rules.
func Compare(want, got *image.RGBA, r Rules, at Regions) Diff {
	d, _ := compare(want, got, r, at, false)
	return d
}

func compare(want, got *image.RGBA, r Rules, at Regions, keep bool) (Diff, []uint8) {
	wb, gb := want.Bounds(), got.Bounds()
	d := Diff{Width: gb.Dx(), Height: gb.Dy()}
	if wb.Size() != gb.Size() {
		d.SizeMismatch = true
		return d, nil
	}
	w, h := wb.Dx(), wb.Dy()
	m := r.mask(w, h, at)
	var states []uint8 // 0 same, 1 differs, 2 ignored
	if keep {
		states = make([]uint8, w*h)
	}
	tol := r.Tolerance
	minX, minY, maxX, maxY := w, h, -1, -1
	for y := 0; y < h; y++ {
		wr := want.Pix[want.PixOffset(wb.Min.X, wb.Min.Y+y):]
		gr := got.Pix[got.PixOffset(gb.Min.X, gb.Min.Y+y):]
		for x := 0; x < w; x++ {
			if m[y*w+x] {
				if keep {
					states[y*w+x] = 2
				}
				continue
			}
			d.Compared++
			i := 4 * x
			delta := 0
			for c := 0; c < 3; c++ {
				v := int(wr[i+c]) - int(gr[i+c])
				if v < 0 {
					v = -v
				}
				if v > delta {
					delta = v
				}
			}
			if delta > d.MaxDelta {
				d.MaxDelta = delta
			}
			if delta > tol {
				d.Pixels++
				if keep {
					states[y*w+x] = 1
				}
				minX, minY = min(minX, x), min(minY, y)
				maxX, maxY = max(maxX, x), max(maxY, y)
			}
		}
	}
	if d.Compared > 0 {
		d.Fraction = float64(d.Pixels) / float64(d.Compared)
	}
	if d.Pixels > 0 {
		d.Bounds = image.Rect(minX, minY, maxX+1, maxY+1)
	}
	return d, states
}

// Colours of the diff image.
var (
	diffRed    = color.RGBA{255, 0, 80, 255}
	diffIgnore = color.RGBA{40, 90, 200, 255}
	diffBox    = color.RGBA{255, 210, 0, 255}
)

// DiffImage shows where two screens differ: the replayed screen faded to
// grey, differing pixels in red, pixels not compared tinted blue, and a yellow
// box around the differences.
func DiffImage(want, got *image.RGBA, r Rules, at Regions) *image.RGBA {
	d, states := compare(want, got, r, at, true)
	gb := got.Bounds()
	out := image.NewRGBA(image.Rect(0, 0, gb.Dx(), gb.Dy()))
	for y := 0; y < gb.Dy(); y++ {
		for x := 0; x < gb.Dx(); x++ {
			i := got.PixOffset(gb.Min.X+x, gb.Min.Y+y)
			lum := (299*int(got.Pix[i]) + 587*int(got.Pix[i+1]) + 114*int(got.Pix[i+2])) / 1000
			v := uint8(150 + lum*90/255) // faded: the differences stand out
			c := color.RGBA{v, v, v, 255}
			if states != nil {
				switch states[y*gb.Dx()+x] {
				case 1:
					c = diffRed
				case 2:
					c = color.RGBA{uint8((int(v) + int(diffIgnore.R)) / 2), uint8((int(v) + int(diffIgnore.G)) / 2), uint8((int(v) + int(diffIgnore.B)) / 2), 255}
				}
			}
			out.SetRGBA(x, y, c)
		}
	}
	if d.Pixels > 0 {
		box := d.Bounds.Inset(-4).Intersect(out.Bounds())
		rect(out, box, diffBox, 2)
	}
	return out
}

// CompareImage puts the recorded screen, the replayed one and the diff side
// by side, each with a caption.
func CompareImage(want, got, diff *image.RGBA, captions [3]string) *image.RGBA {
	const gap, head = 8, 22
	imgs := []*image.RGBA{want, got, diff}
	w, h := 0, 0
	for _, im := range imgs {
		w += im.Bounds().Dx()
		h = max(h, im.Bounds().Dy())
	}
	w += gap * (len(imgs) + 1)
	out := image.NewRGBA(image.Rect(0, 0, w, h+head+gap))
	draw.Draw(out, out.Bounds(), &image.Uniform{color.RGBA{36, 41, 47, 255}}, image.Point{}, draw.Src)
	x := gap
	for i, im := range imgs {
		b := im.Bounds()
		draw.Draw(out, image.Rect(x, head, x+b.Dx(), head+b.Dy()), im, b.Min, draw.Src)
		label(out, x, head-7, captions[i])
		x += b.Dx() + gap
	}
	return out
}

func label(img *image.RGBA, x, y int, s string) {
	dr := font.Drawer{Dst: img, Src: image.NewUniform(color.RGBA{240, 240, 240, 255}), Face: basicfont.Face7x13,
		Dot: fixed.P(x, y)}
	dr.DrawString(s)
}

func rect(img *image.RGBA, r image.Rectangle, c color.RGBA, width int) {
	for t := 0; t < width; t++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, r.Min.Y+t, c)
			img.SetRGBA(x, r.Max.Y-1-t, c)
		}
		for y := r.Min.Y; y < r.Max.Y; y++ {
			img.SetRGBA(r.Min.X+t, y, c)
			img.SetRGBA(r.Max.X-1-t, y, c)
		}
	}
}

// MaxPixels bounds a screenshot read from a trace: the largest screen
// agentbox makes. A PNG's header names its size before any pixel is
// decoded, so a crafted one cannot make the decoder allocate more.
const MaxPixels = observe.MaxScreenPixels

// LoadTracePNG reads a screenshot of a trace as RGBA: rel is the path the
// trace names, read only if it is a plain file inside dir (trace.OpenFile).
func LoadTracePNG(dir, rel string) (*image.RGBA, error) {
	f, err := trace.OpenFile(dir, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return decodePNG(f, rel)
}

func decodePNG(f io.ReadSeeker, name string) (*image.RGBA, error) {
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > MaxPixels {
		return nil, fmt.Errorf("%s: %dx%d is larger than any screen (at most %d pixels)", name, cfg.Width, cfg.Height, MaxPixels)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	img, err := png.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return ToRGBA(img), nil
}

// ToRGBA returns img as *image.RGBA, converting when needed.
func ToRGBA(img image.Image) *image.RGBA {
	if r, ok := img.(*image.RGBA); ok {
		return r
	}
	b := img.Bounds()
	r := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(r, r.Bounds(), img, b.Min, draw.Src)
	return r
}

// SavePNG writes an image.
func SavePNG(path string, img image.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(f, img); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
