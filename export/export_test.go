package export

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// traceWith writes observations at the given times (ms), each a new frame.
func traceWith(t *testing.T, times []float64) *trace.Trace {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	tw, err := trace.Create(dir, trace.Run{ID: "x"}, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, ms := range times {
		img := image.NewRGBA(image.Rect(0, 0, 31, 17))
		for p := 0; p < len(img.Pix); p += 4 {
			img.Pix[p], img.Pix[p+1], img.Pix[p+2], img.Pix[p+3] = uint8(20*i), 100, 200, 255
		}
		img.SetRGBA(i, i, color.RGBA{255, 255, 255, 255})
		f := &observe.Frame{Width: 31, Height: 17, Pix: img.Pix, Hash: uint64(i + 1)}
		a := action.Action{Kind: action.Wait, MS: 1}
		tw.Record(trace.Record{Type: trace.TypeStep, Step: i + 1, TMS: ms,
			Observation: &trace.Observation{Screenshot: tw.Screenshot(i+1, f), FrameHash: trace.FrameHash(f.Hash), Width: 31, Height: 17},
			Action:      &a})
	}
	if err := tw.Finish(nil); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestFrames(t *testing.T) {
	tr := traceWith(t, []float64{1000, 1000.4, 1250, 2000})
	// Boundaries are whole milliseconds and frames end where the next
	// starts: the first frame (0.4 ms) gets the minimum 1 ms, taken from the
	// second.
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"real timing", Options{}, "[1:1ms 2:249ms 3:750ms 4:1s]"},
		{"twice as fast", Options{Speed: 2}, "[1:1ms 2:124ms 3:375ms 4:1s]"},
		{"4 fps", Options{FPS: 4}, "[1:250ms 3:250ms 3:250ms 3:250ms 4:250ms 4:250ms 4:250ms 4:250ms]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fr, err := Frames(tr, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			var end time.Duration
			for _, f := range fr {
				got = append(got, fmt.Sprintf("%d:%v", f.Step, f.Dur))
				if f.Start != end {
					t.Errorf("frame %d starts at %v, want %v", f.Step, f.Start, end)
				}
				end += f.Dur
			}
			if fmt.Sprint(got) != tt.want {
				t.Errorf("frames %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFormatOf(t *testing.T) {
	for name, want := range map[string]string{"a.gif": GIF, "a.APNG": APNG, "a.png": APNG, "a.mp4": MP4, "a.webm": WebM, "a.avi": ""} {
		got, err := FormatOf(name)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("%s: %q %v", name, got, err)
		}
	}
}

func TestWriteGIFAndAPNG(t *testing.T) {
	tr := traceWith(t, []float64{0, 100, 200, 300, 400})
	out := t.TempDir()
	st, err := Write(t.Context(), tr, filepath.Join(out, "a.gif"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(out, "a.gif"))
	g, err := gif.DecodeAll(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Image) != 5 || st.Frames != 5 || g.Config.Width != 31 || g.Config.Height != 17 {
		t.Errorf("gif: %d frames (%d), %dx%d", len(g.Image), st.Frames, g.Config.Width, g.Config.Height)
	}
	// Frames after the first hold only what changed, and the pixels are exact
	// (few colours: no quantisation loss).
	if b := g.Image[1].Bounds(); b != image.Rect(0, 0, 31, 17) && b.Dx()*b.Dy() > 31*17 {
		t.Errorf("second frame %v", b)
	}
	if r, gg, b, _ := g.Image[0].At(0, 0).RGBA(); r>>8 != 255 || gg>>8 != 255 || b>>8 != 255 {
		t.Errorf("pixel (0,0) of frame 1 is %d,%d,%d", r>>8, gg>>8, b>>8)
	}
	if _, err := Write(t.Context(), tr, filepath.Join(out, "a.apng"), Options{}); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(filepath.Join(out, "a.apng"))
	if !bytes.HasPrefix(data, pngSignature) || bytes.Count(data, []byte("fcTL")) != 5 || bytes.Count(data, []byte("fdAT")) != 4 {
		t.Errorf("apng chunks: fcTL %d fdAT %d", bytes.Count(data, []byte("fcTL")), bytes.Count(data, []byte("fdAT")))
	}
}

func TestMedianCut(t *testing.T) {
	hist := map[uint32]int{}
	for i := 0; i < 4096; i++ {
		hist[uint32(i*4099)&0xffffff] = 1 + i%7
	}
	pal := medianCut(hist, 256)
	if len(pal) != 256 {
		t.Errorf("%d colours, want 256", len(pal))
	}
}

// TestWriteKeepsExisting: a video is never written over a file that
// exists unless Overwrite says so, and an error about the file names the
// user's path, never the temporary name it is written under first.
func TestWriteKeepsExisting(t *testing.T) {
	tr := traceWith(t, []float64{0, 40, 80})
	dir := t.TempDir()
	p := filepath.Join(dir, "run.gif")
	if err := os.WriteFile(p, []byte("the user's"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Write(context.Background(), tr, p, Options{})
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), p+" exists") {
		t.Fatalf("Write over an existing file: %v; want an error naming %s that wraps fs.ErrExist", err, p)
	}
	if b, _ := os.ReadFile(p); string(b) != "the user's" {
		t.Errorf("the existing file was replaced")
	}
	if _, err := Write(context.Background(), tr, p, Options{Overwrite: true}); err != nil {
		t.Fatalf("with Overwrite (the control): %v", err)
	}
	if b, _ := os.ReadFile(p); !bytes.HasPrefix(b, []byte("GIF8")) {
		t.Errorf("with Overwrite the file is not the GIF: %q…", b[:min(len(b), 8)])
	}
	if got, _ := os.ReadDir(dir); len(got) != 1 {
		t.Errorf("the directory holds %d entries, want the video alone", len(got))
	}

	missing := filepath.Join(dir, "missing", "run.gif")
	_, err = Write(context.Background(), tr, missing, Options{})
	if err == nil || !strings.Contains(err.Error(), missing) || strings.Contains(err.Error(), ".tmp") {
		t.Errorf("writing into a missing directory: %v; want an error naming %s and no temporary name", err, missing)
	}
}
