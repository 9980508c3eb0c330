// Package guest is the in-sandbox supervisor, run as `agentbox guest`: the
// init (PID 1) of the sandbox's PID namespace, which reaps orphans and
// cannot be signalled from inside (init.go). It speaks the wire protocol on
// stdin/stdout, which no other process holds, starts Xvfb, Openbox and the
// app, holds one X connection for screenshots (MIT-SHM) and input (XTEST),
// forwards the app's output and exit, and ends everything when its stdin
// closes.
package guest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/codegirl-games/agentbox/guest/atspi"
	"github.com/codegirl-games/agentbox/guest/x11"
	"github.com/codegirl-games/agentbox/guest/xserver"
	"github.com/codegirl-games/agentbox/internal/fds"
	"github.com/codegirl-games/agentbox/internal/version"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"

	// The local backend's limits, which every guest binary sets on itself
	// before main.
	_ "github.com/codegirl-games/agentbox/internal/guestlimits"
)

// Options configure the guest process.
type Options struct {
	// Sandboxed allows the guest, when it stops, to kill every process it
	// can see (detached daemons the app left behind). Backends set it; it is
	// refused unless the guest runs in its own PID namespace.
	Sandboxed bool
	// AwaitHost makes the guest read wire.GoAhead from stdin before it
	// says hello: the host of a sandbox it can attach to only once the
	// guest runs (a Kubernetes Pod) sends it when it listens. Stdin closed
	// before that ends the guest quietly (the host gave up).
	AwaitHost bool
	// Display, when set, is the screen the host will ask for: the guest
	// brings the display up as soon as it runs (prestart.go), with the
	// window manager when DisplayWM. A start request that asks for
	// another stops it and starts its own.
	Display   *observe.Screen
	DisplayWM bool
	// DisplayNoGLX: with Display, the X server starts without GLX.
	DisplayNoGLX bool
	// CPUProfile, when set, is the name of a file in the home the guest
	// writes a CPU profile to, from start to stop (profile.go; for
	// developers, never set by default).
	CPUProfile string
}

// Guest is the supervisor's state.
type Guest struct {
	opts Options
	prof cpuProfile
	conn *wire.Conn
	logw io.Writer // diagnostics (stderr)

	server *xserver.Server
	early  atomic.Pointer[earlyDisplay] // brought up at the start (prestart.go)
	wm     *xserver.WM
	x      *x11.Conn
	screen observe.Screen
	home   string
	appDir string

	app  *appProc
	oom  appOOM    // starts the app with its OOM score (harden.go)
	base *baseline // what a reset returns to (reset.go)
	// staged is the guest's copy of what the host staged into the app
	// directory, for a reset to restage it (reset.go).
	staged stagedApp
	bus    *atspi.Bus // the accessibility bus, when asked for
	net    *netRelay  // the sandbox's ports relayed to the host's sockets (net.go)
	// tunnel carries the relayed connections over the stream, where the
	// host asks for that (NetSetup.Channel); its frames are handled on
	// the read loop.
	tunnel *wire.Tunnel

	// observeOn starts the trusted observer with the app (observer.go);
	// obs is it once the app was launched.
	observeOn bool
	obs       *observer

	vclock *vclock // the app's virtual clock, when it was launched with one (clock.go)

	winMu   sync.Mutex
	windows []windowInfo // cache, refreshed on X notifications
	winCh   chan struct{}
	// refreshLimit, when non-zero (ns), replaces refreshTimeout (tests; a
	// negative one fails every read before it starts).
	refreshLimit atomic.Int64

	capBuf []byte
	encBuf []byte
	kept   keptFrame   // what encBuf and the last hash are of (display.go)
	sw     screenWatch // screen events (watch.go)
	// floorPix is the last frame the floor request captured (floor.go).
	floorPix, floorEnc []byte
	// launched is how the last launch started the app, for the relaunch
	// floor to start it again (relaunchfloor.go); nil before a launch.
	launched *launchSpec

	curMu     sync.Mutex
	curID     uint32
	curCancel context.CancelFunc

	stopOnce sync.Once
	// stopping names why the guest is stopping when a signal stopped it;
	// the app's exit event carries it so the host can tell "the sandbox
	// went away" from "the app quit".
	stopping atomic.Pointer[string]
}

type request struct {
	m *wire.Message
}

// Main runs the guest on the given stdio until stdin closes. It returns the
// process exit code.
func Main(stdin io.Reader, stdout io.Writer, stderr io.Writer, opts Options) int {
	g := newGuest(stdin, stdout, stderr, opts)
	// Nothing the guest inherited beyond stdio reaches Xvfb, Openbox or
	// the app.
	if err := fds.CloseOnExec(3); err != nil {
		fmt.Fprintf(stderr, "agentbox guest: %v\n", err)
		return 1
	}
	reserveThreads(guestThreads)
	if err := harden(&g.oom); err != nil {
		fmt.Fprintf(stderr, "agentbox guest: cannot make the guest non-dumpable: %v\n", err)
	}
	if opts.AwaitHost {
		if code, ok := awaitHost(stdin, stderr); !ok {
			return code
		}
	}
	if opts.Display != nil {
		// Before the hello: the display comes up while the host reads it,
		// answers and sends start (prestart.go).
		g.startEarly()
	}
	if err := g.hello(); err != nil {
		fmt.Fprintf(stderr, "agentbox guest: %v\n", err)
		if e := g.early.Swap(nil); e != nil {
			e.stop()
		}
		return 1
	}

	if isInit() {
		// The sandbox's init: nothing inside may stop it (see init.go).
		if err := initSignals(func(f string, a ...any) { g.logf("warn", f, a...) }); err != nil {
			g.logf("warn", "signals: %v", err)
		}
		startReaper(func(f string, a ...any) { g.logf("warn", f, a...) })
	} else {
		// Run some other way (by hand, in tests): a signal stops the guest
		// as it would any program.
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
		go func() {
			s := <-sigs
			why := "the guest received " + map[os.Signal]string{
				syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT", syscall.SIGHUP: "SIGHUP",
			}[s]
			g.stopping.Store(&why)
			g.logf("warn", "received %v; stopping", s)
			g.shutdown(2 * time.Second)
			os.Exit(0)
		}()
	}
	return g.serve()
}

// awaitHost reads the host's wire.GoAhead (Options.AwaitHost). It returns
// false with the exit code when the guest must not go on: stdin closed
// first (0) or brought something else (1).
func awaitHost(stdin io.Reader, stderr io.Writer) (int, bool) {
	var b [1]byte
	_, err := io.ReadFull(stdin, b[:])
	switch {
	case errors.Is(err, io.EOF):
		return 0, false
	case err != nil:
		fmt.Fprintf(stderr, "agentbox guest: waiting for the host: %v\n", err)
		return 1, false
	case b[0] != wire.GoAhead:
		fmt.Fprintf(stderr, "agentbox guest: the host's first byte is %#x, not the go-ahead %#x\n", b[0], wire.GoAhead)
		return 1, false
	}
	return 0, true
}

func newGuest(stdin io.Reader, stdout io.Writer, stderr io.Writer, opts Options) *Guest {
	g := &Guest{opts: opts, conn: wire.NewConn(stdin, stdout), logw: stderr, winCh: make(chan struct{}, 1)}
	g.tunnel = wire.NewTunnel(func(method string, s wire.NetStream, payload []byte) error {
		return g.conn.Notify(method, s, payload)
	}, nil, maxRelayed)
	return g
}

// hello is the guest's first frame: who it is and the protocol it speaks.
func (g *Guest) hello() error {
	return g.conn.Notify(wire.EventHello, wire.Hello{
		Magic: wire.Magic, Protocol: wire.Protocol, Version: version.Version, PID: os.Getpid(),
	}, nil)
}

// serve answers the host's requests until stdin closes, then ends
// everything the guest started; it returns the process exit code. Main
// runs it after the process-wide setup (descriptors, threads, dumpability,
// signals), which tests of the protocol leave out.
func (g *Guest) serve() int {
	reqs := make(chan request, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for r := range reqs {
			g.handle(r.m)
		}
	}()
	err := g.conn.Serve(func(m *wire.Message) {
		if m.Type != wire.Request {
			return
		}
		switch m.Method {
		case wire.MethodCancel:
			g.cancel(m)
			return
		case wire.MethodPing:
			// Answered here, not behind the request being worked on: the
			// host checks with it that the guest is alive (protocol 2).
			_ = g.conn.Reply(m.ID, m.Method, nil, nil, nil)
			return
		}
		if g.tunnel.Handle(m.Method, m.Body, m.Payload) {
			return // the network's bytes, beside the requests (protocol 7)
		}
		reqs <- request{m}
	})
	close(reqs)
	// The host is gone (stdin closed): end everything, quickly.
	g.cancelCurrent()
	g.shutdown(500 * time.Millisecond)
	<-done
	if err != nil {
		fmt.Fprintf(g.logw, "agentbox guest: stream: %v\n", err)
		return 1
	}
	return 0
}

func (g *Guest) logf(level, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(g.logw, "agentbox guest: %s: %s\n", level, msg)
	_ = g.conn.Notify(wire.EventLog, wire.LogEvent{Level: level, Msg: msg}, nil)
}

func (g *Guest) cancel(m *wire.Message) {
	var c wire.CancelRequest
	if json.Unmarshal(m.Body, &c) != nil {
		return
	}
	g.curMu.Lock()
	defer g.curMu.Unlock()
	if g.curID == c.ID && g.curCancel != nil {
		g.curCancel()
	}
}

func (g *Guest) cancelCurrent() {
	g.curMu.Lock()
	defer g.curMu.Unlock()
	if g.curCancel != nil {
		g.curCancel()
	}
}

// maxRequest bounds any single request inside the guest.
const maxRequest = 10 * time.Minute

func (g *Guest) handle(m *wire.Message) {
	ctx, cancel := context.WithTimeout(context.Background(), maxRequest)
	g.curMu.Lock()
	g.curID, g.curCancel = m.ID, cancel
	g.curMu.Unlock()
	defer func() {
		g.curMu.Lock()
		g.curID, g.curCancel = 0, nil
		g.curMu.Unlock()
		cancel()
	}()

	var (
		out     any
		payload []byte
		err     error
	)
	decode := func(v any) error {
		if len(m.Body) == 0 {
			return nil
		}
		if err := json.Unmarshal(m.Body, v); err != nil {
			return wire.Errorf(wire.CodeInvalid, "%s: bad request: %v", m.Method, err)
		}
		return nil
	}
	switch m.Method {
	case wire.MethodHello:
		var h wire.Hello
		if err = decode(&h); err == nil && h.Protocol != wire.Protocol {
			err = wire.Errorf(wire.CodeInvalid, "host speaks protocol %d, guest %d", h.Protocol, wire.Protocol)
		}
		out = wire.Hello{Magic: wire.Magic, Protocol: wire.Protocol, Version: version.Version, PID: os.Getpid()}
	case wire.MethodStart:
		var req wire.StartRequest
		if err = decode(&req); err == nil {
			out, err = g.start(ctx, req)
		}
	case wire.MethodWriteFile:
		var req wire.WriteFileRequest
		if err = decode(&req); err == nil {
			err = g.writeFile(req, m.Payload)
		}
	case wire.MethodLaunch:
		var req wire.LaunchRequest
		if err = decode(&req); err == nil {
			out, payload, err = g.launchObserved(ctx, req)
		}
	case wire.MethodScreenshot:
		var req wire.ScreenshotRequest
		if err = decode(&req); err == nil {
			out, payload, err = g.screenshot(ctx, req)
		}
	case wire.MethodAct:
		var req wire.ActRequest
		if err = decode(&req); err == nil {
			out, err = g.act(ctx, req.Action)
			g.screenChanged() // the pointer may have moved, which damages nothing
		}
	case wire.MethodStep:
		var req wire.StepRequest
		if err = decode(&req); err == nil {
			out, payload, err = g.step(ctx, req)
		}
	case wire.MethodClock:
		var req wire.ClockRequest
		if err = decode(&req); err == nil {
			out, err = g.clock(req)
		}
	case wire.MethodA11yTree:
		var req wire.A11yTreeRequest
		if err = decode(&req); err == nil {
			out, err = g.tree(ctx, req)
		}
	case wire.MethodCollect:
		var req wire.CollectRequest
		if err = decode(&req); err == nil {
			out, err = g.collect(ctx, req)
		}
	case wire.MethodReadFile:
		var req wire.ReadFileRequest
		if err = decode(&req); err == nil {
			out, payload, err = g.readFile(req)
		}
	case wire.MethodReset:
		var req wire.ResetRequest
		if err = decode(&req); err == nil {
			out, err = g.reset(ctx)
		}
	case wire.MethodActivity:
		var req wire.ActivityRequest
		if err = decode(&req); err == nil {
			out, err = g.activity(req)
		}
	case wire.MethodFloor:
		var req wire.FloorRequest
		if err = decode(&req); err == nil {
			out, payload, err = g.floor(ctx, req)
		}
	case wire.MethodRelaunchFloor:
		var req wire.RelaunchFloorRequest
		if err = decode(&req); err == nil {
			out, err = g.relaunchFloor(ctx)
		}
	case wire.MethodWatch:
		var req wire.WatchRequest
		if err = decode(&req); err == nil {
			out, err = g.watch(req)
		}
	case wire.MethodHoldApp:
		var req wire.HoldAppRequest
		if err = decode(&req); err == nil {
			out = g.holdApp(req)
		}
	case wire.MethodStop:
		var req wire.StopRequest
		if err = decode(&req); err == nil {
			out = g.stop(ctx, req)
		}
	default:
		err = wire.Errorf(wire.CodeInvalid, "unknown method %q", m.Method)
	}
	if err != nil && errors.Is(err, context.Canceled) {
		err = wire.Errorf(wire.CodeTimeout, "%s: cancelled", m.Method)
	}
	if rerr := g.conn.Reply(m.ID, m.Method, out, payload, err); rerr != nil {
		fmt.Fprintf(g.logw, "agentbox guest: reply: %v\n", rerr)
	}
}

// stop ends the app and the desktop but keeps the stream open so the host
// hears the answer.
func (g *Guest) stop(ctx context.Context, req wire.StopRequest) wire.StopResponse {
	grace := time.Duration(req.GraceMS) * time.Millisecond
	if grace <= 0 {
		grace = 2 * time.Second
	}
	var resp wire.StopResponse
	if g.x != nil {
		_ = g.x.ReleaseAll(ctx)
	}
	if g.app != nil {
		resp.Exit = g.app.terminate(grace)
	}
	g.shutdown(grace)
	g.prof.stop() // written before the answer, for the host to read back
	return resp
}

// shutdown stops everything the guest started; it is idempotent.
func (g *Guest) shutdown(grace time.Duration) {
	g.stopOnce.Do(func() {
		defer g.prof.stop()
		ctx, cancel := context.WithTimeout(context.Background(), grace+2*time.Second)
		defer cancel()
		if e := g.early.Swap(nil); e != nil {
			e.stop()
		}
		if g.x != nil {
			_ = g.x.ReleaseAll(ctx)
		}
		if g.app != nil {
			g.app.terminate(grace)
		}
		if g.bus != nil {
			g.bus.Stop()
		}
		if g.obs != nil {
			g.obs.close()
		}
		g.net.close()
		if g.opts.Sandboxed {
			killOthers()
		}
		if g.x != nil {
			g.x.Close()
		}
		if g.wm != nil {
			_ = g.wm.Stop(ctx)
		}
		if g.server != nil {
			_ = g.server.Stop(ctx)
		}
	})
}
