package llm

import (
	"encoding/base64"

	"github.com/codegirl-games/agentbox/observe"
)

// PNGBase64 encodes a frame as base64 PNG. The PNG is the frame's cached
// encoding, shared with the trace.
func PNGBase64(f *observe.Frame) (string, error) {
	data, err := f.PNG()
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(data), nil
}

// Target sizes computer-use models are trained on (Anthropic's guidance):
// screenshots larger than these are scaled down to the one with the
// closest aspect ratio, and the model's coordinates are mapped back.
var Targets = []struct {
	Name          string
	Width, Height int
}{
	{"XGA", 1024, 768},   // 4:3
	{"WXGA", 1280, 800},  // 16:10
	{"FWXGA", 1366, 768}, // ~16:9
}

// ScaleFor returns the size a width×height screen is shown at: itself if
// it fits XGA-class sizes, else the target with the nearest aspect ratio
// (keeping the screen's aspect ratio inside it).
func ScaleFor(width, height int) (int, int) {
	ratio := float64(width) / float64(height)
	best, bestDiff := Targets[0], 1e9
	for _, t := range Targets {
		d := float64(t.Width)/float64(t.Height) - ratio
		if d < 0 {
			d = -d
		}
		if d < bestDiff {
			best, bestDiff = t, d
		}
	}
	if width <= best.Width && height <= best.Height {
		return width, height
	}
	w, h := best.Width, height*best.Width/width
	if h > best.Height {
		w, h = width*best.Height/height, best.Height
	}
	return w, h
}

// ModelView is the view a model is shown: the whole screen scaled to
// ScaleFor's size. Its ToScreen maps the model's coordinates back exactly.
func ModelView(f *observe.Frame) (*observe.View, error) {
	w, h := ScaleFor(f.Width, f.Height)
	return observe.NewView(f, nil, 0, w, h)
}
