package export

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/draw"
	"image/gif"
	"image/png"
	"io"
	"os"
	"sort"
	"time"
)

// writeAnimated writes a GIF or APNG in pure Go. Each frame after the first
// holds only the rectangle that changed, so long runs of a mostly still
// screen stay small.
func writeAnimated(ctx context.Context, format string, frames []Frame, out string, w, h int, overwrite bool) error {
	tmp, err := create(out, overwrite)
	if err != nil {
		return err
	}
	defer tmp.Abort()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	var enc animEncoder
	if format == GIF {
		enc = &gifEncoder{w: w, h: h}
	} else {
		enc = &apngEncoder{out: bw, w: w, h: h, n: len(frames)}
	}
	var prev *image.RGBA
	var prevPath string
	var cur *image.RGBA
	for i, f := range frames {
		if i%32 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if f.Path != prevPath {
			if cur, err = loadRGBA(f.Path); err != nil {
				return err
			}
			if cur.Bounds().Dx() != w || cur.Bounds().Dy() != h {
				return fmt.Errorf("export: %s is %dx%d, the first frame was %dx%d", f.Path, cur.Bounds().Dx(), cur.Bounds().Dy(), w, h)
			}
		}
		r := image.Rect(0, 0, w, h)
		if prev != nil {
			r = changed(prev, cur)
			if r.Empty() {
				r = image.Rect(0, 0, 1, 1) // an unchanged frame still takes its time
			}
		}
		if err := enc.frame(cur.SubImage(r).(*image.RGBA), f.Dur); err != nil {
			return err
		}
		prev, prevPath = cur, f.Path
	}
	if g, ok := enc.(*gifEncoder); ok {
		if err := gif.EncodeAll(bw, &g.g); err != nil {
			return fmt.Errorf("export: gif: %w", err)
		}
	} else if err := enc.(*apngEncoder).finish(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return writeError(out, tmp.Name(), err)
	}
	return commit(tmp, out)
}

type animEncoder interface {
	frame(img *image.RGBA, d time.Duration) error
}

func loadRGBA(path string) (*image.RGBA, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		return nil, fmt.Errorf("export: %s: %w", path, err)
	}
	if err := checkSize(path, cfg); err != nil {
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	img, err := png.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("export: %s: %w", path, err)
	}
	if r, ok := img.(*image.RGBA); ok && r.Rect.Min == (image.Point{}) {
		return r, nil
	}
	b := img.Bounds()
	r := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(r, r.Bounds(), img, b.Min, draw.Src)
	return r, nil
}

// changed is the bounding box of the pixels that differ.
func changed(a, b *image.RGBA) image.Rectangle {
	w, h := b.Rect.Dx(), b.Rect.Dy()
	minX, minY, maxX, maxY := w, h, -1, -1
	for y := 0; y < h; y++ {
		ra := a.Pix[y*a.Stride : y*a.Stride+4*w]
		rb := b.Pix[y*b.Stride : y*b.Stride+4*w]
		if bytes.Equal(ra, rb) {
			continue
		}
		minY, maxY = min(minY, y), max(maxY, y)
		for x := 0; x < w; x++ {
			if ra[4*x] != rb[4*x] || ra[4*x+1] != rb[4*x+1] || ra[4*x+2] != rb[4*x+2] {
				minX, maxX = min(minX, x), max(maxX, x)
			}
		}
	}
	if maxY < 0 {
		return image.Rectangle{}
	}
	return image.Rect(minX, minY, maxX+1, maxY+1)
}

// ---- GIF ----

type gifEncoder struct {
	g    gif.GIF
	w, h int
	// late carries rounding of centisecond delays over to the next frame.
	late time.Duration
}

func (e *gifEncoder) frame(img *image.RGBA, d time.Duration) error {
	if len(e.g.Image) == 0 {
		e.g.Config = image.Config{Width: e.w, Height: e.h, ColorModel: nil}
		e.g.LoopCount = 0
	}
	// GIF delays are centiseconds and browsers treat less than 2 as 10:
	// round, keep at least 2, and carry the error so the total stays right.
	want := d + e.late
	cs := int((want + 5*time.Millisecond) / (10 * time.Millisecond))
	if cs < 2 {
		cs = 2
	}
	e.late = want - time.Duration(cs)*10*time.Millisecond
	e.g.Image = append(e.g.Image, quantize256(img))
	e.g.Delay = append(e.g.Delay, cs)
	e.g.Disposal = append(e.g.Disposal, gif.DisposalNone)
	return nil
}

// quantize256 maps an image onto at most 256 colours: its own colours when
// there are that few (screens of flat UI usually), else a median cut.
func quantize256(img *image.RGBA) *image.Paletted {
	b := img.Bounds()
	hist := map[uint32]int{}
	stride := 1
	if n := b.Dx() * b.Dy(); n > 400_000 {
		stride = n / 400_000
	}
	k := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		row := img.Pix[img.PixOffset(b.Min.X, y):]
		for x := 0; x < b.Dx(); x++ {
			if k%stride == 0 {
				hist[uint32(row[4*x])<<16|uint32(row[4*x+1])<<8|uint32(row[4*x+2])]++
			}
			k++
		}
	}
	var pal color.Palette
	exact := len(hist) <= 256
	if exact {
		keys := make([]uint32, 0, len(hist))
		for c := range hist {
			keys = append(keys, c)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
		for _, c := range keys {
			pal = append(pal, color.RGBA{uint8(c >> 16), uint8(c >> 8), uint8(c), 255})
		}
	} else {
		pal = medianCut(hist, 256)
	}
	out := image.NewPaletted(b, pal)
	index := map[uint32]uint8{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		row := img.Pix[img.PixOffset(b.Min.X, y):]
		orow := out.Pix[out.PixOffset(b.Min.X, y):]
		for x := 0; x < b.Dx(); x++ {
			c := uint32(row[4*x])<<16 | uint32(row[4*x+1])<<8 | uint32(row[4*x+2])
			i, ok := index[c]
			if !ok {
				i = uint8(pal.Index(color.RGBA{uint8(c >> 16), uint8(c >> 8), uint8(c), 255}))
				index[c] = i
			}
			orow[x] = i
		}
	}
	return out
}

type colorCount struct {
	c [3]uint8
	n int
}

// medianCut splits the colour histogram into at most n boxes along their
// widest channel, at the weighted median, and returns each box's mean.
func medianCut(hist map[uint32]int, n int) color.Palette {
	all := make([]colorCount, 0, len(hist))
	for c, k := range hist {
		all = append(all, colorCount{[3]uint8{uint8(c >> 16), uint8(c >> 8), uint8(c)}, k})
	}
	boxes := [][]colorCount{all}
	for len(boxes) < n {
		// Split the box with the largest spread × population.
		best, bestScore, bestCh := -1, 0, 0
		for i, bx := range boxes {
			if len(bx) < 2 {
				continue
			}
			ch, spread := widest(bx)
			pop := 0
			for _, c := range bx {
				pop += c.n
			}
			if score := spread * pop; score > bestScore {
				best, bestScore, bestCh = i, score, ch
			}
		}
		if best < 0 {
			break
		}
		bx := boxes[best]
		sort.Slice(bx, func(i, j int) bool { return bx[i].c[bestCh] < bx[j].c[bestCh] })
		total := 0
		for _, c := range bx {
			total += c.n
		}
		half, acc, cut := total/2, 0, 1
		for i, c := range bx {
			acc += c.n
			if acc >= half {
				cut = max(1, min(i+1, len(bx)-1))
				break
			}
		}
		boxes[best] = bx[:cut]
		boxes = append(boxes, bx[cut:])
	}
	pal := make(color.Palette, 0, len(boxes))
	for _, bx := range boxes {
		var r, g, b, t int
		for _, c := range bx {
			r += int(c.c[0]) * c.n
			g += int(c.c[1]) * c.n
			b += int(c.c[2]) * c.n
			t += c.n
		}
		if t == 0 {
			continue
		}
		pal = append(pal, color.RGBA{uint8(r / t), uint8(g / t), uint8(b / t), 255})
	}
	return pal
}

func widest(bx []colorCount) (int, int) {
	lo := [3]int{255, 255, 255}
	hi := [3]int{}
	for _, c := range bx {
		for k := 0; k < 3; k++ {
			lo[k] = min(lo[k], int(c.c[k]))
			hi[k] = max(hi[k], int(c.c[k]))
		}
	}
	ch, spread := 0, -1
	for k := 0; k < 3; k++ {
		if hi[k]-lo[k] > spread {
			ch, spread = k, hi[k]-lo[k]
		}
	}
	return ch, spread
}

// ---- APNG ----

// apngEncoder writes an animated PNG: IHDR and acTL, then per frame an fcTL
// and the image data (IDAT for the first frame, fdAT after), then IEND.
type apngEncoder struct {
	out  io.Writer
	w, h int
	n    int
	seq  uint32
	done int
	err  error
}

var pngSignature = []byte("\x89PNG\r\n\x1a\n")

func (e *apngEncoder) chunk(typ string, data []byte) {
	if e.err != nil {
		return
	}
	var hdr [8]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(len(data)))
	copy(hdr[4:], typ)
	crc := crc32.NewIEEE()
	crc.Write(hdr[4:])
	crc.Write(data)
	var tail [4]byte
	binary.BigEndian.PutUint32(tail[:], crc.Sum32())
	for _, b := range [][]byte{hdr[:], data, tail[:]} {
		if _, err := e.out.Write(b); err != nil {
			e.err = fmt.Errorf("export: %w", err)
			return
		}
	}
}

// opaqueRGBA makes image/png write RGB (colour type 2) for every frame, so
// all frames share the IHDR's format.
type opaqueRGBA struct{ *image.RGBA }

func (opaqueRGBA) Opaque() bool { return true }

func (e *apngEncoder) frame(img *image.RGBA, d time.Duration) error {
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	// Encode the region as its own PNG from (0,0) and lift its chunks.
	sub := image.NewRGBA(image.Rect(0, 0, img.Rect.Dx(), img.Rect.Dy()))
	draw.Draw(sub, sub.Rect, img, img.Rect.Min, draw.Src)
	if err := enc.Encode(&buf, opaqueRGBA{sub}); err != nil {
		return fmt.Errorf("export: png: %w", err)
	}
	ihdr, idat, err := pngChunks(buf.Bytes())
	if err != nil {
		return err
	}
	if e.done == 0 {
		e.out.Write(pngSignature)
		full := append([]byte(nil), ihdr...)
		binary.BigEndian.PutUint32(full[0:], uint32(e.w))
		binary.BigEndian.PutUint32(full[4:], uint32(e.h))
		e.chunk("IHDR", full)
		actl := make([]byte, 8)
		binary.BigEndian.PutUint32(actl[0:], uint32(e.n))
		binary.BigEndian.PutUint32(actl[4:], 0) // loop forever
		e.chunk("acTL", actl)
	}
	num, den := delay(d)
	fc := make([]byte, 26)
	binary.BigEndian.PutUint32(fc[0:], e.seq)
	binary.BigEndian.PutUint32(fc[4:], uint32(img.Rect.Dx()))
	binary.BigEndian.PutUint32(fc[8:], uint32(img.Rect.Dy()))
	binary.BigEndian.PutUint32(fc[12:], uint32(img.Rect.Min.X))
	binary.BigEndian.PutUint32(fc[16:], uint32(img.Rect.Min.Y))
	binary.BigEndian.PutUint16(fc[20:], num)
	binary.BigEndian.PutUint16(fc[22:], den)
	fc[24] = 0 // dispose: none
	fc[25] = 0 // blend: source
	e.seq++
	e.chunk("fcTL", fc)
	if e.done == 0 {
		e.chunk("IDAT", idat)
	} else {
		fd := make([]byte, 4+len(idat))
		binary.BigEndian.PutUint32(fd, e.seq)
		copy(fd[4:], idat)
		e.seq++
		e.chunk("fdAT", fd)
	}
	e.done++
	return e.err
}

// delay expresses d as a fraction of a second that fits 16 bits.
func delay(d time.Duration) (uint16, uint16) {
	ms := d.Milliseconds()
	switch {
	case ms <= 65535:
		return uint16(max(ms, 1)), 1000
	case ms/10 <= 65535:
		return uint16(ms / 10), 100
	}
	return uint16(min(d/time.Second, 65535)), 1
}

func (e *apngEncoder) finish() error {
	if e.done != e.n {
		return fmt.Errorf("export: apng: %d frames written, %d announced", e.done, e.n)
	}
	e.chunk("IEND", nil)
	return e.err
}

// pngChunks returns the IHDR data and the concatenated IDAT data of a PNG.
func pngChunks(b []byte) (ihdr, idat []byte, err error) {
	if !bytes.HasPrefix(b, pngSignature) {
		return nil, nil, fmt.Errorf("export: not a PNG")
	}
	b = b[len(pngSignature):]
	for len(b) >= 12 {
		n := int(binary.BigEndian.Uint32(b))
		if 12+n > len(b) {
			break
		}
		typ, data := string(b[4:8]), b[8:8+n]
		switch typ {
		case "IHDR":
			ihdr = data
		case "IDAT":
			idat = append(idat, data...)
		}
		b = b[12+n:]
	}
	if ihdr == nil || idat == nil {
		return nil, nil, fmt.Errorf("export: PNG without IHDR or IDAT")
	}
	return ihdr, idat, nil
}
