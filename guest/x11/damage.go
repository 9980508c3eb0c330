package x11

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/jezek/xgb/damage"
	"github.com/jezek/xgb/shm"
	"github.com/jezek/xgb/xfixes"
	"github.com/jezek/xgb/xproto"
)

// What the DAMAGE extension saves (damage.go):
//
// Open creates a damage object on the root window (report level NonEmpty)
// and an XFixes region. CaptureDamaged keeps the last frame it captured
// (in the MIT-SHM segment, or in a buffer of its own with core GetImage)
// and, before each capture, moves the damage accumulated since the
// previous one into the region (DamageSubtract) and fetches it
// (FetchRegion). That fetch is a round trip: every drawing request the
// server processed before it is in the region, exactly as every drawing
// request processed before a GetImage is in its image, so an empty region
// means the kept frame is the screen as a capture would have shown it.
// Nothing is then captured and the frame's Gen stays the same, which lets
// the caller answer from what it computed for that Gen (its hash, its
// encoding). A non-empty region is captured as bands of whole rows
// straight into the kept frame (a band of full rows has the frame's stride,
// so MIT-SHM writes it in place at its offset), and Gen moves on.
//
// The pointer is not part of a capture and moving it damages nothing
// (measured on Xvfb 21.1.7: the software cursor is drawn below DAMAGE).
// Drawing that lands between the Subtract and the band's GetImage is both
// captured and left in the region: the next call captures it again, which
// costs a capture, never a stale frame.
//
// DAMAGE also wakes WatchDamage's subscribers: at report level NonEmpty
// the server sends one event when the region goes from empty to
// non-empty, and CaptureDamaged's Subtract re-arms it.

// damageBandGap merges two damaged bands whose rows are at most this far
// apart: one GetImage of a few more rows costs less than a second request.
const damageBandGap = 32

// maxDamageBands bounds the GetImage requests of one capture; more bands
// are captured as the one band that spans them.
const maxDamageBands = 8

// genSeq numbers frame generations across every Conn of the process, so
// that a Gen never names two different frames, even of two connections.
var genSeq atomic.Uint64

// damageState is the damage object and the kept frame, guarded by the
// capture lane.
type damageState struct {
	on     bool // DAMAGE is in use
	obj    damage.Damage
	region xfixes.Region

	// kept says the kept frame (the segment with MIT-SHM, core otherwise)
	// holds the whole screen as of the last Subtract, or later.
	kept    bool
	keptSHM bool   // … and it is the segment
	core    []byte // the kept frame without MIT-SHM
	gen     uint64 // the kept frame's content; moves on with every capture

	failMu sync.Mutex
	fail   error // why DAMAGE is not used
}

// WithoutDamage makes the Conn capture the whole screen on every
// CaptureDamaged even when the server offers DAMAGE (for tests and
// benchmarks).
func WithoutDamage() Option { return func(o *options) { o.noDamage = true } }

// initDamage sets up the damage object on the root window; it runs under
// Open's op. A server without DAMAGE (or XFixes, whose regions it needs)
// leaves it off, with the reason for DamageFailure.
func (c *Conn) initDamage() error {
	if c.opts.noDamage {
		c.dmg.fail = fmt.Errorf("x11: DAMAGE not used (WithoutDamage)")
		return nil
	}
	if !c.hasFix {
		c.dmg.fail = fmt.Errorf("x11: no XFIXES extension, which DAMAGE needs")
		return nil
	}
	ok, err := initExtension(c.xc, "DAMAGE", damage.Init)
	if err != nil {
		return err
	}
	if !ok {
		c.dmg.fail = fmt.Errorf("x11: the server has no DAMAGE extension")
		return nil
	}
	if _, err := damage.QueryVersion(c.xc, 1, 1).Reply(); err != nil {
		return err
	}
	obj, err := damage.NewDamageId(c.xc)
	if err != nil {
		return err
	}
	region, err := xfixes.NewRegionId(c.xc)
	if err != nil {
		return err
	}
	if err := xfixes.CreateRegionChecked(c.xc, region, nil).Check(); err != nil {
		return err
	}
	if err := damage.CreateChecked(c.xc, obj, xproto.Drawable(c.root), damage.ReportLevelNonEmpty).Check(); err != nil {
		c.dmg.fail = fmt.Errorf("x11: DAMAGE create: %w", err)
		return nil
	}
	c.dmg.on, c.dmg.obj, c.dmg.region = true, obj, region
	return nil
}

// Damage reports whether CaptureDamaged follows the server's DAMAGE
// reports (see DamageFailure otherwise).
func (c *Conn) Damage() bool { return c.dmg.on && c.format == nil }

// DamageFailure returns why DAMAGE is not used, or nil.
func (c *Conn) DamageFailure() error {
	c.dmg.failMu.Lock()
	defer c.dmg.failMu.Unlock()
	return c.dmg.fail
}

// CaptureDamaged calls fn with the whole screen while the capture lane is
// held, like CaptureShared (fn must not keep or write the pixels past its
// return), capturing only what changed: where the server offers DAMAGE an
// unchanged screen is not captured at all and a changed one only in its
// damaged rows (see the comment at the top of damage.go). The frame's Gen
// says what it holds: two frames with the same Gen have the same pixels,
// so a caller may keep what it computed from one (a hash, an encoding)
// for the next. Without DAMAGE every call captures the whole screen and
// has a new Gen.
func (c *Conn) CaptureDamaged(ctx context.Context, fn func(Frame) error) error {
	return c.captureDamaged(ctx, fn, nil)
}

// CaptureDamagedCursor is CaptureDamaged, then the pointer's position on
// the root window as Cursor would read it right after: where DAMAGE says
// the screen is unchanged, the QueryPointer goes to the server with the
// damage check (after its FetchRegion, so the server answers it after the
// check, as it would a Cursor call after the capture) and costs no round
// trip of its own; where the screen changed and was captured, or without
// DAMAGE, it is a QueryPointer of its own after the capture, as Cursor.
func (c *Conn) CaptureDamagedCursor(ctx context.Context, fn func(Frame) error) (x, y int, err error) {
	var p pointerRead
	if err := c.captureDamaged(ctx, fn, &p); err != nil {
		return 0, 0, err
	}
	if !p.ok {
		return c.Cursor(ctx)
	}
	return p.x, p.y, nil
}

// pointerRead is the pointer read with a damage check, when ok.
type pointerRead struct {
	x, y int
	ok   bool
}

// captureDamaged is CaptureDamaged; with p, the pointer is read in the
// damage check's round trip, and kept in p when the check found nothing
// to capture (a capture after the check would come after that read).
func (c *Conn) captureDamaged(ctx context.Context, fn func(Frame) error, p *pointerRead) error {
	if c.format != nil {
		return c.format
	}
	w, h := c.width, c.height
	n := w * h * 4
	f := Frame{Width: w, Height: h, Stride: w * 4}
	o, err := c.begin(ctx, &c.capture, "capture")
	if err != nil {
		return err
	}
	defer o.end()
	d := &c.dmg
	if d.kept && d.keptSHM != c.SHM() {
		d.kept = false // MIT-SHM failed since: the kept frame is elsewhere
	}
	bands := [][2]int{{0, h}}
	if d.on && d.kept {
		bands, err = c.takeDamage(o, p)
		if err != nil {
			d.kept = false
			return o.wrap("capture", err)
		}
	} else if d.on {
		// Everything is captured: forget what had been damaged before
		// (the capture's GetImage comes after the Subtract).
		if err := o.do(func() error { damage.Subtract(c.xc, d.obj, 0, 0); return nil }); err != nil {
			return o.wrap("capture", err)
		}
	}
	if len(bands) > 0 {
		d.kept = false
		d.gen = genSeq.Add(1)
		if err := c.captureBands(o, f, n, bands); err != nil {
			return o.wrap("capture", err)
		}
		d.kept, d.keptSHM = d.on, c.SHM()
	}
	if c.SHM() {
		f.Pix = c.capt.mem[:n:n]
	} else {
		f.Pix = d.core[:n:n]
	}
	f.Gen = d.gen
	return fn(f)
}

// DamageCheck makes the check CaptureDamaged makes before it captures,
// alone (agentbox bench's floor times it): the damage accumulated since the
// last capture or check is moved into the region and fetched, one round
// trip. It reports whether there was any; if so, the kept frame is
// forgotten, so the next CaptureDamaged captures the whole screen (the
// damage this call took is no longer there to tell it what changed).
// Without DAMAGE it reports true without asking the server.
func (c *Conn) DamageCheck(ctx context.Context) (bool, error) {
	if !c.Damage() {
		return true, nil
	}
	o, err := c.begin(ctx, &c.capture, "damage check")
	if err != nil {
		return false, err
	}
	defer o.end()
	bands, err := c.takeDamage(o, nil)
	if err != nil {
		c.dmg.kept = false
		return false, o.wrap("damage check", err)
	}
	if len(bands) > 0 {
		c.dmg.kept = false
	}
	return len(bands) > 0, nil
}

// takeDamage moves the damage accumulated since the last call into the
// region, fetches it and returns its rows as bands [y0, y1), merged and
// bounded (damageBandGap, maxDamageBands). With p, a QueryPointer goes
// in the same round trip, after the FetchRegion, and its answer is kept in
// p when nothing was damaged.
func (c *Conn) takeDamage(o *op, p *pointerRead) ([][2]int, error) {
	var (
		rects  []xproto.Rectangle
		rx, ry int16
	)
	err := o.do(func() error {
		damage.Subtract(c.xc, c.dmg.obj, 0, c.dmg.region)
		fr := xfixes.FetchRegion(c.xc, c.dmg.region)
		var qp xproto.QueryPointerCookie
		if p != nil {
			qp = xproto.QueryPointer(c.xc, c.root)
		}
		r, err := fr.Reply()
		if p != nil {
			// Read its answer whatever happened, so that it is not left
			// for the connection to hold.
			q, qerr := qp.Reply()
			if err == nil && qerr != nil {
				err = qerr
			}
			if q != nil {
				rx, ry = q.RootX, q.RootY
			}
		}
		if err != nil {
			return err
		}
		rects = r.Rectangles
		return nil
	})
	if err != nil {
		return nil, err
	}
	bands := damageBands(rects, c.height)
	if p != nil && len(bands) == 0 {
		p.x, p.y, p.ok = int(rx), int(ry), true
	}
	return bands, nil
}

// damageBands returns the rows rects cover as sorted bands [y0, y1)
// within [0, height), merging bands at most damageBandGap rows apart and
// spanning them all when there would be more than maxDamageBands.
func damageBands(rects []xproto.Rectangle, height int) [][2]int {
	var bands [][2]int
	for _, r := range rects {
		y0, y1 := max(int(r.Y), 0), min(int(r.Y)+int(r.Height), height)
		if r.Width == 0 || y1 <= y0 {
			continue
		}
		bands = append(bands, [2]int{y0, y1})
	}
	if len(bands) == 0 {
		return nil
	}
	slices.SortFunc(bands, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
	out := bands[:1]
	for _, b := range bands[1:] {
		last := &out[len(out)-1]
		if b[0] <= last[1]+damageBandGap {
			last[1] = max(last[1], b[1])
			continue
		}
		out = append(out, b)
	}
	if len(out) > maxDamageBands {
		out = [][2]int{{out[0][0], out[len(out)-1][1]}}
	}
	return out
}

// captureBands captures the bands of rows into the kept frame: through
// MIT-SHM in place in the segment (every band's GetImage sent before the
// first reply is read), otherwise with core GetImage into d.core.
func (c *Conn) captureBands(o *op, f Frame, n int, bands [][2]int) error {
	if c.SHM() {
		if len(c.capt.mem) < n {
			// A new segment holds nothing yet: capture it all.
			bands = [][2]int{{0, f.Height}}
		}
		used, err := c.getSHMBands(o, f, n, bands)
		if err != nil || used {
			return err
		}
		bands = [][2]int{{0, f.Height}} // MIT-SHM just failed: start over
	}
	if len(c.dmg.core) < n {
		c.dmg.core = make([]byte, n)
		bands = [][2]int{{0, f.Height}}
	}
	for _, b := range bands {
		band := f
		band.Y, band.Height = b[0], b[1]-b[0]
		band.Pix = c.dmg.core[b[0]*f.Stride : b[1]*f.Stride]
		if err := c.captureCore(o, band); err != nil {
			return err
		}
	}
	return nil
}

// getSHMBands is getSHM for bands of whole rows, each written at its own
// offset in the segment; it reports false without an error when MIT-SHM
// turned out to be unusable.
func (c *Conn) getSHMBands(o *op, f Frame, n int, bands [][2]int) (bool, error) {
	return c.shmGet(o, n, func(seg shm.Seg) error {
		cookies := make([]shm.GetImageCookie, len(bands))
		for i, b := range bands {
			cookies[i] = shm.GetImage(c.xc, xproto.Drawable(c.root), 0, int16(b[0]), uint16(f.Width), uint16(b[1]-b[0]),
				^uint32(0), xproto.ImageFormatZPixmap, seg, uint32(b[0]*f.Stride))
		}
		var first error
		for _, ck := range cookies {
			if _, err := ck.Reply(); err != nil && first == nil {
				first = err
			}
		}
		return first
	})
}

// WatchDamage returns a channel that receives a value when the screen may
// have changed since the last CaptureDamaged: the server's DAMAGE report
// (one per change after a CaptureDamaged; the channel has a buffer of one,
// so reports coalesce). To follow the screen, subscribe, then
// CaptureDamaged, then wait on the channel before the next: no change
// after a capture goes unreported. Without DAMAGE (Damage false) nothing
// is ever sent: poll instead. The channel also receives when the Conn
// closes. Call stop to unsubscribe.
func (c *Conn) WatchDamage() (changed <-chan struct{}, stop func()) {
	s := &subscriber{ch: make(chan struct{}, 1)}
	c.subMu.Lock()
	c.dmgSubs[s] = struct{}{}
	c.subMu.Unlock()
	return s.ch, func() {
		c.subMu.Lock()
		delete(c.dmgSubs, s)
		c.subMu.Unlock()
	}
}

// notifyDamage wakes every WatchDamage subscriber without blocking.
func (c *Conn) notifyDamage() {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	for s := range c.dmgSubs {
		select {
		case s.ch <- struct{}{}:
		default:
		}
	}
}
