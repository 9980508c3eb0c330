package guest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/s2"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/guest/x11"
	"github.com/codegirl-games/agentbox/wire"
)

// xTimeout bounds every call to the X server: an app that grabs the server
// (XGrabServer) stops our requests from being answered, and the guest must
// report that, not hang.
const xTimeout = 5 * time.Second

// start brings up Xvfb, the window manager and the X connection.
func (g *Guest) start(ctx context.Context, req wire.StartRequest) (wire.StartResponse, error) {
	var resp wire.StartResponse
	if g.server != nil {
		return resp, wire.Errorf(wire.CodeInvalid, "start: the display is already up")
	}
	s := req.Screen
	if err := s.Validate(); err != nil {
		return resp, wire.Errorf(wire.CodeInvalid, "start: bad screen %v: %v", s, err)
	}
	if req.TimeoutMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMS)*time.Millisecond)
		defer cancel()
	}
	g.screen, g.home, g.appDir = s, req.Home, req.AppDir
	if g.opts.Sandboxed && g.home != "" {
		// A named sandbox's home was kept from its last run: what that
		// run's desktop left in the runtime directory (sockets, the
		// clock's file) is not this one's.
		_ = os.RemoveAll(filepath.Join(g.home, ".run"))
	}
	g.observeOn = req.Observe
	for _, d := range []string{g.home, g.appDir, filepath.Join(g.home, ".config")} {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return resp, fmt.Errorf("start: %w", err)
		}
	}
	if err := g.prof.start(g.home, g.opts.CPUProfile); err != nil {
		g.logf("warn", "%v", err)
	}

	if req.Net != nil {
		r, err := startNet(req.Net, g.tunnel, func(f string, a ...any) { fmt.Fprintf(g.logw, "agentbox guest: "+f+"\n", a...) })
		if err != nil {
			return resp, err
		}
		g.net = r
	}

	// Xvfb, the X connection and the window manager: brought up at the
	// guest's start when the backend said which (prestart.go), else now.
	// The X connection comes before the window manager and the app, so the
	// guest sees every window appear.
	e, err := g.takeEarly(ctx, req)
	if err != nil {
		return resp, err
	}
	if e == nil {
		e = &earlyDisplay{screen: s, wm: !req.NoWM, noGLX: req.NoGLX, home: g.home}
		e.err = g.bringUp(ctx, e)
	}
	g.server, g.x, g.wm = e.server, e.x, e.wmp
	if e.server != nil {
		resp.Display = e.server.Display()
		resp.XvfbMS = e.xvfbMS
	}
	if e.err != nil {
		return resp, e.err
	}
	resp.SHM = g.x.SHM()
	resp.Damage = g.x.Damage()
	if err := g.x.DamageFailure(); err != nil {
		g.logf("warn", "screen changes found by capturing the whole screen each time: %v", err)
	}
	if e.noWM != nil {
		g.logf("warn", "no window manager in the image (%v); continuing without one", e.noWM)
	}
	if g.wm != nil {
		resp.WM = true
		resp.WMMS = e.wmMS
	}
	if req.A11y {
		t := time.Now()
		if err := g.startA11y(ctx); err != nil {
			return resp, err
		}
		resp.A11yMS = time.Since(t).Milliseconds()
	}
	go g.watchWindows()
	if err := g.takeBaseline(ctx); err != nil {
		return resp, err
	}
	go g.warmCapture()
	return resp, nil
}

// warmCapture captures, hashes and encodes the screen once, as a
// screenshot would, while the host goes on (it stages and launches the
// app next): the first capture sets up the MIT-SHM segment and the
// encoder's buffer, and their fresh pages fault in the server and here.
// Left to the cold start's first screenshot, that cost it 12–21 ms (a
// frame that encodes to 2 KB; 2026-12-04). It holds the capture lane, as
// a screenshot does; what it computed is kept by the frame's Gen
// (keptFrame), so the next screenshot recomputes only what changed since.
// The encoding becomes g.encBuf only if no screenshot has made one yet: a
// screenshot's answer carries g.encBuf after the lane is released, so a
// capture that could run beside that answer must not write into it.
func (g *Guest) warmCapture() {
	ctx, cancel := context.WithTimeout(context.Background(), xTimeout)
	defer cancel()
	err := g.x.CaptureDamaged(ctx, func(f x11.Frame) error {
		g.encBuf = g.kept.warm(f, g.encBuf)
		return nil
	})
	if err != nil {
		g.logf("warn", "warming the screen's capture: %v", err)
	}
}

// warm hashes f and returns the encoding buffer to keep: buf itself when
// it is set (a screenshot's answer may be carrying it), else f encoded
// into a new one. Under the capture lane.
func (k *keptFrame) warm(f x11.Frame, buf []byte) []byte {
	k.hash(f)
	if buf != nil {
		return buf
	}
	k.encGen = f.Gen
	return s2.Encode(nil, packed(f))
}

// screenshot captures the screen; an unchanged screen (same hash as the
// host's) is answered without pixels. The hash and the compression read
// the capture where it is (the MIT-SHM segment): no copy of the frame.
// Where the server offers DAMAGE, a screen nothing drew on since the last
// capture is not captured again, and its hash and encoding are those
// kept from then (x11.CaptureDamaged, keptFrame).
func (g *Guest) screenshot(ctx context.Context, req wire.ScreenshotRequest) (wire.ScreenshotResponse, []byte, error) {
	var resp wire.ScreenshotResponse
	if g.x == nil {
		return resp, nil, wire.Errorf(wire.CodeInvalid, "screenshot: the display is not up")
	}
	xctx, cancel := context.WithTimeout(ctx, xTimeout)
	defer cancel()
	g.screenLooked()
	shot := func(f x11.Frame) error {
		resp.Width, resp.Height = f.Width, f.Height
		resp.Hash = g.kept.hash(f)
		if req.IfNot != 0 && req.IfNot == resp.Hash {
			resp.Unchanged = true
			return nil
		}
		resp.Encoding = wire.EncodingBGRXS2
		if g.kept.encGen != f.Gen {
			g.kept.encGen = 0
			g.encBuf = s2.Encode(g.encBuf[:cap(g.encBuf)], packed(f))
			g.kept.encGen = f.Gen
		}
		return nil
	}
	if !req.WithState {
		if err := g.x.CaptureDamaged(xctx, shot); err != nil {
			return resp, nil, fmt.Errorf("capture: %w", err)
		}
	} else {
		// The state's cursor is read after the capture, as the state's
		// own read would: in the damage check's round trip where the
		// screen is unchanged (x11.Conn.CaptureDamagedCursor).
		x, y, err := g.x.CaptureDamagedCursor(xctx, shot)
		if err != nil {
			return resp, nil, fmt.Errorf("capture: %w", err)
		}
		st := g.stateAt(action.Point{X: x, Y: y})
		resp.State = &st
	}
	if resp.Unchanged {
		return resp, nil, nil
	}
	return resp, g.encBuf, nil
}

// keptFrame is what was computed from the last frame x11.CaptureDamaged
// gave, by its Gen (0: nothing): its hash, and whether Guest.encBuf holds
// its encoding. Used under the capture lane only.
type keptFrame struct {
	hashGen, encGen uint64
	sum             uint64
}

// hash returns f's hash, computed only when f is not the frame hashed last.
func (k *keptFrame) hash(f x11.Frame) uint64 {
	if k.hashGen != f.Gen || f.Gen == 0 {
		k.sum, k.hashGen = xxhash.Sum64(packed(f)), f.Gen
	}
	return k.sum
}

// packed returns the frame's rows without padding.
func packed(f x11.Frame) []byte {
	row := 4 * f.Width
	if f.Stride == row {
		return f.Pix[:row*f.Height]
	}
	out := make([]byte, row*f.Height)
	for y := 0; y < f.Height; y++ {
		copy(out[y*row:(y+1)*row], f.Pix[y*f.Stride:y*f.Stride+row])
	}
	return out
}

// frameHash captures the screen and hashes it, for waits; like
// screenshot, it neither captures nor hashes a screen DAMAGE says is
// unchanged.
func (g *Guest) frameHash(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, xTimeout)
	defer cancel()
	var h uint64
	err := g.x.CaptureDamaged(ctx, func(f x11.Frame) error {
		h = g.kept.hash(f)
		return nil
	})
	return h, err
}

// stateAt is the state with the cursor read at p.
func (g *Guest) stateAt(p action.Point) wire.State {
	st := wire.State{Cursor: p}
	st.Windows = g.windowList()
	if g.app != nil {
		st.Running, st.Exit = g.app.status()
	}
	return st
}
