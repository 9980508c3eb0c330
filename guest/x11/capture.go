package x11

import (
	"context"
	"fmt"
	"sync"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/shm"
	"github.com/jezek/xgb/xproto"
	"golang.org/x/sys/unix"
)

// Frame is a captured image: Height rows of Width pixels, each pixel four
// bytes B, G, R, X (X undefined), rows Stride bytes apart. X and Y are the
// position of the image on the screen.
//
// Gen is set by CaptureDamaged only: two of its frames with the same Gen
// hold the same pixels.
type Frame struct {
	X, Y, Width, Height, Stride int
	Pix                         []byte
	Gen                         uint64
}

// coreBandBytes bounds the size of one core GetImage reply: larger captures
// are split into bands of whole rows, all requested before the first reply is
// read, so that xgb never allocates one huge reply buffer (a 4K screen is
// 33 MB). The protocol's maximum request length bounds requests, not
// replies, so the bands need not be that small; measured at 1920×1080 on
// Xvfb 21.1.7: 64 KiB bands 17 ms, 256 KiB 10 ms, 1 MiB 8 ms, 4 MiB 4.1 ms,
// one reply 3.8 ms (BenchmarkCoreBands).
var coreBandBytes = 4 << 20

// captureState is the MIT-SHM segment, guarded by the capture lane.
type captureState struct {
	xc  *xgb.Conn
	id  int
	mem []byte // our mapping; nil when no segment
	seg shm.Seg

	failMu sync.Mutex
	fail   error // why MIT-SHM is not used (sticky)
}

func (s *captureState) setFailure(err error) {
	s.failMu.Lock()
	s.fail = err
	s.failMu.Unlock()
}

func (s *captureState) failure() error {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	return s.fail
}

// checkFormat verifies that the root window is depth 24 TrueColor stored as
// 32-bit little-endian pixels with the usual masks, i.e. BGRX in memory.
func checkFormat(setup *xproto.SetupInfo, scr *xproto.ScreenInfo) error {
	if scr.RootDepth != 24 {
		return fmt.Errorf("%w: root depth %d", ErrUnsupportedFormat, scr.RootDepth)
	}
	if setup.ImageByteOrder != xproto.ImageOrderLSBFirst {
		return fmt.Errorf("%w: image byte order MSB first", ErrUnsupportedFormat)
	}
	bppOK := false
	for _, f := range setup.PixmapFormats {
		if f.Depth == 24 {
			bppOK = f.BitsPerPixel == 32 && f.ScanlinePad == 32
			if !bppOK {
				return fmt.Errorf("%w: depth 24 stored in %d bits per pixel", ErrUnsupportedFormat, f.BitsPerPixel)
			}
		}
	}
	if !bppOK {
		return fmt.Errorf("%w: no pixmap format for depth 24", ErrUnsupportedFormat)
	}
	for _, d := range scr.AllowedDepths {
		for _, v := range d.Visuals {
			if v.VisualId != scr.RootVisual {
				continue
			}
			if v.Class != xproto.VisualClassTrueColor || v.RedMask != 0xff0000 || v.GreenMask != 0xff00 || v.BlueMask != 0xff {
				return fmt.Errorf("%w: root visual class %d masks %#x %#x %#x", ErrUnsupportedFormat, v.Class, v.RedMask, v.GreenMask, v.BlueMask)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: root visual not found", ErrUnsupportedFormat)
}

// Capture captures the whole screen into dst (reused when its capacity
// suffices, otherwise a new slice is allocated) and returns the frame.
func (c *Conn) Capture(ctx context.Context, dst []byte) (Frame, error) {
	return c.CaptureRect(ctx, 0, 0, c.width, c.height, dst)
}

// CaptureRect captures the rectangle at (x, y) of size w×h, which must lie
// within the screen, like Capture. The pointer is not part of the image.
func (c *Conn) CaptureRect(ctx context.Context, x, y, w, h int, dst []byte) (Frame, error) {
	if c.format != nil {
		return Frame{}, c.format
	}
	if w <= 0 || h <= 0 || x < 0 || y < 0 || x+w > c.width || y+h > c.height {
		return Frame{}, fmt.Errorf("x11: capture %dx%d+%d+%d outside the %dx%d screen: %w", w, h, x, y, c.width, c.height, ErrBadArgument)
	}
	n := w * h * 4
	pix := dst
	if cap(pix) < n {
		pix = make([]byte, n)
	}
	pix = pix[:n]
	f := Frame{X: x, Y: y, Width: w, Height: h, Stride: w * 4, Pix: pix}

	o, err := c.begin(ctx, &c.capture, "capture")
	if err != nil {
		return Frame{}, err
	}
	defer o.end()
	if c.hasSHM && !c.opts.coreCapture && c.capt.failure() == nil {
		used, err := c.captureSHM(o, f)
		if err != nil {
			return Frame{}, o.wrap("capture", err)
		}
		if used {
			return f, nil
		}
	}
	if err := c.captureCore(o, f); err != nil {
		return Frame{}, o.wrap("capture", err)
	}
	return f, nil
}

// SHM reports whether captures go through MIT-SHM: the server offers it,
// WithCoreCapture was not given, and setting up or using the shared segment
// has not failed (see SHMFailure).
func (c *Conn) SHM() bool {
	return c.hasSHM && !c.opts.coreCapture && c.capt.failure() == nil
}

// SHMFailure returns why MIT-SHM capture was given up for core GetImage
// (for example a sandbox without System V IPC), or nil.
func (c *Conn) SHMFailure() error { return c.capt.failure() }

// CaptureShared captures the whole screen and calls fn with the frame
// while the capture lane is held. Through MIT-SHM the frame's pixels are
// the shared segment itself, not a copy: fn must not keep them, or write
// them, past its return. Without MIT-SHM the frame is captured into dst
// (reused when its capacity suffices). It returns the buffer to pass as
// dst next time, and fn's error as it is.
func (c *Conn) CaptureShared(ctx context.Context, dst []byte, fn func(Frame) error) ([]byte, error) {
	if c.format != nil {
		return dst, c.format
	}
	w, h := c.width, c.height
	n := w * h * 4
	f := Frame{Width: w, Height: h, Stride: w * 4}
	o, err := c.begin(ctx, &c.capture, "capture")
	if err != nil {
		return dst, err
	}
	defer o.end()
	if c.hasSHM && !c.opts.coreCapture && c.capt.failure() == nil {
		used, err := c.getSHM(o, f, n)
		if err != nil {
			return dst, o.wrap("capture", err)
		}
		if used {
			f.Pix = c.capt.mem[:n:n]
			return dst, fn(f)
		}
	}
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	f.Pix = dst[:n]
	if err := c.captureCore(o, f); err != nil {
		return dst, o.wrap("capture", err)
	}
	return dst, fn(f)
}

// captureSHM captures f through the shared segment. It reports false
// without an error when MIT-SHM turned out to be unusable (the caller then
// falls back to core GetImage for good).
func (c *Conn) captureSHM(o *op, f Frame) (bool, error) {
	n := len(f.Pix)
	used, err := c.getSHM(o, f, n)
	if used && err == nil {
		copy(f.Pix, c.capt.mem[:n])
	}
	return used, err
}

// getSHM has the server write f's rectangle (n bytes) into the shared
// segment, setting the segment up first if need be; it reports false
// without an error when MIT-SHM turned out to be unusable.
func (c *Conn) getSHM(o *op, f Frame, n int) (bool, error) {
	if f.X != 0 || f.Y != 0 || f.Width != c.width || f.Height != c.height {
		c.dmg.kept = false // CaptureDamaged's frame is overwritten
	}
	return c.shmGet(o, n, func(seg shm.Seg) error {
		_, err := shm.GetImage(c.xc, xproto.Drawable(c.root), int16(f.X), int16(f.Y), uint16(f.Width), uint16(f.Height),
			^uint32(0), xproto.ImageFormatZPixmap, seg, 0).Reply()
		return err
	})
}

// shmGet has the server write into the shared segment (at least n bytes,
// set up first if need be) through get; it reports false without an
// error when MIT-SHM turned out to be unusable (then the caller falls
// back to the core protocol).
func (c *Conn) shmGet(o *op, n int, get func(seg shm.Seg) error) (bool, error) {
	if len(c.capt.mem) < n {
		if err := c.capt.setup(o, c.xc, max(n, c.width*c.height*4)); err != nil {
			if isContextErr(err) {
				return true, err
			}
			c.capt.setFailure(err)
			return false, nil
		}
	}
	seg := c.capt.seg
	if err := o.do(func() error { return get(seg) }); err != nil {
		if isContextErr(err) || isClosed(err) {
			return true, err
		}
		// The server refused the segment (BadShmSeg, BadAccess): fall back.
		c.capt.setFailure(fmt.Errorf("x11: MIT-SHM GetImage: %w", err))
		c.capt.free()
		return false, nil
	}
	return true, nil
}

// setup creates a SysV segment of size bytes, maps it, marks it for removal
// at once (so it disappears with the last detach and never leaks, even if we
// crash) and attaches it to the server.
func (s *captureState) setup(o *op, xc *xgb.Conn, size int) error {
	s.free()
	s.xc = xc
	id, err := unix.SysvShmGet(unix.IPC_PRIVATE, size, unix.IPC_CREAT|0o600)
	if err != nil {
		return fmt.Errorf("x11: shmget %d bytes: %w", size, err)
	}
	mem, err := unix.SysvShmAttach(id, 0, 0)
	if err != nil {
		_, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil)
		return fmt.Errorf("x11: shmat: %w", err)
	}
	// Linux lets the server attach a segment already marked for removal.
	if _, err := unix.SysvShmCtl(id, unix.IPC_RMID, nil); err != nil {
		_ = unix.SysvShmDetach(mem)
		return fmt.Errorf("x11: shmctl IPC_RMID: %w", err)
	}
	seg, err := shm.NewSegId(xc)
	if err != nil {
		_ = unix.SysvShmDetach(mem)
		return fmt.Errorf("x11: new shm segment id: %w", err)
	}
	err = o.do(func() error { return shm.AttachChecked(xc, seg, uint32(id), false).Check() })
	if err != nil && !isContextErr(err) {
		_ = unix.SysvShmDetach(mem)
		return fmt.Errorf("x11: MIT-SHM attach: %w", err)
	}
	// On a timeout the attach is still in flight; keep the segment, the next
	// capture runs after it (the lane is held until then).
	s.id, s.mem, s.seg = id, mem, seg
	return err
}

// free detaches the segment from the server and from us.
func (s *captureState) free() {
	if s.mem == nil {
		return
	}
	shm.Detach(s.xc, s.seg) // unchecked; harmless on a closed connection
	_ = unix.SysvShmDetach(s.mem)
	s.mem = nil
}

// captureCore captures f with core GetImage requests, in bands of at most
// coreBandBytes, all sent before the first reply is read.
func (c *Conn) captureCore(o *op, f Frame) error {
	rows := max(1, coreBandBytes/f.Stride)
	nb := (f.Height + rows - 1) / rows
	replies := make([][]byte, nb)
	err := o.do(func() error {
		cookies := make([]xproto.GetImageCookie, nb)
		for i := range nb {
			y := i * rows
			h := min(rows, f.Height-y)
			cookies[i] = xproto.GetImage(c.xc, xproto.ImageFormatZPixmap, xproto.Drawable(c.root),
				int16(f.X), int16(f.Y+y), uint16(f.Width), uint16(h), ^uint32(0))
		}
		for i, ck := range cookies {
			// The raw reply avoids xgb's copy of the pixel data.
			buf, err := ck.Cookie.Reply()
			if err != nil {
				return err
			}
			replies[i] = buf
		}
		return nil
	})
	if err != nil {
		return err
	}
	off := 0
	for i, buf := range replies {
		h := min(rows, f.Height-i*rows)
		want := h * f.Stride
		if len(buf) < 32 || int(xgb.Get32(buf[4:]))*4 < want || len(buf) < 32+want {
			return fmt.Errorf("x11: short GetImage reply (%d bytes for %d rows)", len(buf), h)
		}
		off += copy(f.Pix[off:], buf[32:32+want])
	}
	return nil
}
