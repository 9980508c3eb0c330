package guest

import (
	"context"
	"fmt"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/s2"

	"github.com/codegirl-games/agentbox/guest/x11"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

// floor times the primitives of a step alone (wire.MethodFloor), for
// agentbox bench: what a step costs at best on this machine. Each is timed
// on its own, as a minimal program would run it: one XTEST motion with its
// sync (the input path every pointer action takes), one capture of the
// whole screen (MIT-SHM where in use, without a copy out of the segment),
// the check for damage that takes a capture's place on an unchanged screen
// (where DAMAGE is in use), the hash of a frame, its compression as a screenshot's payload, and a PNG encode of it (as the trace does, fast
// compression, opaque RGBA). With Frame it answers at once with the last
// frame it captured, compressed, for the host to time a frame's round trip.
func (g *Guest) floor(ctx context.Context, req wire.FloorRequest) (wire.FloorResponse, []byte, error) {
	var resp wire.FloorResponse
	if g.x == nil {
		return resp, nil, wire.Errorf(wire.CodeInvalid, "floor: the display is not up")
	}
	if req.Samples < 0 || req.Samples > wire.MaxFloorSamples {
		return resp, nil, wire.Errorf(wire.CodeInvalid, "floor: %d samples (want 0–%d)", req.Samples, wire.MaxFloorSamples)
	}
	pngs := pngSamples(req.Samples)
	if req.PNG != nil {
		pngs = *req.PNG
	}
	if pngs < 0 || pngs > wire.MaxFloorSamples || req.From < 0 || req.From > wire.MaxFloorSamples {
		return resp, nil, wire.Errorf(wire.CodeInvalid, "floor: %d PNG encodes from sample %d (want 0–%d each)", pngs, req.From, wire.MaxFloorSamples)
	}
	w, h := g.screen.Width, g.screen.Height
	resp.Width, resp.Height, resp.SHM = w, h, g.x.SHM()
	if req.Frame {
		if len(g.floorPix) != 4*w*h {
			if err := g.floorCapture(ctx); err != nil {
				return resp, nil, err
			}
			g.floorEnc = s2.Encode(g.floorEnc[:cap(g.floorEnc)], g.floorPix)
		}
		return resp, g.floorEnc, nil
	}
	us := func(t time.Time) int64 { return time.Since(t).Microseconds() }
	for i := range req.Samples {
		if err := ctx.Err(); err != nil {
			return resp, nil, err
		}
		x, y := floorPoint(req.From+i, w, h)
		xctx, cancel := context.WithTimeout(ctx, xTimeout)
		t := time.Now()
		err := g.x.MouseMove(xctx, x, y)
		resp.Motion = append(resp.Motion, us(t))
		if err == nil && (!req.Unchanged || !g.x.Damage()) {
			t = time.Now()
			g.capBuf, err = g.x.CaptureShared(xctx, g.capBuf, func(x11.Frame) error { return nil })
			resp.Capture = append(resp.Capture, us(t))
		}
		if err == nil && g.x.Damage() {
			// The screen did not change since the last check (the motion
			// damages nothing): one Subtract and FetchRegion round trip.
			t = time.Now()
			_, err = g.x.DamageCheck(xctx)
			resp.Damage = append(resp.Damage, us(t))
		}
		cancel()
		if err != nil {
			return resp, nil, fmt.Errorf("floor: %w", err)
		}
	}
	// The frame hashed, compressed and encoded: the screen as captured at
	// the start of a run of requests (From 0), or when there is none of
	// this size; one-sample requests in turn with steps would otherwise
	// copy the whole screen before each step.
	hashes := req.Samples
	if req.Unchanged && g.x.Damage() {
		hashes = 0
	}
	if (hashes > 0 || pngs > 0) && (req.From == 0 || len(g.floorPix) != 4*w*h) {
		if err := g.floorCapture(ctx); err != nil {
			return resp, nil, err
		}
	}
	for range hashes {
		t := time.Now()
		_ = xxhash.Sum64(g.floorPix)
		resp.Hash = append(resp.Hash, us(t))
		if req.Unchanged {
			continue
		}
		t = time.Now()
		g.floorEnc = s2.Encode(g.floorEnc[:cap(g.floorEnc)], g.floorPix)
		resp.Encode = append(resp.Encode, us(t))
	}
	if pngs > 0 {
		rgba := make([]byte, len(g.floorPix))
		bgrxToRGBA(rgba, g.floorPix)
		for range pngs {
			f := observe.Frame{Width: w, Height: h, Pix: rgba} // a frame keeps its PNG
			t := time.Now()
			if _, err := f.PNG(); err != nil {
				return resp, nil, fmt.Errorf("floor: png: %w", err)
			}
			resp.PNG = append(resp.PNG, us(t))
		}
	}
	return resp, nil, nil
}

// floorPoint is the i-th point the floor's motions go to on a w×h
// screen.
func floorPoint(i, w, h int) (x, y int) {
	return 10 + (i*37)%max(w-20, 1), 10 + (i*53)%max(h-20, 1)
}

// pngSamples bounds the PNG encodes of one floor request: each takes
// milliseconds to tens of them, and their spread is small.
func pngSamples(n int) int { return min(n, 50) }

// floorCapture captures the screen into floorPix.
func (g *Guest) floorCapture(ctx context.Context) error {
	xctx, cancel := context.WithTimeout(ctx, xTimeout)
	defer cancel()
	var err error
	g.capBuf, err = g.x.CaptureShared(xctx, g.capBuf, func(f x11.Frame) error {
		g.floorPix = append(g.floorPix[:0], packed(f)...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("floor: capture: %w", err)
	}
	return nil
}

// bgrxToRGBA converts BGRX rows to opaque RGBA, as the host does with
// every frame it receives.
func bgrxToRGBA(dst, src []byte) {
	for i := 0; i+3 < len(src) && i+3 < len(dst); i += 4 {
		dst[i], dst[i+1], dst[i+2], dst[i+3] = src[i+2], src[i+1], src[i], 0xff
	}
}
