package live

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"image"
	"image/png"
	"sync"
	"time"

	"golang.org/x/image/draw"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
)

// update is one change of a view's screen: the frame, and the rectangle
// that differs from the one before. Its two encodings (the rectangle, for
// pages that have the frame before; the whole frame, for those that do
// not) are made once, when the first page needs them.
type update struct {
	seq   int64
	frame *observe.Frame
	rect  action.Rect // what changed; the whole frame when there was none before
	full  bool        // rect is the whole frame
	cur   action.Point
	// before is when the look that still saw the previous screen began,
	// seen when this one ended: the change happened in between. look is
	// how long this look took.
	before, seen time.Time
	look         time.Duration

	deltaOnce, fullOnce sync.Once
	delta, whole        []byte
}

func newUpdate(seq int64, prev, f *observe.Frame, cur action.Point, before, seen time.Time, look time.Duration) *update {
	u := &update{seq: seq, frame: f, cur: cur, before: before, seen: seen, look: look}
	r, _, same := observe.ChangedRect(prev, f)
	if prev == nil || !same || r == (action.Rect{}) {
		r, u.full = action.Rect{0, 0, f.Width, f.Height}, true
	}
	u.rect = r
	return u
}

// frameHeader is the JSON before a frame message's PNG.
type frameHeader struct {
	Seq  int64  `json:"seq"`
	X    int    `json:"x"`
	Y    int    `json:"y"`
	W    int    `json:"w"`
	H    int    `json:"h"`
	SW   int    `json:"sw"` // the screen
	SH   int    `json:"sh"`
	Full bool   `json:"full"`
	Cur  [2]int `json:"cur"`
	// Before and Seen bound when the screen changed (Unix milliseconds):
	// after Before, by Seen. EncMS is how long encoding took.
	Before float64 `json:"before"`
	Seen   float64 `json:"seen"`
	EncMS  float64 `json:"enc_ms"`
	LookMS float64 `json:"look_ms"`
}

func unixMS(t time.Time) float64 { return float64(t.UnixMicro()) / 1000 }

// message is the binary WebSocket message for a page that has the
// previous frame (whole false) or not: u32 header length, header JSON,
// the PNG of the rectangle.
func (u *update) message(whole bool) []byte {
	if whole || u.full {
		u.fullOnce.Do(func() { u.whole = u.encode(action.Rect{0, 0, u.frame.Width, u.frame.Height}, true) })
		return u.whole
	}
	u.deltaOnce.Do(func() { u.delta = u.encode(u.rect, false) })
	return u.delta
}

func (u *update) encode(r action.Rect, full bool) []byte {
	t := time.Now()
	img := u.frame.Image().SubImage(image.Rect(r[0], r[1], r[2], r[3])).(*image.RGBA)
	var pb bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&pb, img); err != nil {
		return nil
	}
	h := frameHeader{Seq: u.seq, X: r[0], Y: r[1], W: r.Dx(), H: r.Dy(), SW: u.frame.Width, SH: u.frame.Height, Full: full,
		Cur: [2]int{u.cur.X, u.cur.Y}, Before: unixMS(u.before), Seen: unixMS(u.seen), EncMS: float64(time.Since(t).Microseconds()) / 1000,
		LookMS: float64(u.look.Microseconds()) / 1000}
	return packed(h, pb.Bytes())
}

// packed is u32 length, JSON, bytes.
func packed(h any, data []byte) []byte {
	js, _ := json.Marshal(h)
	out := make([]byte, 4, 4+len(js)+len(data))
	binary.BigEndian.PutUint32(out, uint32(len(js)))
	out = append(out, js...)
	return append(out, data...)
}

// thumbWidth is the width of a grid's thumbnails.
const thumbWidth = 320

// thumbnail is the frame scaled to thumbWidth (never up), as PNG.
func thumbnail(f *observe.Frame) []byte {
	src := f.Image()
	w, h := f.Width, f.Height
	if w > thumbWidth {
		h = max(1, h*thumbWidth/w)
		w = thumbWidth
	}
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.ApproxBiLinear.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Src, nil)
	var pb bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&pb, dst); err != nil {
		return nil
	}
	return pb.Bytes()
}
