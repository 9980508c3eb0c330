package main

// X11 plumbing: window creation, properties, colours and the keymap.

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"slices"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

// open connects to $DISPLAY, creates the window, its back buffer and GCs,
// sets the window manager properties and maps the window.
func (a *app) open() error {
	var err error
	if a.conn, err = xgb.NewConn(); err != nil {
		return fmt.Errorf("connect to X display %q: %w", os.Getenv("DISPLAY"), err)
	}
	screen := xproto.Setup(a.conn).DefaultScreen(a.conn)
	bg, err := pixel(screen, a.cfg.bg)
	if err != nil {
		return err
	}
	fg, err := pixel(screen, a.cfg.fg)
	if err != nil {
		return err
	}

	a.w, a.h = a.cfg.width, a.cfg.height
	a.x, a.y = squareSize, float64(a.h-squareSize)/2
	a.keys = []*trackedKey{
		{name: "Right", sym: ksRight, dx: 1},
		{name: "Left", sym: ksLeft, dx: -1},
		{name: "Up", sym: ksUp, dy: -1},
		{name: "Down", sym: ksDown, dy: 1},
	}
	if err := a.loadKeymap(); err != nil {
		return err
	}

	if a.win, err = xproto.NewWindowId(a.conn); err != nil {
		return err
	}
	mask := uint32(xproto.EventMaskKeyPress | xproto.EventMaskKeyRelease | xproto.EventMaskExposure |
		xproto.EventMaskStructureNotify | xproto.EventMaskFocusChange)
	// The background pixel makes the server clear exposed areas itself.
	err = xproto.CreateWindowChecked(a.conn, screen.RootDepth, a.win, screen.Root,
		0, 0, uint16(a.w), uint16(a.h), 0, xproto.WindowClassInputOutput, screen.RootVisual,
		xproto.CwBackPixel|xproto.CwEventMask, []uint32{bg, mask}).Check()
	if err != nil {
		return fmt.Errorf("create window: %w", err)
	}
	if a.buf, err = xproto.NewPixmapId(a.conn); err != nil {
		return err
	}
	err = xproto.CreatePixmapChecked(a.conn, screen.RootDepth, a.buf, xproto.Drawable(a.win),
		uint16(a.w), uint16(a.h)).Check()
	if err != nil {
		return fmt.Errorf("create back buffer: %w", err)
	}
	if a.bgGC, err = a.newGC(bg); err != nil {
		return err
	}
	if a.fgGC, err = a.newGC(fg); err != nil {
		return err
	}

	atoms, err := a.internAtoms("WM_PROTOCOLS", "WM_DELETE_WINDOW", "_NET_WM_NAME", "UTF8_STRING")
	if err != nil {
		return err
	}
	a.wmDelete = atoms[1]
	a.setProp(xproto.AtomWmName, xproto.AtomString, 8, []byte(a.cfg.title))
	a.setProp(atoms[2], atoms[3], 8, []byte(a.cfg.title))
	a.setProp(xproto.AtomWmClass, xproto.AtomString, 8, []byte("mover\x00Mover\x00"))
	a.setProp(atoms[0], xproto.AtomAtom, 32, u32s(uint32(a.wmDelete)))
	// WM_SIZE_HINTS: flags PSize|PMinSize|PMaxSize, then 17 fields of which
	// we fill width/height (3,4), min (5,6) and max (7,8).
	const pSize, pMinSize, pMaxSize = 1 << 3, 1 << 4, 1 << 5
	hints := make([]uint32, 18)
	hints[0] = pSize | pMinSize | pMaxSize
	w, h := uint32(a.w), uint32(a.h)
	hints[3], hints[4], hints[5], hints[6], hints[7], hints[8] = w, h, w, h, w, h
	a.setProp(xproto.AtomWmNormalHints, xproto.AtomWmSizeHints, 32, u32s(hints...))

	return xproto.MapWindowChecked(a.conn, a.win).Check()
}

// pixel computes the pixel value of c for the screen's TrueColor root visual
// directly from the visual's channel masks (no colormap round trip).
func pixel(screen *xproto.ScreenInfo, c rgb) (uint32, error) {
	for _, d := range screen.AllowedDepths {
		for _, v := range d.Visuals {
			if v.VisualId != screen.RootVisual {
				continue
			}
			if v.Class != xproto.VisualClassTrueColor {
				return 0, fmt.Errorf("root visual class %d is not TrueColor", v.Class)
			}
			return channel(c.r, v.RedMask) | channel(c.g, v.GreenMask) | channel(c.b, v.BlueMask), nil
		}
	}
	return 0, errors.New("root visual not found")
}

// channel scales an 8-bit value to the width of mask and shifts it into place.
func channel(v uint8, mask uint32) uint32 {
	maxv := uint32(1)<<bits.OnesCount32(mask) - 1
	return (uint32(v)*maxv + 127) / 255 << bits.TrailingZeros32(mask)
}

// newGC creates a GC drawing in pixel. GraphicsExposures is off: CopyArea
// from the back buffer never needs GraphicsExpose events.
func (a *app) newGC(pixel uint32) (xproto.Gcontext, error) {
	gc, err := xproto.NewGcontextId(a.conn)
	if err != nil {
		return 0, err
	}
	return gc, xproto.CreateGCChecked(a.conn, gc, xproto.Drawable(a.win),
		xproto.GcForeground|xproto.GcGraphicsExposures, []uint32{pixel, 0}).Check()
}

// internAtoms looks up atoms by name in one round trip.
func (a *app) internAtoms(names ...string) ([]xproto.Atom, error) {
	cookies := make([]xproto.InternAtomCookie, len(names))
	for i, n := range names { // send all requests before waiting for replies
		cookies[i] = xproto.InternAtom(a.conn, false, uint16(len(n)), n)
	}
	atoms := make([]xproto.Atom, len(names))
	for i, c := range cookies {
		r, err := c.Reply()
		if err != nil {
			return nil, fmt.Errorf("intern %s: %w", names[i], err)
		}
		atoms[i] = r.Atom
	}
	return atoms, nil
}

// setProp replaces a window property; errors arrive as X errors (logged with -v).
func (a *app) setProp(prop, typ xproto.Atom, format byte, data []byte) {
	xproto.ChangeProperty(a.conn, xproto.PropModeReplace, a.win, prop, typ, format,
		uint32(len(data)*8/int(format)), data)
}

// u32s encodes values in the connection's (little-endian) byte order.
func u32s(vs ...uint32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		xgb.Put32(b[4*i:], v)
	}
	return b
}

// loadKeymap resolves the keycodes of the tracked keysyms.
func (a *app) loadKeymap() error {
	setup := xproto.Setup(a.conn)
	first, count := setup.MinKeycode, int(setup.MaxKeycode)-int(setup.MinKeycode)+1
	r, err := xproto.GetKeyboardMapping(a.conn, first, byte(count)).Reply()
	if err != nil {
		return fmt.Errorf("get keyboard mapping: %w", err)
	}
	codes := func(sym xproto.Keysym) []xproto.Keycode {
		var cs []xproto.Keycode
		for i, s := range r.Keysyms {
			kc := first + xproto.Keycode(i/int(r.KeysymsPerKeycode))
			if s == sym && !slices.Contains(cs, kc) {
				cs = append(cs, kc)
			}
		}
		return cs
	}
	for _, k := range a.keys {
		k.codes = codes(k.sym)
		a.logf("%s = keycodes %v", k.name, k.codes)
	}
	a.quit = codes(ksQ)
	return nil
}
