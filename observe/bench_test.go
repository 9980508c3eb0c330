package observe

import (
	"sync"
	"testing"
)

func BenchmarkPNG(b *testing.B) {
	for _, sz := range [][2]int{{640, 480}, {1920, 1080}} {
		f := testFrame(sz[0], sz[1])
		b.Run("", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				f.once = sync.Once{}
				f.PNG()
			}
		})
	}
}

func BenchmarkView1080ToFWXGA(b *testing.B) {
	f := testFrame(1920, 1080)
	for i := 0; i < b.N; i++ {
		NewView(f, nil, 0, 1366, 768)
	}
}
