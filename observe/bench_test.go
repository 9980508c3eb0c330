package observe

import (
	"bytes"
	"image/png"
	"path/filepath"
	"sync"
	"testing"
)

// BenchmarkPNG encodes screens with Frame.PNG and, as the reference in
// the same run, with image/png at BestSpeed (what Frame.PNG used before):
// the mover's screen (testdata), a browser's (docs/live.png) and a
// synthetic gradient at two sizes.
func BenchmarkPNG(b *testing.B) {
	frames := []struct {
		name string
		f    *Frame
	}{
		{"mover-640x480", loadFrame(b, filepath.Join("testdata", "mover.png"))},
		{"browser-1400x717", loadFrame(b, filepath.Join("..", "docs", "live.png"))},
		{"gradient-640x480", testFrame(640, 480)},
		{"gradient-1920x1080", testFrame(1920, 1080)},
	}
	for _, fr := range frames {
		f := fr.f
		b.Run(fr.name+"/frame", func(b *testing.B) {
			var n int
			for i := 0; i < b.N; i++ {
				f.once = sync.Once{}
				data, err := f.PNG()
				if err != nil {
					b.Fatal(err)
				}
				n = len(data)
			}
			b.ReportMetric(float64(n), "bytes")
		})
		b.Run(fr.name+"/image-png", func(b *testing.B) {
			var n int
			for i := 0; i < b.N; i++ {
				var buf bytes.Buffer
				if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, f.Image()); err != nil {
					b.Fatal(err)
				}
				n = buf.Len()
			}
			b.ReportMetric(float64(n), "bytes")
		})
	}
}

func BenchmarkView1080ToFWXGA(b *testing.B) {
	f := testFrame(1920, 1080)
	for i := 0; i < b.N; i++ {
		NewView(f, nil, 0, 1366, 768)
	}
}
