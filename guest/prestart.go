package guest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/codegirl-games/agentbox/guest/x11"
	"github.com/codegirl-games/agentbox/guest/xserver"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

// A cold start's display comes up in the guest as soon as the guest runs,
// not when the host's start request arrives (Options.Display): the backend
// knows the screen when it creates the sandbox and puts it on the guest's
// command line, so Xvfb, the guest's X connection and Openbox start while
// the host is still reading the guest's hello, answering it, checking the
// sandbox (the local backend's limits) and sending start. The processes,
// their arguments, their order (Xvfb, then the X connection, then the
// window manager) and the readiness each waits for are those of start;
// only the moment is earlier. A start request that asks for something else
// (another screen, no window manager, another home) stops what was brought
// up early and starts afresh; so does the end of the guest.

// earlyDisplay is the display brought up at the guest's start.
type earlyDisplay struct {
	screen observe.Screen
	wm     bool
	noGLX  bool
	home   string
	cancel context.CancelFunc
	done   chan struct{}

	// Set before done closes.
	server       *xserver.Server
	x            *x11.Conn
	wmp          *xserver.WM
	xvfbMS, wmMS int64
	noWM         error // the image has no window manager (a warning)
	err          error // as start would report it
}

// startEarly brings up the display of Options.Display in the background.
func (g *Guest) startEarly() {
	s := *g.opts.Display
	e := &earlyDisplay{screen: s, wm: g.opts.DisplayWM, noGLX: g.opts.DisplayNoGLX, home: os.Getenv("HOME"), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), earlyBound)
	e.cancel = cancel
	g.early.Store(e)
	go func() {
		defer close(e.done)
		e.err = g.bringUp(ctx, e)
	}()
}

// earlyBound bounds the early bring-up, as the host's start bound
// (guestenv's startBound) bounds start's.
const earlyBound = 30 * time.Second

// bringUp starts Xvfb, connects to it and starts the window manager, in
// start's order and with its arguments; what it started is in e.
func (g *Guest) bringUp(ctx context.Context, e *earlyDisplay) error {
	s := e.screen
	t := time.Now()
	srv, err := xserver.Start(ctx, xserver.Config{
		Width: s.Width, Height: s.Height, Depth: s.Depth, NoGLX: e.noGLX,
		Stderr: newLimitedWriter(g.logw, 64<<10),
	})
	if err != nil {
		return fmt.Errorf("start Xvfb: %w", err)
	}
	e.server = srv
	e.xvfbMS = time.Since(t).Milliseconds()
	xc, err := x11.Open(ctx, srv.Display())
	if err != nil {
		return fmt.Errorf("connect to %s: %w", srv.Display(), err)
	}
	e.x = xc
	if err := xc.ClaimKeyboard(ctx); err != nil {
		return fmt.Errorf("claim the keyboard on %s: %w", srv.Display(), err)
	}
	if !e.wm {
		return nil
	}
	t = time.Now()
	wm, err := xserver.StartWM(ctx, srv.Display(), xserver.WMConfig{Dir: filepath.Join(e.home, ".config", "openbox")})
	switch {
	case errors.Is(err, xserver.ErrNoWM):
		e.noWM = err
	case err != nil:
		return fmt.Errorf("start the window manager: %w", err)
	default:
		e.wmp = wm
		e.wmMS = time.Since(t).Milliseconds()
	}
	return nil
}

// takeEarly waits for the early display and returns it when it is the
// one req asks for (its err is start's); otherwise it stops what was
// brought up early and returns nil, and start brings up its own.
func (g *Guest) takeEarly(ctx context.Context, req wire.StartRequest) (*earlyDisplay, error) {
	e := g.early.Swap(nil)
	if e == nil {
		return nil, nil
	}
	if e.screen != req.Screen || e.wm == req.NoWM || e.noGLX != req.NoGLX || e.home != req.Home {
		e.stop()
		return nil, nil
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		e.stop()
		return nil, fmt.Errorf("start: waiting for the display: %w", ctx.Err())
	}
	e.cancel()
	return e, nil
}

// stop ends the early bring-up and whatever it started.
func (e *earlyDisplay) stop() {
	e.cancel()
	<-e.done
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if e.x != nil {
		e.x.Close()
	}
	if e.wmp != nil {
		_ = e.wmp.Stop(ctx)
	}
	if e.server != nil {
		_ = e.server.Stop(ctx)
	}
}
