// Package guestenvtest is a guest for tests of the host side of the
// protocol. It speaks the wire protocol over in-process pipes, answers every
// request as a healthy guest would (a blank screen, one window, an app that
// keeps running), and lets a test write frames of its own at chosen moments:
// a hostile guest, or whatever else got hold of the guest's stdout. Backend
// wraps it as an environment.Backend so the real runtime, sink and trace
// writer can be driven by it.
package guestenvtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"

	"github.com/klauspost/compress/s2"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv"
	"github.com/codegirl-games/agentbox/environment/named"
	"github.com/codegirl-games/agentbox/internal/collectfs"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

// Guest is a scripted guest. Zero hooks make it a healthy guest.
type Guest struct {
	// OnLaunch runs when the launch request arrives, before it is
	// answered; it may write anything.
	OnLaunch func(w *Writer)
	// OnScreenshot, if set, may answer a screenshot request itself
	// (returning true); n counts screenshot requests from 1.
	OnScreenshot func(w *Writer, req *wire.Message, n int) bool
	// OnAct runs when an act request arrives, before it is answered.
	OnAct func(w *Writer)
	// OnStop, if set, may answer the stop request itself (returning true).
	OnStop func(w *Writer, req *wire.Message) bool
	// OnHold, if set, may answer the hold_app request itself (returning
	// true); unset, a hold answers that it stopped no process.
	OnHold func(w *Writer, req *wire.Message) bool
	// OnReset runs when a reset request (a relaunch) arrives, before the
	// guest tells the app's exit, forgets the home's files and answers.
	OnReset func(w *Writer)
	// Damage makes the guest answer watch as one with DAMAGE: while
	// watched, it sends a screen event after every act.
	Damage bool
	// Pixels, if set, is the screen's content (w×h BGRX pixels) in place
	// of a blank screen.
	Pixels func(w, h int) []byte
}

// Writer writes frames to the host, as the guest.
type Writer struct {
	w   io.Writer
	err error
}

// Err is the first write error (the host stopped reading).
func (w *Writer) Err() error { return w.err }

// Raw writes bytes as they are.
func (w *Writer) Raw(b []byte) error {
	if w.err == nil {
		_, w.err = w.w.Write(b)
	}
	return w.err
}

// Frame writes one frame. Unlike wire.WriteFrame it does not refuse large
// headers or frames: a hostile guest does not have to follow the rules.
func (w *Writer) Frame(h *wire.Header, payload []byte) error {
	b, err := Encode(h, payload)
	if err != nil {
		return err
	}
	return w.Raw(b)
}

// FrameZeros writes a frame whose payload is n zero bytes, in pieces, so
// the writer holds no payload of that size in memory.
func (w *Writer) FrameZeros(h *wire.Header, n int) error {
	b, err := Encode(h, nil)
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint32(b[0:4], uint32(len(b)-4+n))
	if err := w.Raw(b); err != nil {
		return err
	}
	zeros := make([]byte, 64<<10)
	for n > 0 {
		k := min(n, len(zeros))
		if err := w.Raw(zeros[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// Encode makes the bytes of one frame, without wire.WriteFrame's checks.
func Encode(h *wire.Header, payload []byte) ([]byte, error) {
	hdr, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 8, 8+len(hdr)+len(payload))
	binary.BigEndian.PutUint32(buf[0:4], uint32(4+len(hdr)+len(payload)))
	binary.BigEndian.PutUint32(buf[4:8], uint32(len(hdr)))
	buf = append(buf, hdr...)
	return append(buf, payload...), nil
}

// EventFrame makes the bytes of one event, for a test to write many times.
func EventFrame(name string, body any, payload []byte) []byte {
	b, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	f, err := Encode(&wire.Header{Type: wire.Event, Method: name, Body: b}, payload)
	if err != nil {
		panic(err)
	}
	return f
}

// Event writes an event.
func (w *Writer) Event(name string, body any, payload []byte) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return w.Frame(&wire.Header{Type: wire.Event, Method: name, Body: b}, payload)
}

// Reply answers request id.
func (w *Writer) Reply(id uint32, method string, body any, payload []byte) error {
	h := &wire.Header{Type: wire.Response, ID: id, Method: method}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		h.Body = b
	}
	return w.Frame(h, payload)
}

// Blank is the answer to a screenshot of a blank w×h screen.
func Blank(w, h int) (wire.ScreenshotResponse, []byte) {
	pix := make([]byte, 4*w*h)
	return wire.ScreenshotResponse{Width: w, Height: h, Hash: 1, Encoding: wire.EncodingBGRXS2,
		State: &wire.State{Running: true, Windows: []observe.Window{Window}}}, bytes.Clone(s2.Encode(nil, pix))
}

// Window is the app's window.
var Window = observe.Window{ID: 1, Title: "fake", Width: 320, Height: 240, Focused: true}

// Serve runs the guest on its stdio (stdin from the host, stdout to it)
// until stdin ends or a write fails.
func (g *Guest) Serve(stdin io.Reader, stdout io.Writer) error {
	w := &Writer{w: stdout}
	if err := w.Event(wire.EventHello, wire.Hello{Magic: wire.Magic, Protocol: wire.Protocol, Version: "test"}, nil); err != nil {
		return err
	}
	var screen observe.Screen
	shots := 0
	var blank []byte
	var blankResp wire.ScreenshotResponse
	home := map[string][]byte{} // the home's files, by path
	watching := false           // screen events on (watch)
	br := bufio.NewReader(stdin)
	for {
		m, err := wire.ReadFrame(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if m.Type != wire.Request || m.Method == wire.MethodCancel {
			continue
		}
		var out any
		var payload []byte
		switch m.Method {
		case wire.MethodHello:
			out = wire.Hello{Magic: wire.Magic, Protocol: wire.Protocol, Version: "test"}
		case wire.MethodStart:
			var req wire.StartRequest
			_ = json.Unmarshal(m.Body, &req)
			screen = req.Screen
			blankResp, blank = Blank(screen.Width, screen.Height)
			if g.Pixels != nil {
				blank = bytes.Clone(s2.Encode(nil, g.Pixels(screen.Width, screen.Height)))
				blankResp.Hash = 2
			}
			out = wire.StartResponse{Display: ":1", WM: true}
		case wire.MethodLaunch:
			if g.OnLaunch != nil {
				g.OnLaunch(w)
			}
			win := Window
			out = wire.LaunchResponse{PID: 42, Window: &win}
		case wire.MethodScreenshot:
			shots++
			if g.OnScreenshot != nil && g.OnScreenshot(w, m, shots) {
				if w.err != nil {
					return w.err
				}
				continue
			}
			var req wire.ScreenshotRequest
			_ = json.Unmarshal(m.Body, &req)
			resp := blankResp
			if req.IfNot == resp.Hash {
				resp.Unchanged, resp.Encoding = true, ""
			} else {
				payload = blank
			}
			out = resp
		case wire.MethodAct:
			if g.OnAct != nil {
				g.OnAct(w)
			}
			if watching {
				if err := w.Event(wire.EventScreen, nil, nil); err != nil {
					return err
				}
			}
			out = action.Result{OK: true}
		case wire.MethodStep:
			// The act, then the screenshot as a screenshot request
			// answers it; with OnScreenshot set, none (the host looks
			// with a screenshot request, which the hook answers).
			if g.OnAct != nil {
				g.OnAct(w)
			}
			if watching {
				if err := w.Event(wire.EventScreen, nil, nil); err != nil {
					return err
				}
			}
			var req wire.StepRequest
			_ = json.Unmarshal(m.Body, &req)
			resp := wire.StepResponse{Result: action.Result{OK: true}}
			if g.OnScreenshot != nil {
				resp.Failed = "the test guest's screenshots are its hook's"
			} else {
				shots++
				if req.Settle != nil {
					resp.Settled = &action.Result{OK: true, Met: new(bool)}
					*resp.Settled.Met = true
				}
				shot := blankResp
				if req.Screenshot.IfNot == shot.Hash {
					shot.Unchanged, shot.Encoding = true, ""
				} else {
					payload = blank
				}
				resp.Shot = &shot
			}
			out = resp
		case wire.MethodWatch:
			var req wire.WatchRequest
			_ = json.Unmarshal(m.Body, &req)
			watching = req.On && g.Damage
			out = wire.WatchResponse{Damage: g.Damage}
		case wire.MethodWriteFile:
			// A task's inputs are kept, in memory, as the home's files:
			// collect and read_file answer from them.
			var req wire.WriteFileRequest
			_ = json.Unmarshal(m.Body, &req)
			if req.Home && !req.Dir && req.Link == "" {
				if !req.Append {
					home[req.Path] = nil
				}
				home[req.Path] = append(home[req.Path], m.Payload...)
			}
		case wire.MethodCollect:
			var req wire.CollectRequest
			_ = json.Unmarshal(m.Body, &req)
			resp := wire.CollectResponse{Files: []wire.CollectFile{}}
			for _, p := range slices.Sorted(maps.Keys(home)) {
				for _, pat := range req.Patterns {
					if collectfs.Matches(pat, p) {
						resp.Files = append(resp.Files, wire.CollectFile{Path: p, Size: int64(len(home[p]))})
						break
					}
				}
			}
			out = resp
		case wire.MethodReadFile:
			var req wire.ReadFileRequest
			_ = json.Unmarshal(m.Body, &req)
			data := home[req.Path]
			end := min(int64(len(data)), req.Offset+int64(req.Len))
			payload = data[min(req.Offset, end):end]
			out = wire.ReadFileResponse{EOF: end == int64(len(data))}
		case wire.MethodReset:
			if g.OnReset != nil {
				g.OnReset(w)
			}
			exit := observe.Exit{Code: -1, Signal: "SIGKILL"}
			if err := w.Event(wire.EventExit, exit, nil); err != nil {
				return err
			}
			clear(home)
			if err := w.Event(wire.EventReset, struct{}{}, nil); err != nil {
				return err
			}
			out = wire.ResetResponse{Exit: &exit, Killed: 1}
		case wire.MethodFloor:
			var req wire.FloorRequest
			_ = json.Unmarshal(m.Body, &req)
			resp := wire.FloorResponse{Width: screen.Width, Height: screen.Height, SHM: true}
			if req.Frame {
				payload = blank
			}
			for i := range req.Samples {
				resp.Motion = append(resp.Motion, 50+int64(i))
				resp.Damage = append(resp.Damage, 30)
				if req.Unchanged { // as a guest with DAMAGE
					continue
				}
				resp.Capture = append(resp.Capture, 300)
				resp.Hash = append(resp.Hash, 40)
				resp.Encode = append(resp.Encode, 200)
			}
			png := min(req.Samples, 50)
			if req.PNG != nil {
				png = *req.PNG
			}
			for range png {
				resp.PNG = append(resp.PNG, 9000)
			}
			out = resp
		case wire.MethodRelaunchFloor:
			// As a sandbox where the mover takes 15 ms to its window.
			out = wire.RelaunchFloorResponse{KillUS: 2000, StartUS: 15000, CaptureUS: 500, Killed: 1}
		case wire.MethodHoldApp:
			if g.OnHold != nil && g.OnHold(w, m) {
				if w.err != nil {
					return w.err
				}
				continue
			}
			out = wire.HoldAppResponse{}
		case wire.MethodStop:
			if g.OnStop != nil && g.OnStop(w, m) {
				if w.err != nil {
					return w.err
				}
				continue
			}
			out = wire.StopResponse{Exit: &observe.Exit{Signal: "SIGTERM"}}
		}
		if err := w.Reply(m.ID, m.Method, out, payload); err != nil {
			return err
		}
	}
}

// Backend creates environments whose guest is a Guest made by New.
type Backend struct {
	New func() *Guest
	// Relaunch declares the capability relaunch (the scripted guest
	// answers reset either way).
	Relaunch bool
	// Named declares the capability named: a sandbox of Config.Name holds
	// the name (environment/named, below named.Root) until it is closed,
	// as a real backend's does; its home is the guest's, as always.
	Named bool

	mu     sync.Mutex
	errs   []error
	closed int
	names  []string
}

var _ environment.Backend = (*Backend)(nil)

// Name implements environment.Backend.
func (b *Backend) Name() string { return "guestenvtest" }

// Capabilities implements environment.Capable: relaunch when Relaunch is set.
func (b *Backend) Capabilities() environment.Capabilities {
	return environment.Capabilities{Relaunch: b.Relaunch, Named: b.Named}
}

// Names returns the Config.Name of every environment created, in order.
func (b *Backend) Names() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.names)
}

// GuestErrors returns what the guests' Serve returned, and how many
// environments were closed.
func (b *Backend) GuestErrors() ([]error, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]error(nil), b.errs...), b.closed
}

// Create implements environment.Backend: it starts a guest on pipes and
// hands them to a guestenv.Env, as a real backend does with its sandbox's
// stdio.
func (b *Backend) Create(ctx context.Context, cfg environment.Config) (_ environment.Environment, retErr error) {
	hostR, guestW := io.Pipe()
	guestR, hostW := io.Pipe()
	b.mu.Lock()
	b.names = append(b.names, cfg.Name)
	b.mu.Unlock()
	opts := guestenv.Options{Backend: b.Name(), Config: cfg}
	if cfg.Name != "" {
		if !b.Named {
			return nil, fmt.Errorf("%w: guestenvtest: no named sandboxes", environment.ErrUnavailable)
		}
		root, err := named.Root()
		if err != nil {
			return nil, err
		}
		lock, err := named.Acquire(root, cfg.Name, b.Name(), cfg.RunID)
		if err != nil {
			return nil, err
		}
		opts.AfterTeardown = func(context.Context) error { return lock.Release(-1) }
	}
	sb := &sandbox{b: b, hostR: hostR, hostW: hostW, done: make(chan struct{})}
	g := guestenv.New(sb, opts)
	defer func() {
		if retErr != nil {
			g.Close(context.WithoutCancel(ctx))
		}
	}()
	gst := b.New()
	go func() {
		defer close(sb.done)
		err := gst.Serve(guestR, guestW)
		guestW.CloseWithError(io.EOF)
		guestR.CloseWithError(io.ErrClosedPipe)
		b.mu.Lock()
		b.errs = append(b.errs, err)
		b.mu.Unlock()
	}()
	return g.Start(ctx, hostR, hostW, nil)
}

// sandbox is the guest's pipes.
type sandbox struct {
	b     *Backend
	hostR *io.PipeReader
	hostW *io.PipeWriter
	done  chan struct{}
}

func (s *sandbox) Info() environment.Info { return environment.Info{ID: "fake"} }

func (s *sandbox) Explain(context.Context, <-chan struct{}) []string { return nil }

// Teardown closes both pipes and waits for the guest.
func (s *sandbox) Teardown(context.Context) error {
	s.hostW.Close()
	s.hostR.CloseWithError(fmt.Errorf("guestenvtest: environment closed"))
	<-s.done
	s.b.mu.Lock()
	s.b.closed++
	s.b.mu.Unlock()
	return nil
}
