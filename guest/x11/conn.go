package x11

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/shm"
	"github.com/jezek/xgb/xfixes"
	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"

	"github.com/codegirl-games/agentbox/guest/xdial"
)

// DefaultClickInterval is the pause between the clicks of a multi-click. It
// is well inside every toolkit's double-click time (Xt 200 ms, GTK and Qt
// 400 ms, Tk and SDL 500 ms) and long enough for applications that poll input
// once per frame at 30 fps to see separate clicks.
const DefaultClickInterval = 40 * time.Millisecond

// Option configures Open.
type Option func(*options)

type options struct {
	coreCapture bool
	noDamage    bool
}

// WithCoreCapture makes the Conn capture with core GetImage even when MIT-SHM
// is available (for tests and benchmarks).
func WithCoreCapture() Option { return func(o *options) { o.coreCapture = true } }

// Conn is the guest's connection to an X server. Its methods are safe for
// concurrent use; calls of one kind (capture, input, window queries) are
// serialised among themselves.
type Conn struct {
	xc   *xgb.Conn
	nc   net.Conn
	opts options

	root           xproto.Window
	width, height  int
	format         error // nil if captures are possible (ErrUnsupportedFormat otherwise)
	minKC, maxKC   xproto.Keycode
	hasSHM, hasFix bool
	atoms          atoms

	// lanes serialise operations of one kind; see op.
	input, capture, query lane

	kb  keyboard     // guarded by the input lane, except the fields noted
	ptr pointerState // guarded by the input lane
	wm  wmSyncState
	// confirmNS accumulates the time spent confirming input (ConfirmTime).
	confirmNS atomic.Int64
	capt      captureState // guarded by the capture lane
	dmg       damageState  // guarded by the capture lane, except its failure
	heldMu    sync.Mutex   // guards heldKey and heldBtn
	heldKey   []uint32     // snapshot for Held, updated under the input lane
	heldBtn   []int

	subMu  sync.Mutex
	subs   map[*subscriber]struct{}
	shared *subscriber // WindowsChanged's channel
	// dmgSubs are WatchDamage's channels, guarded by subMu.
	dmgSubs map[*subscriber]struct{}

	selectq chan xproto.Window // windows to select PropertyChange on

	closeOnce  sync.Once
	closedOnce sync.Once
	closed     chan struct{} // closed by Close or when the server goes away
	eventsDone chan struct{}
}

// Open connects to display (":N"), initialises XTEST (required), MIT-SHM and
// XFixes (optional), selects PropertyChange and SubstructureNotify on the root
// window and starts the goroutine that drains events. ctx bounds the whole
// open.
func Open(ctx context.Context, display string, opts ...Option) (c *Conn, err error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	xc, nc, err := xdial.Dial(ctx, display)
	switch {
	case errors.Is(err, xdial.ErrBadDisplay):
		return nil, fmt.Errorf("x11: %w: %w", ErrBadArgument, err)
	case err != nil && ctx.Err() != nil:
		return nil, ctxError(ctx, "connect to "+display)
	case err != nil:
		return nil, fmt.Errorf("x11: %w", err)
	}

	c = &Conn{
		xc:         xc,
		nc:         nc,
		opts:       o,
		input:      newLane(),
		capture:    newLane(),
		query:      newLane(),
		subs:       map[*subscriber]struct{}{},
		dmgSubs:    map[*subscriber]struct{}{},
		selectq:    make(chan xproto.Window, 1024),
		wm:         wmSyncState{answer: make(chan struct{}, 1)},
		closed:     make(chan struct{}),
		eventsDone: make(chan struct{}),
	}
	go c.drainEvents()
	go c.selectWindows()
	defer func() {
		if err != nil {
			c.Close()
		}
	}()

	setup := xproto.Setup(xc)
	scr := setup.DefaultScreen(xc)
	c.root = scr.Root
	c.width, c.height = int(scr.WidthInPixels), int(scr.HeightInPixels)
	c.minKC, c.maxKC = setup.MinKeycode, setup.MaxKeycode
	c.format = checkFormat(setup, scr)

	o1, err := c.begin(ctx, &c.query, "open")
	if err != nil {
		return nil, err
	}
	defer o1.end()
	err = o1.do(func() error {
		ok, err := initExtension(xc, "XTEST", xtest.Init)
		if err != nil {
			return err
		}
		if !ok {
			return ErrNoXTEST
		}
		if _, err := xtest.GetVersion(xc, 2, 2).Reply(); err != nil {
			return err
		}
		if c.hasSHM, err = initExtension(xc, "MIT-SHM", shm.Init); err != nil {
			return err
		}
		if c.hasSHM {
			if _, err := shm.QueryVersion(xc).Reply(); err != nil {
				return err
			}
		}
		if c.hasFix, err = initExtension(xc, "XFIXES", xfixes.Init); err != nil {
			return err
		}
		if c.hasFix {
			// XFixes requires the version handshake before any other request.
			if _, err := xfixes.QueryVersion(xc, 5, 0).Reply(); err != nil {
				return err
			}
		}
		if err := c.initDamage(); err != nil {
			return err
		}
		if err := c.atoms.intern(xc); err != nil {
			return err
		}
		return xproto.ChangeWindowAttributesChecked(xc, c.root, xproto.CwEventMask, []uint32{
			xproto.EventMaskPropertyChange | xproto.EventMaskSubstructureNotify,
		}).Check()
	})
	if err != nil {
		if err == ErrNoXTEST {
			return nil, err
		}
		return nil, o1.wrap("open "+display, err)
	}
	return c, nil
}

// extMu serialises extension initialisation: xgb's Init functions write
// process-wide maps of event and error constructors.
var (
	extMu   sync.Mutex
	extInit = map[string]bool{}
)

// initExtension reports whether the server has extension name and registers
// it on xc. The first connection in the process runs xgb's Init (which fills
// the global constructor maps); later ones only record the opcode, so that no
// global map is written while other connections read it.
func initExtension(xc *xgb.Conn, name string, initFn func(*xgb.Conn) error) (bool, error) {
	r, err := xproto.QueryExtension(xc, uint16(len(name)), name).Reply()
	if err != nil {
		return false, err
	}
	if !r.Present {
		return false, nil
	}
	extMu.Lock()
	defer extMu.Unlock()
	if !extInit[name] {
		if err := initFn(xc); err != nil {
			return false, err
		}
		extInit[name] = true
		return true, nil
	}
	xc.ExtLock.Lock()
	xc.Extensions[name] = r.MajorOpcode
	xc.ExtLock.Unlock()
	return true, nil
}

// syncX is a GetInputFocus round trip: when it returns, the server has
// processed every request sent before.
func (c *Conn) syncX() error {
	_, err := xproto.GetInputFocus(c.xc).Reply()
	return err
}

// syncInput is syncX after input: the server processes the events XTEST
// queued before it handles the next request, so when the reply arrives every
// event has been delivered, at the position it was sent with (nothing
// freezes the pointer; see press.go). The wait counts as confirmation time.
func (c *Conn) syncInput() error {
	t0 := time.Now()
	err := c.syncX()
	c.confirmNS.Add(int64(time.Since(t0)))
	return err
}

// ConfirmTime returns the total time the Conn has spent waiting for input
// to be confirmed: the server's round trip after each batch of events and
// every wait for the window manager. The difference across an action is the
// action's confirmation time.
func (c *Conn) ConfirmTime() time.Duration { return time.Duration(c.confirmNS.Load()) }

// Done is closed when the Conn is closed or its server has gone away.
func (c *Conn) Done() <-chan struct{} { return c.closed }

// Close closes the connection and frees the shared-memory segment. It does
// not release held keys or buttons (call ReleaseAll first) and never blocks
// for long, even if the server is grabbed or hung.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.markClosed()
		xdial.Close(c.xc, c.nc)
		<-c.eventsDone
		// Every in-flight request has now failed with EOF, so the lanes drain
		// quickly; the capture lane guards the mapped segment.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if o, err := c.beginClosing(ctx, &c.capture); err == nil {
			c.capt.free()
			o.end()
		}
	})
	return nil
}

func (c *Conn) markClosed() { c.closedOnce.Do(func() { close(c.closed) }) }

func (c *Conn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}
