// Command mover is the agentbox demo app: a 40×40 square in an X11 window
// that the arrow keys move around, written in pure Go over the X protocol
// (github.com/jezek/xgb, no cgo).
//
// It behaves like a simple game: a fixed 60 Hz tick polls the real keyboard
// state with QueryKeymap (immune to server autorepeat, which turns a held key
// into release/press pairs) and moves the square by elapsed time × speed.
//
// Stdout protocol, one line per event, each written with a single write:
//
//	mover: ready WxH              window mapped and first frame drawn
//	mover: key Right down         a tracked arrow key changed state
//	mover: key Right up
//	mover: at x=N y=N             movement stopped (or -print-every tick);
//	                              top-left corner of the square
//	mover: bye                    clean exit (q, window closed, -exit-after,
//	                              SIGINT/SIGTERM)
//	mover: sleeping (no window)   -no-window mode
//
// Exit codes: 0 clean, 1 X connection failed or broke, 2 bad flags,
// 3 -crash-after.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

const (
	squareSize = 40
	tickRate   = 60 // ticks per second
)

// Keysyms from X11/keysymdef.h.
const (
	ksLeft  xproto.Keysym = 0xff51
	ksUp    xproto.Keysym = 0xff52
	ksRight xproto.Keysym = 0xff53
	ksDown  xproto.Keysym = 0xff54
	ksQ     xproto.Keysym = 0x0071
)

// config holds the command-line settings.
type config struct {
	width, height int
	bg, fg        rgb
	title         string
	speed         float64 // pixels per second
	exitAfter     time.Duration
	crashAfter    time.Duration
	printEvery    time.Duration
	stepPX        float64 // >0: each arrow key press moves the square this far, whatever the time
	noWindow      bool
	verbose       bool
}

// rgb is a colour flag value written as #rrggbb.
type rgb struct{ r, g, b uint8 }

func (c *rgb) String() string { return fmt.Sprintf("#%02x%02x%02x", c.r, c.g, c.b) }

func (c *rgb) Set(s string) error {
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "#"), 16, 32)
	if err != nil || len(strings.TrimPrefix(s, "#")) != 6 {
		return fmt.Errorf("want #rrggbb, got %q", s)
	}
	*c = rgb{uint8(v >> 16), uint8(v >> 8), uint8(v)}
	return nil
}

// trackedKey is an arrow key polled every tick.
type trackedKey struct {
	name   string
	sym    xproto.Keysym
	dx, dy float64
	codes  []xproto.Keycode // keycodes currently bound to sym
	down   bool
}

// app is the state of the running window.
type app struct {
	cfg        config
	conn       *xgb.Conn
	win        xproto.Window
	buf        xproto.Pixmap // back buffer, the size of the window
	bgGC, fgGC xproto.Gcontext
	wmDelete   xproto.Atom

	w, h           int     // playfield (window) size; the size hints keep it fixed
	x, y           float64 // top-left corner of the square
	drawnX, drawnY int16   // where the square is on screen
	ready, moving  bool

	keys     []*trackedKey
	quit     []xproto.Keycode // keycodes bound to q
	latched  [32]byte         // KeyPress events since the last tick, so taps shorter than a tick still count
	logf     func(format string, args ...any)
	lastTick time.Time
}

func main() {
	cfg, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mover:", err)
		os.Exit(2)
	}
	os.Exit(run(cfg))
}

func parseFlags() (config, error) {
	cfg := config{bg: rgb{0x20, 0x20, 0x20}, fg: rgb{0, 0xff, 0}}
	speed := 200.0
	if s := os.Getenv("MOVER_SPEED"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return cfg, fmt.Errorf("MOVER_SPEED: %v", err)
		}
		speed = v
	}
	flag.IntVar(&cfg.width, "width", 640, "window width in pixels")
	flag.IntVar(&cfg.height, "height", 480, "window height in pixels")
	flag.Var(&cfg.bg, "bg", "background colour #rrggbb")
	flag.Var(&cfg.fg, "color", "square colour #rrggbb")
	flag.StringVar(&cfg.title, "title", "mover", "window title")
	flag.Float64Var(&cfg.speed, "speed", speed, "speed in pixels per second; $MOVER_SPEED sets the default")
	flag.DurationVar(&cfg.exitAfter, "exit-after", 0, "exit 0 after this long (0 = never)")
	flag.DurationVar(&cfg.crashAfter, "crash-after", 0, "exit 3 after this long (0 = never)")
	flag.DurationVar(&cfg.printEvery, "print-every", 0, "print the position this often (0 = never)")
	flag.Float64Var(&cfg.stepPX, "step", 0, "move this many pixels per arrow key press instead of by time × speed (0 = by time): the picture then depends on the keys alone")
	flag.BoolVar(&cfg.noWindow, "no-window", false, "never create a window, just sleep")
	flag.BoolVar(&cfg.verbose, "v", false, "log X errors and events to stderr")
	flag.Parse()
	switch {
	case flag.NArg() > 0:
		return cfg, fmt.Errorf("unexpected arguments %q", flag.Args())
	case cfg.width < squareSize || cfg.height < squareSize || cfg.width > math.MaxInt16 || cfg.height > math.MaxInt16:
		return cfg, fmt.Errorf("window size %dx%d out of range", cfg.width, cfg.height)
	case cfg.speed < 0 || math.IsNaN(cfg.speed) || math.IsInf(cfg.speed, 0):
		return cfg, fmt.Errorf("bad speed %v", cfg.speed)
	case cfg.stepPX < 0 || math.IsNaN(cfg.stepPX) || math.IsInf(cfg.stepPX, 0):
		return cfg, fmt.Errorf("bad step %v", cfg.stepPX)
	}
	return cfg, nil
}

// say prints one protocol line. os.Stdout is unbuffered, so every line is
// flushed by its own write.
func say(format string, args ...any) {
	fmt.Fprintf(os.Stdout, "mover: "+format+"\n", args...)
}

// after returns a channel that fires once after d, or never if d is 0.
func after(d time.Duration) <-chan time.Time {
	if d <= 0 {
		return nil
	}
	return time.After(d)
}

func run(cfg config) int {
	exit, crash := after(cfg.exitAfter), after(cfg.crashAfter)
	// SIGINT/SIGTERM are a clean exit, like -exit-after.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	crashed := func() int {
		fmt.Fprintf(os.Stderr, "mover: crashing on purpose after %v (-crash-after)\n", cfg.crashAfter)
		return 3
	}
	if cfg.noWindow {
		say("sleeping (no window)")
		select {
		case <-exit:
		case <-stop:
		case <-crash:
			return crashed()
		}
		say("bye")
		return 0
	}

	a := &app{cfg: cfg, logf: func(string, ...any) {}}
	if cfg.verbose {
		a.logf = log.New(os.Stderr, "mover: ", log.Lmicroseconds).Printf
	} else {
		xgb.Logger = log.New(io.Discard, "", 0)
	}
	if err := a.open(); err != nil {
		fmt.Fprintln(os.Stderr, "mover:", err)
		return 1
	}

	// X events are read on their own goroutine; the channel is closed when
	// the connection goes away.
	events := make(chan xgb.Event)
	go func() {
		defer close(events)
		for {
			ev, xerr := a.conn.WaitForEvent()
			switch {
			case ev == nil && xerr == nil:
				return
			case xerr != nil:
				a.logf("X error: %v", xerr)
			default:
				events <- ev
			}
		}
	}()

	var printEvery <-chan time.Time
	if cfg.printEvery > 0 {
		printEvery = time.NewTicker(cfg.printEvery).C
	}
	ticker := time.NewTicker(time.Second / tickRate)
	a.lastTick = time.Now()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				fmt.Fprintln(os.Stderr, "mover: X connection closed")
				return 1
			}
			if code, done := a.handle(ev); done {
				return code
			}
		case <-ticker.C:
			if err := a.tick(); err != nil {
				fmt.Fprintln(os.Stderr, "mover: X connection broken:", err)
				return 1
			}
		case <-printEvery:
			if a.ready {
				say("%s", a.posLine())
			}
		case <-exit:
			say("bye")
			return 0
		case <-stop:
			say("bye")
			return 0
		case <-crash:
			return crashed()
		}
	}
}

// handle processes one X event; done reports that the app should exit with code.
func (a *app) handle(ev xgb.Event) (code int, done bool) {
	switch e := ev.(type) {
	case xproto.MapNotifyEvent:
		if !a.ready {
			a.redraw()
			if err := a.sync(); err != nil { // first frame is on screen before we say so
				fmt.Fprintln(os.Stderr, "mover: X connection broken:", err)
				return 1, true
			}
			a.ready = true
			say("ready %dx%d", a.w, a.h)
		}
	case xproto.ExposeEvent: // the back buffer is always current
		if e.Count == 0 {
			a.present(0, 0, a.w, a.h)
		}
	case xproto.KeyPressEvent:
		if slices.Contains(a.quit, e.Detail) {
			say("bye")
			return 0, true
		}
		a.latched[e.Detail/8] |= 1 << (e.Detail % 8)
		if a.cfg.stepPX > 0 && a.ready {
			for _, k := range a.keys {
				if slices.Contains(k.codes, e.Detail) {
					a.x += k.dx * a.cfg.stepPX
					a.y += k.dy * a.cfg.stepPX
					a.clamp()
					a.draw()
				}
			}
		}
	case xproto.MappingNotifyEvent:
		if e.Request == xproto.MappingKeyboard {
			if err := a.loadKeymap(); err != nil {
				fmt.Fprintln(os.Stderr, "mover:", err)
				return 1, true
			}
		}
	case xproto.ClientMessageEvent: // the window manager's close button
		if e.Format == 32 && xproto.Atom(e.Data.Data32[0]) == a.wmDelete {
			say("bye")
			return 0, true
		}
	case xproto.DestroyNotifyEvent: // someone else destroyed our window
		say("bye")
		return 0, true
	case xproto.FocusInEvent, xproto.FocusOutEvent:
		a.logf("%v", ev)
	}
	return 0, false
}

// tick polls the keyboard, moves the square and reports state changes.
func (a *app) tick() error {
	now := time.Now()
	dt := now.Sub(a.lastTick).Seconds()
	a.lastTick = now
	if !a.ready {
		return nil
	}
	km, err := xproto.QueryKeymap(a.conn).Reply()
	if err != nil {
		return err
	}
	var lines []string
	var vx, vy float64
	for _, k := range a.keys {
		down := slices.ContainsFunc(k.codes, func(c xproto.Keycode) bool {
			return (km.Keys[c/8]|a.latched[c/8])&(1<<(c%8)) != 0
		})
		if down != k.down {
			k.down = down
			state := "up"
			if down {
				state = "down"
			}
			lines = append(lines, fmt.Sprintf("key %s %s", k.name, state))
		}
		if down {
			vx, vy = vx+k.dx, vy+k.dy
		}
	}
	a.latched = [32]byte{}

	moving := vx != 0 || vy != 0
	if moving && a.cfg.stepPX == 0 {
		a.x += vx * a.cfg.speed * dt
		a.y += vy * a.cfg.speed * dt
		a.clamp()
		a.draw()
	}
	if a.moving && !moving {
		lines = append(lines, a.posLine())
	}
	a.moving = moving
	if len(lines) == 0 {
		return nil
	}
	if err := a.sync(); err != nil { // what we report is on screen
		return err
	}
	for _, l := range lines {
		say("%s", l)
	}
	return nil
}

// posLine is the "at" protocol line for the current position.
func (a *app) posLine() string {
	x, y := a.pos()
	return fmt.Sprintf("at x=%d y=%d", x, y)
}

// clamp keeps the square inside the window.
func (a *app) clamp() {
	a.x = min(max(a.x, 0), float64(a.w-squareSize))
	a.y = min(max(a.y, 0), float64(a.h-squareSize))
}

// pos is the square's position rounded to pixels.
func (a *app) pos() (int16, int16) {
	return int16(math.Round(a.x)), int16(math.Round(a.y))
}

// fill paints a rectangle of the back buffer.
func (a *app) fill(gc xproto.Gcontext, x, y int16, w, h int) {
	xproto.PolyFillRectangle(a.conn, xproto.Drawable(a.buf), gc,
		[]xproto.Rectangle{{X: x, Y: y, Width: uint16(w), Height: uint16(h)}})
}

// present copies a rectangle of the back buffer to the window. It is a single
// request, so nobody (e.g. a screenshot) ever sees a half-drawn frame.
func (a *app) present(x, y int16, w, h int) {
	xproto.CopyArea(a.conn, xproto.Drawable(a.buf), xproto.Drawable(a.win), a.bgGC,
		x, y, x, y, uint16(w), uint16(h))
}

// draw moves the square: erase the old rectangle, fill the new one, and
// present the area covering both.
func (a *app) draw() {
	x, y := a.pos()
	ox, oy := a.drawnX, a.drawnY
	if x == ox && y == oy {
		return
	}
	a.fill(a.bgGC, ox, oy, squareSize, squareSize)
	a.fill(a.fgGC, x, y, squareSize, squareSize)
	a.drawnX, a.drawnY = x, y
	minX, minY := min(x, ox), min(y, oy)
	a.present(minX, minY, int(max(x, ox)-minX)+squareSize, int(max(y, oy)-minY)+squareSize)
}

// redraw repaints the whole back buffer and window.
func (a *app) redraw() {
	a.drawnX, a.drawnY = a.pos()
	a.fill(a.bgGC, 0, 0, a.w, a.h)
	a.fill(a.fgGC, a.drawnX, a.drawnY, squareSize, squareSize)
	a.present(0, 0, a.w, a.h)
}

// sync waits until the server has processed every request sent so far.
func (a *app) sync() error {
	_, err := xproto.GetInputFocus(a.conn).Reply()
	return err
}
