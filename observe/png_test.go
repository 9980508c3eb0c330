package observe

import (
	"bytes"
	"image"
	"image/draw"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// loadFrame reads a PNG as an opaque frame.
func loadFrame(t testing.TB, path string) *Frame {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Skipf("%v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	r := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(r, r.Rect, img, b.Min, draw.Src)
	return &Frame{Width: b.Dx(), Height: b.Dy(), Pix: r.Pix}
}

// decodeRGBA decodes a PNG back into RGBA pixels.
func decodeRGBA(t *testing.T, data []byte) *image.RGBA {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("image/png cannot read what PNG wrote: %v", err)
	}
	b := img.Bounds()
	r := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(r, r.Rect, img, b.Min, draw.Src)
	return r
}

// TestPNGIsExact checks that every frame's PNG decodes, with image/png,
// to the frame's own pixels, and that a frame that is not opaque keeps
// its alpha.
func TestPNGIsExact(t *testing.T) {
	noise := func(w, h int, alpha bool) *Frame {
		r := rand.New(rand.NewPCG(uint64(w), uint64(h)))
		pix := make([]byte, 4*w*h)
		for i := range pix {
			pix[i] = byte(r.Uint32())
			if i%4 == 3 && !alpha {
				pix[i] = 0xff
			}
		}
		return &Frame{Width: w, Height: h, Pix: pix}
	}
	translucent := testFrame(64, 48)
	translucent.Pix[4*(20*64+30)+3] = 0x80
	tests := []struct {
		name string
		f    *Frame
	}{
		{"gradient 640x480", testFrame(640, 480)},
		{"gradient 1920x1080", testFrame(1920, 1080)},
		{"one pixel", testFrame(1, 1)},
		{"one row", testFrame(333, 1)},
		{"one column", testFrame(1, 257)},
		{"noise 97x61", noise(97, 61, false)},
		{"noise with alpha 50x40", noise(50, 40, true)},
		{"one translucent pixel", translucent},
		{"the mover", loadFrame(t, filepath.Join("testdata", "mover.png"))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, err := tc.f.PNG()
			if err != nil {
				t.Fatal(err)
			}
			got := decodeRGBA(t, data)
			if got.Rect.Dx() != tc.f.Width || got.Rect.Dy() != tc.f.Height {
				t.Fatalf("decoded %v, want %dx%d", got.Rect, tc.f.Width, tc.f.Height)
			}
			want := decodeRGBA(t, mustStdPNG(t, tc.f)) // image/png's reading of the same pixels
			if !bytes.Equal(got.Pix, want.Pix) {
				t.Fatal("the PNG's pixels differ from the frame's")
			}
		})
	}
}

func mustStdPNG(t *testing.T, f *Frame) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, f.Image()); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestPNGOfNoFrame checks that an empty frame is an error, as image/png
// makes it.
func TestPNGOfNoFrame(t *testing.T) {
	for _, f := range []*Frame{{}, {Width: 10, Height: 0}, {Width: 10, Height: 10, Pix: make([]byte, 4)}} {
		if _, err := f.PNG(); err == nil {
			t.Errorf("%dx%d with %d bytes: no error", f.Width, f.Height, len(f.Pix))
		}
	}
}

// TestPNGConcurrent encodes frames from many goroutines at once: the
// pooled deflate state is never shared.
func TestPNGConcurrent(t *testing.T) {
	frames := []*Frame{testFrame(320, 200), loadFrame(t, filepath.Join("testdata", "mover.png"))}
	want := make([][]byte, len(frames))
	for i, f := range frames {
		want[i] = decodeRGBA(t, mustStdPNG(t, f)).Pix
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				src := frames[(g+i)%len(frames)]
				f := &Frame{Width: src.Width, Height: src.Height, Pix: src.Pix}
				data, err := f.PNG()
				if err != nil {
					errs <- err.Error()
					return
				}
				img, err := png.Decode(bytes.NewReader(data))
				if err != nil {
					errs <- err.Error()
					return
				}
				r := image.NewRGBA(img.Bounds())
				draw.Draw(r, r.Rect, img, image.Point{}, draw.Src)
				if !bytes.Equal(r.Pix, want[(g+i)%len(frames)]) {
					errs <- "pixels differ"
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// FuzzPNG encodes frames made of arbitrary bytes (the first byte picks the
// width, the second whether the alpha is kept) and checks that image/png
// reads back exactly their pixels.
func FuzzPNG(f *testing.F) {
	f.Add([]byte{3, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add(append([]byte{40, 0}, bytes.Repeat([]byte{200, 10, 10, 255}, 40*20)...))
	f.Add([]byte{1, 1, 9, 9, 9, 7})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 6 {
			return
		}
		w := int(data[0])%64 + 1
		keepAlpha := data[1]&1 == 1
		body := data[2:]
		h := len(body) / (4 * w)
		if h == 0 || h > 256 {
			return
		}
		pix := append([]byte(nil), body[:4*w*h]...)
		if !keepAlpha {
			for i := 3; i < len(pix); i += 4 {
				pix[i] = 0xff
			}
		}
		fr := &Frame{Width: w, Height: h, Pix: pix}
		enc, err := fr.PNG()
		if err != nil {
			t.Fatal(err)
		}
		got := decodeRGBA(t, enc)
		want := decodeRGBA(t, mustStdPNG(t, fr))
		if !bytes.Equal(got.Pix, want.Pix) {
			t.Fatalf("%dx%d: the PNG's pixels differ from the frame's", w, h)
		}
	})
}
