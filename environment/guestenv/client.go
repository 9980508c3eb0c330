// Package guestenv is the host side of the guest protocol. Every backend
// starts the same guest (`agentbox guest`) in its own way and hands the
// guest's stdio to Dial; what follows — staging, launching, screenshots,
// input — is the same for all of them.
package guestenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/version"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

// Paths inside the sandbox (all on the writable tmpfs).
const (
	Home   = "/tmp/home"
	AppDir = "/tmp/app"
)

// Client drives one guest.
type Client struct {
	conn   *wire.Conn
	events environment.Events
	hello  wire.Hello
	start  wire.StartResponse

	mu       sync.Mutex
	last     *observe.Frame // the newest frame, reused while the screen is unchanged
	lastHash uint64
	// payloads is the buffer a screenshot's payload is read into
	// (wire.Header.PayloadBuf), given back once the frame is decoded.
	payloads payloadSlot

	served chan struct{}
	logf   func(string)
	sw     screenWatch // the screen events' subscribers (watch.go)

	// What the guest may send (bounds.go).
	handshaken atomic.Bool
	screen     atomic.Pointer[observe.Screen]
	budgets    budgets

	timing    timing                // deadlines and the liveness check (deadline.go)
	calls     atomic.Int32          // requests awaiting an answer (pings not counted)
	busySince atomic.Int64          // when calls last rose from 0 (unix nanoseconds)
	stalled   atomic.Pointer[error] // why the guest was given up on

	// FullFrames disables the unchanged-frame shortcut.
	FullFrames bool
	// A11y makes Start start the accessibility bus.
	A11y bool
	// NoGLX makes Start start the X server without GLX.
	NoGLX bool
	// Observe makes the guest run the trusted observer from the launch.
	Observer bool
	// Net is the sandbox's network, sent with start.
	Net *wire.NetSetup

	// tunnel carries the network's connections over the stream
	// (NetSetup.Channel; CarryNetwork).
	tunnel atomic.Pointer[wire.Tunnel]
}

// CarryNetwork carries the connections the guest opens over the stream
// (NetSetup.Channel) to dial, which connects a socket by its name; call it
// before Start. The connections end with the stream.
func (c *Client) CarryNetwork(dial func(socket string) (net.Conn, error)) {
	t := wire.NewTunnel(func(method string, s wire.NetStream, payload []byte) error {
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		return c.conn.Write(&wire.Header{Type: wire.Request, Method: method, Body: b}, payload)
	}, dial, maxTunnelled)
	c.tunnel.Store(t)
	select {
	case <-c.served:
		t.Close() // the stream has ended already
	default:
	}
}

// maxTunnelled bounds the connections open at once over the stream (the
// guest relays at most 512).
const maxTunnelled = 512

// closeTunnel ends the connections carried over the stream.
func (c *Client) closeTunnel() {
	if t := c.tunnel.Load(); t != nil {
		t.Close()
	}
}

// Dial performs the handshake on a guest's stdio: it reads the guest's
// hello, checks magic and protocol, answers with the host's hello and starts
// reading. r is the guest's stdout, w its stdin.
func Dial(ctx context.Context, r io.Reader, w io.Writer, events environment.Events, logf func(string)) (*Client, error) {
	return dial(ctx, r, w, events, logf, defaultTiming)
}

func dial(ctx context.Context, r io.Reader, w io.Writer, events environment.Events, logf func(string), tm timing) (*Client, error) {
	c := &Client{conn: wire.NewConn(r, w), events: events, served: make(chan struct{}), logf: logf, timing: tm}
	c.sw.calls, c.sw.subs = make(chan struct{}, 1), map[chan struct{}]struct{}{}
	c.conn.SetLimit(c.check)
	type first struct {
		m   *wire.Message
		err error
	}
	ch := make(chan first, 1)
	go func() {
		m, err := c.conn.ReadFrame()
		ch <- first{m, err}
	}()
	var f first
	select {
	case f = <-ch:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: no hello from the guest: %w", environment.ErrGuest, ctx.Err())
	}
	if f.err != nil {
		if errors.Is(f.err, io.EOF) {
			return nil, fmt.Errorf("%w: the guest exited before saying hello", environment.ErrGuest)
		}
		return nil, fmt.Errorf("%w: reading the guest's hello: %w", environment.ErrGuest, f.err)
	}
	if f.m.Type != wire.Event || f.m.Method != wire.EventHello {
		return nil, fmt.Errorf("%w: the guest's first frame is %s %q, not hello", environment.ErrGuest, f.m.Type, f.m.Method)
	}
	if err := json.Unmarshal(f.m.Body, &c.hello); err != nil || c.hello.Magic != wire.Magic {
		return nil, fmt.Errorf("%w: the guest's hello is not agentbox's", environment.ErrGuest)
	}
	c.hello.Version = clip(c.hello.Version, 64)
	c.handshaken.Store(true)
	if c.hello.Protocol != wire.Protocol {
		return nil, fmt.Errorf("%w: guest speaks protocol %d (agentbox %s), host speaks %d (agentbox %s)",
			environment.ErrGuest, c.hello.Protocol, c.hello.Version, wire.Protocol, version.Version)
	}
	go func() {
		defer close(c.served)
		_ = c.conn.Serve(c.handle)
		c.closeWatch()
		c.closeTunnel()
	}()
	closer, _ := w.(io.Closer)
	go c.watch(closer)
	in := wire.Hello{Magic: wire.Magic, Protocol: wire.Protocol, Version: version.Version}
	if _, err := c.call(ctx, wire.MethodHello, 0, in, nil, nil); err != nil {
		return nil, c.wrap("hello", err)
	}
	return c, nil
}

// GuestVersion is the agentbox version the guest reported.
func (c *Client) GuestVersion() string { return c.hello.Version }

// Done is closed when the guest's stream has ended.
func (c *Client) Done() <-chan struct{} { return c.conn.Done() }

// Err says why the stream ended.
func (c *Client) Err() error { return c.conn.Err() }

// wrap classifies an error from a call.
func (c *Client) wrap(what string, err error) error {
	if serr := c.stallError(what, err); serr != nil {
		return serr
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, wire.ErrClosed):
		// Before the context's errors: a stream ended by its backend
		// (a Pod being deleted cancels its attach stream) wraps
		// context.Canceled too, and is the guest gone, not the caller
		// giving up (a caller's context ending is never ErrClosed).
		return fmt.Errorf("%w: %s: the guest's stream ended: %w", environment.ErrGuest, what, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w", what, err)
	case wire.IsCode(err, wire.CodeInvalid), wire.IsCode(err, wire.CodeNotFound), wire.IsCode(err, wire.CodeTimeout):
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%w: %s: %w", environment.ErrGuest, what, err)
}

// Start brings up the display (the zero Screen is observe.DefaultScreen)
// and the window manager, and the accessibility bus with A11y.
func (c *Client) Start(ctx context.Context, screen observe.Screen, noWM bool, timeout time.Duration) (wire.StartResponse, error) {
	s, err := c.sendStart(screen, noWM, timeout)
	if err != nil {
		return c.start, err
	}
	return c.waitStart(ctx, s)
}

// sendStart sends Start's request; waitStart waits for its answer.
// Requests sent between them (the app's files) wait in the guest for the
// display.
func (c *Client) sendStart(screen observe.Screen, noWM bool, timeout time.Duration) (*sent, error) {
	screen = screen.OrDefault()
	if err := screen.Validate(); err != nil {
		return nil, fmt.Errorf("start display: screen %v: %w", screen, err)
	}
	c.screen.Store(&screen) // screenshots are bounded by it
	req := wire.StartRequest{
		Screen:    screen,
		NoWM:      noWM,
		NoGLX:     c.NoGLX,
		A11y:      c.A11y,
		Observe:   c.Observer,
		Home:      Home,
		AppDir:    AppDir,
		TimeoutMS: int(timeout / time.Millisecond),
		Net:       c.Net,
	}
	s, err := c.send(wire.MethodStart, timeout, req, nil)
	if err != nil {
		return nil, c.wrap("start display", err)
	}
	return s, nil
}

func (c *Client) waitStart(ctx context.Context, s *sent) (wire.StartResponse, error) {
	if _, err := c.wait(ctx, s, &c.start); err != nil {
		return c.start, c.wrap("start display", err)
	}
	c.start.Display = clip(c.start.Display, 64)
	return c.start, nil
}

// chunk is the largest piece of a file sent in one frame.
const chunk = 1 << 20

// inFlight bounds the write_file requests on their way at once (a
// stager's): the guest queues what it has read, so this bounds its memory
// too (8 chunks: 8 MiB).
const inFlight = 8

// stager sends write_file requests without waiting for each answer (the
// guest writes them in turn, in the order sent), at most inFlight at a
// time: a file's chunks cross the channel while the guest writes the ones
// before them. after bounds the first answers: what the guest works on
// before them (the display's start when the app is staged beside it).
type stager struct {
	c     *Client
	after time.Duration
	q     []*sent
	whats []string
	err   error
}

// send sends one request; what names it in errors.
func (s *stager) send(ctx context.Context, what string, req wire.WriteFileRequest, payload []byte) error {
	if s.err != nil {
		return s.err
	}
	if len(s.q) >= inFlight {
		s.waitOne(ctx)
		if s.err != nil {
			return s.err
		}
	}
	p, err := s.c.send(wire.MethodWriteFile, s.after, req, payload)
	if err != nil {
		s.err = s.c.wrap(what, err)
		return s.err
	}
	s.q, s.whats = append(s.q, p), append(s.whats, what)
	return nil
}

func (s *stager) waitOne(ctx context.Context) {
	p, what := s.q[0], s.whats[0]
	s.q, s.whats = s.q[1:], s.whats[1:]
	if _, err := s.c.wait(ctx, p, nil); err != nil && s.err == nil {
		s.err = s.c.wrap(what, err)
	}
}

// flush waits for every answer owed and returns the first error.
func (s *stager) flush(ctx context.Context) error {
	for len(s.q) > 0 {
		s.waitOne(ctx)
	}
	return s.err
}

// Stage streams the bundle's files into the app directory and returns the
// SHA-256 of each regular file (hex), computed from the bytes sent.
func (c *Client) Stage(ctx context.Context, b *app.Bundle) (map[string]string, error) {
	return c.stageBehind(ctx, b, 0).flush(ctx)
}

// staging is an app's files sent (stageBehind) whose answers are owed.
type staging struct {
	st   *stager
	sums map[string]string
	err  error // from the sending (a file that could not be read)
}

// flush waits for the answers and returns the files' hashes, or the first
// error.
func (s *staging) flush(ctx context.Context) (map[string]string, error) {
	if err := s.st.flush(ctx); err != nil {
		return nil, err
	}
	if s.err != nil {
		return nil, s.err
	}
	return s.sums, nil
}

// stageBehind sends the bundle's files, waiting only when inFlight
// requests are owed; after bounds the first answers (what the guest works
// on before them: the display's start when the files go right behind it).
func (c *Client) stageBehind(ctx context.Context, b *app.Bundle, after time.Duration) *staging {
	return c.sendFiles(ctx, b.Files, b, b.Dir, false, "stage ", after)
}

// sendFiles sends files (read through op; dir names them in errors) into
// the app directory, or below the home with home; what prefixes a file's
// name in errors.
func (c *Client) sendFiles(ctx context.Context, files []app.File, op opener, dir string, home bool, what string, after time.Duration) *staging {
	s := &staging{st: &stager{c: c, after: after}, sums: map[string]string{}}
	buf := make([]byte, chunk)
	for _, f := range files {
		req := wire.WriteFileRequest{Path: f.Rel, Mode: uint32(f.Mode.Perm()), Home: home}
		switch {
		case f.Mode.IsDir():
			req.Dir = true
			s.err = s.st.send(ctx, what+f.Rel, req, nil)
		case f.Link != "":
			lr := wireLink(f)
			lr.Home = home
			s.err = s.st.send(ctx, what+f.Rel, lr, nil)
		default:
			var sum string
			if sum, s.err = c.stageFile(ctx, s.st, op, dir, f, req, buf); s.err == nil {
				s.sums[f.Rel] = sum
			}
		}
		if s.err != nil {
			break
		}
	}
	return s
}

func wireLink(f app.File) wire.WriteFileRequest {
	return wire.WriteFileRequest{Path: f.Rel, Link: f.Link}
}

// StageInputs streams a task's inputs below the home and returns the
// SHA-256 of each regular file (hex), computed from the bytes sent.
func (c *Client) StageInputs(ctx context.Context, in *app.Inputs) (map[string]string, error) {
	return c.sendFiles(ctx, in.Files, in, "~", true, "stage input ", 0).flush(ctx)
}

// StagePreset writes a backend's preset files below the home, with the
// directories above them (a directory that exists is kept); the guest
// checks each path as it checks the app's.
func (c *Client) StagePreset(ctx context.Context, files []PresetFile) error {
	made := map[string]bool{}
	for _, f := range files {
		parts := strings.Split(f.Path, "/")
		for i := 1; i < len(parts); i++ {
			dir := strings.Join(parts[:i], "/")
			if made[dir] {
				continue
			}
			made[dir] = true
			req := wire.WriteFileRequest{Path: dir, Mode: 0o700, Dir: true, Home: true}
			if _, err := c.call(ctx, wire.MethodWriteFile, 0, req, nil, nil); err != nil {
				return c.wrap("stage preset "+dir, err)
			}
		}
		req := wire.WriteFileRequest{Path: f.Path, Mode: 0o600, Home: true}
		if _, err := c.call(ctx, wire.MethodWriteFile, 0, req, nil, f.Data); err != nil {
			return c.wrap("stage preset "+f.Path, err)
		}
	}
	return nil
}

// opener opens a staged file by its path.
type opener interface {
	Open(rel string) (io.ReadCloser, error)
}

func (c *Client) stageFile(ctx context.Context, st *stager, b opener, dir string, f app.File, req wire.WriteFileRequest, buf []byte) (string, error) {
	r, err := b.Open(f.Rel)
	if err != nil {
		return "", fmt.Errorf("%w: %w", app.ErrInvalid, err)
	}
	defer r.Close()
	h := sha256.New()
	var sent int64
	for first := true; ; first = false {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 || first {
			req.Append = !first
			// buf is written out before send returns: it can be refilled.
			if err := st.send(ctx, "stage "+f.Rel, req, buf[:n]); err != nil {
				return "", err
			}
			h.Write(buf[:n])
			sent += int64(n)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return "", fmt.Errorf("stage %s: %w", path.Join(dir, f.Rel), rerr)
		}
	}
	if sent != f.Size {
		return "", fmt.Errorf("%w: %s changed size while staging (%d bytes, expected %d)", app.ErrInvalid, f.Rel, sent, f.Size)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Launch starts the app and waits for its window.
func (c *Client) Launch(ctx context.Context, spec environment.LaunchSpec, extraEnv []string) (environment.LaunchResult, error) {
	m := spec.App.Manifest
	req := wire.LaunchRequest{
		Command:     m.Command,
		InImage:     spec.App.InImage,
		Args:        m.Args,
		WindowTitle: m.WindowTitle,
		WaitWindow:  m.Waits(),
		ReadyMS:     int(spec.ReadyTimeout / time.Millisecond),
		LogCap:      spec.LogCap,
	}
	if !spec.Clock.IsZero() {
		req.ClockNS = spec.Clock.UnixNano()
	}
	c.budgets.logCap.Store(spec.LogCap)
	req.Env = append(req.Env, extraEnv...)
	for k, v := range m.Env {
		req.Env = append(req.Env, k+"="+v)
	}
	var resp wire.LaunchResponse
	bound := maxRequest // the guest waits for the window without a limit of its own
	if req.ReadyMS > 0 {
		bound = time.Duration(req.ReadyMS)*time.Millisecond + 2*xCall
	}
	if spec.Observe && !c.FullFrames {
		c.mu.Lock()
		req.Screenshot = &wire.ScreenshotRequest{IfNot: c.lastHash, WithState: true}
		c.mu.Unlock()
	} else if spec.Observe {
		req.Screenshot = &wire.ScreenshotRequest{WithState: true}
	}
	if req.Screenshot != nil {
		req.ReadyOutput = m.ReadyOutput // the screenshot shows the app once it says it is ready
	}
	if req.Screenshot != nil && bound != maxRequest {
		bound += 2 * xCall
	}
	payload, err := c.call(ctx, wire.MethodLaunch, bound, req, &resp, nil)
	if err != nil {
		switch {
		case wire.IsCode(err, wire.CodeNotFound):
			return environment.LaunchResult{}, fmt.Errorf("%w: %w", environment.ErrAppStart, err)
		case wire.IsCode(err, wire.CodeTimeout):
			return environment.LaunchResult{}, fmt.Errorf("%w: %w", environment.ErrNoWindow, err)
		case wire.IsCode(err, wire.CodeAppExited):
			return environment.LaunchResult{}, fmt.Errorf("%w: %w", environment.ErrAppExited, err)
		case req.ClockNS != 0 && wire.IsCode(err, wire.CodeInvalid):
			return environment.LaunchResult{}, fmt.Errorf("%w: %w", environment.ErrAppStart, err)
		}
		return environment.LaunchResult{}, c.wrap("launch", err)
	}
	if resp.ClockNS != req.ClockNS {
		return environment.LaunchResult{}, c.wrap("launch", fmt.Errorf("asked for a virtual clock at %d ns, the guest launched the app at %d (a guest that does not know it)", req.ClockNS, resp.ClockNS))
	}
	if resp.Window != nil {
		w := clipWindow(*resp.Window)
		resp.Window = &w
	}
	r := environment.LaunchResult{
		PID:    resp.PID,
		Window: resp.Window,
		Ready:  time.Duration(resp.ReadyUS) * time.Microsecond,
	}
	if req.Screenshot != nil && resp.Screenshot != nil {
		f, st, err := c.screenshotResult(resp.Screenshot, payload)
		if err != nil {
			return r, fmt.Errorf("%w: launch: the first screenshot: %w", environment.ErrGuest, err)
		}
		r.Frame, r.State = f, &st
	}
	return r, nil
}

// screenshotResult makes a screenshot's answer a frame and the state, as
// Observe does (an unchanged screen is the frame kept).
func (c *Client) screenshotResult(resp *wire.ScreenshotResponse, payload []byte) (*observe.Frame, environment.State, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var st environment.State
	if resp.State != nil {
		st = environment.State{Cursor: resp.State.Cursor, Windows: clipWindows(resp.State.Windows), Running: resp.State.Running, Exit: clipExitPtr(resp.State.Exit)}
	}
	if resp.Unchanged && c.last != nil {
		return c.last, st, nil
	}
	f, err := c.decode(resp, payload)
	if err != nil {
		return nil, st, err
	}
	c.last, c.lastHash = f, resp.Hash
	return f, st, nil
}

// Observe takes a screenshot together with the desktop state. An unchanged
// screen costs no pixel transfer: the previous frame is returned again.
func (c *Client) Observe(ctx context.Context) (*observe.Frame, environment.State, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	req := c.shotRequest()
	var resp wire.ScreenshotResponse
	payload, err := c.call(ctx, wire.MethodScreenshot, 2*xCall, req, &resp, nil)
	if err != nil {
		return nil, environment.State{}, c.wrap("screenshot", err)
	}
	defer c.payloads.put(payload)
	return c.shot(&resp, payload)
}

// shotRequest is the screenshot an observation asks for; c.mu is held.
func (c *Client) shotRequest() wire.ScreenshotRequest {
	req := wire.ScreenshotRequest{IfNot: c.lastHash, WithState: true}
	if c.FullFrames {
		req.IfNot = 0
	}
	return req
}

// shot makes the observation of a screenshot's answer; c.mu is held.
func (c *Client) shot(resp *wire.ScreenshotResponse, payload []byte) (*observe.Frame, environment.State, error) {
	var st environment.State
	if resp.State != nil {
		st = environment.State{Cursor: resp.State.Cursor, Windows: clipWindows(resp.State.Windows), Running: resp.State.Running, Exit: clipExitPtr(resp.State.Exit)}
	}
	if resp.Unchanged && c.last != nil {
		return c.last, st, nil
	}
	f, err := c.decode(resp, payload)
	if err != nil {
		return nil, st, fmt.Errorf("%w: screenshot: %w", environment.ErrGuest, err)
	}
	c.last, c.lastHash = f, resp.Hash
	return f, st, nil
}

func (c *Client) decode(resp *wire.ScreenshotResponse, payload []byte) (*observe.Frame, error) {
	if resp.Encoding != wire.EncodingBGRXS2 {
		return nil, fmt.Errorf("unknown pixel encoding %q", resp.Encoding)
	}
	// check refused frames larger than the screen before reading them;
	// this is the same bound again, next to the allocations.
	w, h := resp.Width, resp.Height
	if sc := c.screen.Load(); sc == nil || w <= 0 || h <= 0 || w > sc.Width || h > sc.Height {
		return nil, fmt.Errorf("bad frame size %dx%d", w, h)
	}
	n, err := s2.DecodedLen(payload)
	if err != nil || n != 4*w*h {
		return nil, fmt.Errorf("frame payload decodes to %d bytes, want %d (%v)", n, 4*w*h, err)
	}
	pix, err := decodeFrame(payload, n)
	if err != nil {
		return nil, fmt.Errorf("decompress frame: %w", err)
	}
	return &observe.Frame{Width: w, Height: h, Pix: pix, Hash: resp.Hash}, nil
}

// Act performs one action in the guest. Errors the action caused come back
// in the Result.
func (c *Client) Act(ctx context.Context, a action.Action) (action.Result, error) {
	var res action.Result
	_, err := c.call(ctx, wire.MethodAct, actBound(a), wire.ActRequest{Action: a}, &res, nil)
	if err != nil {
		if wire.IsCode(err, wire.CodeInvalid) || wire.IsCode(err, wire.CodeTimeout) {
			return action.Result{OK: false, Error: err.Error()}, nil
		}
		return res, c.wrap(a.String(), err)
	}
	res.Error = clip(res.Error, MaxText)
	return res, nil
}

// Step performs an action, lets the screen settle (a wait until stable,
// when settle is set) and takes the observation after it, in one round
// trip (wire.MethodStep). The action's result and error are Act's; the
// observation is nil when it could not be taken with it (the action
// failed, or the settle or the screenshot did: Observe says why).
func (c *Client) Step(ctx context.Context, a action.Action, settle *action.Action) (action.Result, *environment.Stepped, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	req := wire.StepRequest{Action: a, Settle: settle, Screenshot: c.shotRequest()}
	bound := actBound(a) + 2*xCall
	if settle != nil {
		bound += actBound(*settle)
	}
	var resp wire.StepResponse
	payload, err := c.call(ctx, wire.MethodStep, bound, req, &resp, nil)
	if err != nil {
		if wire.IsCode(err, wire.CodeInvalid) || wire.IsCode(err, wire.CodeTimeout) {
			return action.Result{OK: false, Error: err.Error()}, nil, nil
		}
		return action.Result{}, nil, c.wrap(a.String(), err)
	}
	res := resp.Result
	res.Error = clip(res.Error, MaxText)
	if resp.Shot == nil {
		return res, nil, nil
	}
	f, st, err := c.shot(resp.Shot, payload)
	c.payloads.put(payload)
	if err != nil {
		return res, nil, err
	}
	s := &environment.Stepped{Frame: f, State: st, Observe: time.Duration(resp.ObserveUS) * time.Microsecond}
	if resp.Settled != nil {
		r := *resp.Settled
		r.Error = clip(r.Error, MaxText)
		s.Settled = &r
	}
	return res, s, nil
}

// SetClock moves the app's virtual clock to t (wire.MethodClock).
func (c *Client) SetClock(ctx context.Context, t time.Time) error {
	var resp wire.ClockResponse
	if _, err := c.call(ctx, wire.MethodClock, xCall, wire.ClockRequest{NowNS: t.UnixNano()}, &resp, nil); err != nil {
		return c.wrap("clock", err)
	}
	return nil
}

// Tree reads the accessibility tree (the sandbox must have been started
// with its bus). The guest bounds the read by lim's timeout; the host
// adds its slack, and brings what it gets within lim's bounds.
func (c *Client) Tree(ctx context.Context, lim observe.TreeLimits) (*observe.Tree, error) {
	lim = lim.OrDefault()
	var t observe.Tree
	_, err := c.call(ctx, wire.MethodA11yTree, time.Duration(lim.TimeoutMS)*time.Millisecond+xCall, wire.A11yTreeRequest{Limits: lim}, &t, nil)
	if err != nil {
		return nil, c.wrap("accessibility tree", err)
	}
	return clipTree(&t, lim.MaxNodes), nil
}

// Activity is a checkpoint of the trusted observer, bounded as the host
// bounds everything the guest says.
func (c *Client) Activity(ctx context.Context) ([]observe.ActivityEvent, error) {
	var resp wire.ActivityResponse
	// Hashing the checkpoint's written files is bounded in the guest (64
	// MiB): the deadline allows for it on a slow disk.
	_, err := c.call(ctx, wire.MethodActivity, 30*time.Second, wire.ActivityRequest{MaxEvents: maxActivity}, &resp, nil)
	if err != nil {
		return nil, c.wrap("activity", err)
	}
	return clipActivity(resp.Events), nil
}

// Stop ends the app, releases held input and stops the display. It returns
// the app's exit if it was still running.
func (c *Client) Stop(ctx context.Context, grace time.Duration) (*observe.Exit, error) {
	var resp wire.StopResponse
	// The guest ends the app (grace, then SIGKILL and 2 s), then the
	// desktop (the same again).
	_, err := c.call(ctx, wire.MethodStop, 2*(grace+2*time.Second)+xCall, wire.StopRequest{GraceMS: int(grace / time.Millisecond)}, &resp, nil)
	if err != nil {
		return nil, c.wrap("stop", err)
	}
	return clipExitPtr(resp.Exit), nil
}

// Reset asks the guest to reset the sandbox in place for the next launch
// (wire.MethodReset). The app's exit and its windows' going reach events
// before Reset returns; what comes after is the next app's.
func (c *Client) Reset(ctx context.Context) (wire.ResetResponse, error) {
	var resp wire.ResetResponse
	_, err := c.call(ctx, wire.MethodReset, resetBound, wire.ResetRequest{}, &resp, nil)
	if err != nil {
		return resp, c.wrap("reset", err)
	}
	resp.Exit = clipExitPtr(resp.Exit)
	return resp, nil
}

// resetBound bounds a reset in the guest: the processes' end (3 s), the
// X server's reset, the windows' going (1 s) and the directories.
const resetBound = 15 * time.Second

// RelaunchFloor asks the guest to time the least a relaunch costs in its
// sandbox (wire.MethodRelaunchFloor).
func (c *Client) RelaunchFloor(ctx context.Context) (wire.RelaunchFloorResponse, error) {
	var resp wire.RelaunchFloorResponse
	_, err := c.call(ctx, wire.MethodRelaunchFloor, resetBound+30*time.Second, wire.RelaunchFloorRequest{}, &resp, nil)
	if err != nil {
		return resp, c.wrap("relaunch_floor", err)
	}
	if resp.KillUS < 0 || resp.StartUS < 0 || resp.CaptureUS < 0 {
		return resp, c.wrap("relaunch_floor", fmt.Errorf("%w: a negative duration", environment.ErrGuest))
	}
	return resp, nil
}

// HoldApp asks the guest to stop the app's processes (hold) or continue
// them (wire.MethodHoldApp).
func (c *Client) HoldApp(ctx context.Context, hold bool) (wire.HoldAppResponse, error) {
	var resp wire.HoldAppResponse
	_, err := c.call(ctx, wire.MethodHoldApp, holdBound, wire.HoldAppRequest{Hold: hold}, &resp, nil)
	return resp, c.wrap("hold_app", err)
}

// holdBound bounds a hold in the guest: a walk of /proc and a signal to
// each of the app's processes.
const holdBound = 10 * time.Second

// Ping checks the guest answers.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.call(ctx, wire.MethodPing, 0, nil, nil, nil)
	return c.wrap("ping", err)
}

// Floor asks the guest to time a step's primitives alone
// (wire.MethodFloor): samples of each (with unchanged, only those of an
// unchanged screen's step), the first sample's motion to the from-th
// point of the sequence, and png PNG encodes.
func (c *Client) Floor(ctx context.Context, samples, from, png int, unchanged bool) (wire.FloorResponse, error) {
	var resp wire.FloorResponse
	// Each sample is a motion, a capture, a hash and a compression, and
	// each PNG encode one encode: well below 50 ms each even at 4K on a
	// busy machine.
	bound := time.Duration(samples+png)*50*time.Millisecond + 30*time.Second
	_, err := c.call(ctx, wire.MethodFloor, bound, wire.FloorRequest{Samples: samples, From: from, PNG: &png, Unchanged: unchanged}, &resp, nil)
	if err != nil {
		return resp, c.wrap("floor", err)
	}
	if n := samples; len(resp.Motion) > n || len(resp.Capture) > n || len(resp.Damage) > n || len(resp.Hash) > n || len(resp.Encode) > n || len(resp.PNG) > png {
		return resp, c.wrap("floor", fmt.Errorf("%w: more timings than the %d samples and %d PNG encodes asked for", environment.ErrGuest, n, png))
	}
	return resp, nil
}

// FloorFrame is one round trip of a request whose answer carries the
// screen's last captured pixels, compressed as a screenshot's
// (wire.FloorRequest.Frame); it returns the payload.
func (c *Client) FloorFrame(ctx context.Context) ([]byte, error) {
	p, err := c.call(ctx, wire.MethodFloor, 10*time.Second, wire.FloorRequest{Frame: true}, nil, nil)
	if err != nil {
		return nil, c.wrap("floor", err)
	}
	return p, nil
}

// WaitServed waits until the read loop has ended (after the stream closed).
func (c *Client) WaitServed(ctx context.Context) {
	select {
	case <-c.served:
	case <-ctx.Done():
	}
}
