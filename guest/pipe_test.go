package guest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/jezek/xgb"
	"github.com/klauspost/compress/s2"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/guest/xserver"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/internal/xevents"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

func TestMain(m *testing.M) {
	// The guest starts the app through its own binary in launcher mode
	// (launcherArgv: "guest --exec-app -- APP ARGS…"); in these tests that
	// binary is the test binary.
	if len(os.Args) > 3 && os.Args[1] == "guest" && os.Args[2] == ExecAppFlag && os.Args[3] == "--" {
		err := ExecApp(os.Args[4:])
		fmt.Fprintln(os.Stderr, err)
		os.Exit(127)
	}
	os.Exit(m.Run())
}

// pipeHost is the host's end of a guest served in this process over
// in-process pipes: the protocol as a backend speaks it, without a
// sandbox.
type pipeHost struct {
	t    testing.TB
	conn *wire.Conn
	// in is the guest's stdin: closing it ends the guest.
	in   *io.PipeWriter
	done chan int // the guest's exit code
	log  *testenv.Buffer

	mu     sync.Mutex
	events []*wire.Message
	output map[observe.Stream]*bytes.Buffer
	more   chan struct{} // signalled on every event
}

// startGuest serves a guest on pipes and reads its hello. The guest ends
// (stdin closed) when the test does, and must exit 0.
func startGuest(t testing.TB) *pipeHost {
	t.Helper()
	h, _ := startGuestWith(t, Options{})
	return h
}

// startGuestWith is startGuest with the guest's options; the guest
// brings up its early display (Options.Display) before its hello, as
// Main does.
func startGuestWith(t testing.TB, opts Options) (*pipeHost, *Guest) {
	t.Helper()
	guestIn, hostOut := io.Pipe()
	hostIn, guestOut := io.Pipe()
	h := &pipeHost{t: t, conn: wire.NewConn(hostIn, hostOut), in: hostOut, done: make(chan int, 1), log: &testenv.Buffer{},
		output: map[observe.Stream]*bytes.Buffer{observe.Stdout: {}, observe.Stderr: {}}, more: make(chan struct{}, 1)}
	g := newGuest(guestIn, guestOut, h.log, opts)
	if opts.Display != nil {
		g.startEarly()
	}
	go func() {
		code := 1
		if err := g.hello(); err == nil {
			code = g.serve()
		}
		guestOut.Close()
		h.done <- code
	}()
	t.Cleanup(func() {
		h.in.Close()
		select {
		case code := <-h.done:
			if code != 0 {
				t.Errorf("the guest exited %d", code)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("the guest did not end within 30s of its stdin closing")
		}
		if t.Failed() {
			t.Logf("guest stderr:\n%s", h.log.String())
		}
	})
	m, err := h.conn.ReadFrame()
	if err != nil {
		t.Fatalf("no hello from the guest: %v", err)
	}
	var hello wire.Hello
	if m.Type != wire.Event || m.Method != wire.EventHello || decodeBody(m, &hello) != nil || hello.Magic != wire.Magic || hello.Protocol != wire.Protocol {
		t.Fatalf("first frame %s %s %s, want the hello event", m.Type, m.Method, m.Body)
	}
	go h.conn.Serve(h.event)
	return h, g
}

func decodeBody(m *wire.Message, v any) error {
	return json.Unmarshal(m.Body, v)
}

// event collects what the guest sends unasked.
func (h *pipeHost) event(m *wire.Message) {
	h.mu.Lock()
	h.events = append(h.events, m)
	if m.Method == wire.EventOutput {
		var o wire.OutputEvent
		if decodeBody(m, &o) == nil && h.output[o.Stream] != nil {
			h.output[o.Stream].Write(m.Payload)
		}
	}
	h.mu.Unlock()
	select {
	case h.more <- struct{}{}:
	default:
	}
}

// call makes one request with a generous deadline.
func (h *pipeHost) call(method string, in, out any, payload []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(h.t.Context(), 60*time.Second)
	defer cancel()
	return h.conn.Call(ctx, method, in, out, payload)
}

// must is call that fails the test on an error.
func (h *pipeHost) must(method string, in, out any, payload []byte) []byte {
	h.t.Helper()
	p, err := h.call(method, in, out, payload)
	if err != nil {
		h.t.Fatalf("%s: %v", method, err)
	}
	return p
}

// startBare says hello, starts a 320×240 display without a window
// manager and connects to it as another client would.
func (h *pipeHost) startBare(t *testing.T) *xgb.Conn {
	t.Helper()
	dir := t.TempDir()
	h.must(wire.MethodHello, wire.Hello{Magic: wire.Magic, Protocol: wire.Protocol, Version: "test"}, nil, nil)
	var started wire.StartResponse
	h.must(wire.MethodStart, wire.StartRequest{Screen: observe.Screen{Width: 320, Height: 240, Depth: 24}, NoWM: true,
		Home: filepath.Join(dir, "home"), AppDir: filepath.Join(dir, "app"), TimeoutMS: 60000}, &started, nil)
	xc, err := xgb.NewConnDisplay(started.Display)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(xc.Close)
	return xc
}

// waitFor waits until ok holds for the events so far.
func (h *pipeHost) waitFor(what string, ok func(events []*wire.Message, stdout string) bool) {
	h.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		h.mu.Lock()
		done := ok(h.events, h.output[observe.Stdout].String())
		h.mu.Unlock()
		if done {
			return
		}
		select {
		case <-h.more:
		case <-deadline:
			h.mu.Lock()
			defer h.mu.Unlock()
			h.t.Fatalf("no %s within 30s; stdout so far:\n%s", what, h.output[observe.Stdout].String())
		}
	}
}

// TestGuestOverPipe drives the guest through the whole protocol on
// in-process pipes with a plain Xvfb, Openbox and xev on the host: hello,
// start, write_file, launch, screenshot, act, stop, and the end of stdin.
func TestGuestOverPipe(t *testing.T) {
	testenv.Require(t, testenv.Programs("Xvfb", "openbox", "xev"))
	h := startGuest(t)
	dir := t.TempDir()
	appDir := filepath.Join(dir, "app")

	var hello wire.Hello
	h.must(wire.MethodHello, wire.Hello{Magic: wire.Magic, Protocol: wire.Protocol, Version: "test"}, &hello, nil)
	if hello.Magic != wire.Magic || hello.PID != os.Getpid() {
		t.Errorf("hello answer %+v", hello)
	}
	if _, err := h.call(wire.MethodHello, wire.Hello{Magic: wire.Magic, Protocol: wire.Protocol + 1}, nil, nil); !wire.IsCode(err, wire.CodeInvalid) {
		t.Errorf("hello with another protocol: %v, want %s", err, wire.CodeInvalid)
	}
	// Before start there is no display and no app directory.
	if _, err := h.call(wire.MethodScreenshot, wire.ScreenshotRequest{}, nil, nil); !wire.IsCode(err, wire.CodeInvalid) {
		t.Errorf("screenshot before start: %v, want %s", err, wire.CodeInvalid)
	}
	if _, err := h.call(wire.MethodWriteFile, wire.WriteFileRequest{Path: "x", Mode: 0o644}, nil, []byte("x")); !wire.IsCode(err, wire.CodeInvalid) {
		t.Errorf("write_file before start: %v, want %s", err, wire.CodeInvalid)
	}

	const w, ht = 400, 300
	var started wire.StartResponse
	h.must(wire.MethodStart, wire.StartRequest{Screen: observe.Screen{Width: w, Height: ht, Depth: 24}, Home: filepath.Join(dir, "home"), AppDir: appDir, TimeoutMS: 60000}, &started, nil)
	if !strings.HasPrefix(started.Display, ":") || !started.WM {
		t.Fatalf("start: %+v", started)
	}
	if _, err := h.call(wire.MethodStart, wire.StartRequest{Screen: observe.Screen{Width: w, Height: ht, Depth: 24}}, nil, nil); !wire.IsCode(err, wire.CodeInvalid) {
		t.Errorf("a second start: %v, want %s", err, wire.CodeInvalid)
	}

	// write_file: a directory, a file in two chunks, a link; a path that
	// leaves the app directory is refused (the host checks too, the guest
	// trusts nobody).
	script := "#!/bin/sh\necho started \"$@\"\nexec xev -geometry 200x150+40+40\n"
	h.must(wire.MethodWriteFile, wire.WriteFileRequest{Path: "bin", Mode: 0o755, Dir: true}, nil, nil)
	h.must(wire.MethodWriteFile, wire.WriteFileRequest{Path: "bin/run", Mode: 0o755}, nil, []byte(script[:10]))
	h.must(wire.MethodWriteFile, wire.WriteFileRequest{Path: "bin/run", Mode: 0o755, Append: true}, nil, []byte(script[10:]))
	h.must(wire.MethodWriteFile, wire.WriteFileRequest{Path: "run", Link: "bin/run"}, nil, nil)
	for _, bad := range []wire.WriteFileRequest{{Path: "../escape", Mode: 0o644}, {Path: "/etc/escape", Mode: 0o644}, {Path: "out", Link: "../../etc/passwd"}} {
		if _, err := h.call(wire.MethodWriteFile, bad, nil, []byte("x")); !wire.IsCode(err, wire.CodeInvalid) {
			t.Errorf("write_file %+v: %v, want %s", bad, err, wire.CodeInvalid)
		}
	}
	if got, err := os.ReadFile(filepath.Join(appDir, "run")); err != nil || string(got) != script {
		t.Fatalf("the staged script reads %q (%v)", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "escape")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused write_file left %s: %v", filepath.Join(dir, "escape"), err)
	}
	// The protocol has no "state" request any more: the state comes with a
	// screenshot.
	if _, err := h.call("state", nil, nil, nil); !wire.IsCode(err, wire.CodeInvalid) || !strings.Contains(err.Error(), "unknown method") {
		t.Errorf("state: %v, want unknown method", err)
	}

	var launched wire.LaunchResponse
	h.must(wire.MethodLaunch, wire.LaunchRequest{Command: "run", Args: []string{"a b"}, WindowTitle: "Event Tester", ReadyMS: 60000, LogCap: 1 << 20}, &launched, nil)
	if launched.PID <= 0 || launched.Window == nil || launched.Window.Title != "Event Tester" {
		t.Fatalf("launch: %+v", launched)
	}
	if _, err := h.call(wire.MethodLaunch, wire.LaunchRequest{Command: "run"}, nil, nil); !wire.IsCode(err, wire.CodeInvalid) {
		t.Errorf("a second launch: %v, want %s", err, wire.CodeInvalid)
	}
	win := *launched.Window
	h.waitFor("output from the app", func(_ []*wire.Message, stdout string) bool { return strings.Contains(stdout, "started a b\n") })
	h.waitFor("window event for xev", func(evs []*wire.Message, _ string) bool {
		for _, m := range evs {
			var we wire.WindowEvent
			if m.Method == wire.EventWindow && decodeBody(m, &we) == nil && we.Kind == "mapped" && we.Window.ID == win.ID {
				return true
			}
		}
		return false
	})

	// A screenshot with the state: the pixels decode to the screen's size
	// and hash to what the guest says; the same screen again is
	// "unchanged", without pixels.
	var shot wire.ScreenshotResponse
	pix := h.must(wire.MethodScreenshot, wire.ScreenshotRequest{WithState: true}, &shot, nil)
	if shot.Width != w || shot.Height != ht || shot.Encoding != wire.EncodingBGRXS2 || shot.Unchanged {
		t.Fatalf("screenshot: %+v", shot)
	}
	raw, err := s2.Decode(nil, pix)
	if err != nil || len(raw) != 4*w*ht || xxhash.Sum64(raw) != shot.Hash {
		t.Fatalf("screenshot payload: %d bytes (%v), hash %x vs %x", len(raw), err, xxhash.Sum64(raw), shot.Hash)
	}
	if st := shot.State; st == nil || !st.Running || st.Exit != nil || !hasWindow(st.Windows, win.ID) {
		t.Fatalf("state with the screenshot: %+v", shot.State)
	}
	var again wire.ScreenshotResponse
	for range 20 { // a window manager may still be drawing the frame
		payload := h.must(wire.MethodScreenshot, wire.ScreenshotRequest{IfNot: shot.Hash}, &again, nil)
		if again.Unchanged != (again.Hash == shot.Hash) || again.Unchanged != (len(payload) == 0) {
			t.Fatalf("unchanged %v, hash %x (held %x), %d payload bytes", again.Unchanged, again.Hash, shot.Hash, len(payload))
		}
		if again.Unchanged {
			break
		}
		shot = again
	}
	if !again.Unchanged {
		t.Errorf("the screen never held still for an unchanged answer")
	}
	// The same screen asked for in full: with DAMAGE the guest neither
	// captures nor encodes it again, and what it sends is still the frame
	// its hash names.
	if !started.Damage {
		t.Errorf("start: DAMAGE not in use on Xvfb: %+v", started)
	}
	// The window manager may still change the frame (a focus drawn late on
	// a busy machine): a full answer with another hash is a new frame, so
	// the check is repeated on it until two answers in a row agree.
	var full wire.ScreenshotResponse
	for range 20 {
		pix = h.must(wire.MethodScreenshot, wire.ScreenshotRequest{}, &full, nil)
		raw, err := s2.Decode(nil, pix)
		if err != nil || full.Unchanged || xxhash.Sum64(raw) != full.Hash {
			t.Fatalf("the screen in full: %+v, %d bytes (%v), payload hash %x", full, len(raw), err, xxhash.Sum64(raw))
		}
		if full.Hash == again.Hash {
			break
		}
		again = full
	}
	if full.Hash != again.Hash {
		t.Errorf("the screen never held still for a full answer with the same hash: %+v", full)
	}
	// A wait until stable follows damage: met on a still screen.
	var stable action.Result
	h.must(wire.MethodAct, wire.ActRequest{Action: action.Action{Kind: action.Wait, Until: action.UntilStable, StableMS: 200, MS: 60000}}, &stable, nil)
	if !stable.OK {
		t.Errorf("wait until stable on a still screen: %+v", stable)
	}

	// act: a click inside xev's window and a typed letter reach xev.
	x, y := win.X+win.Width/2, win.Y+win.Height/2
	for _, a := range []action.Action{
		{Kind: action.Click, X: &x, Y: &y},
		{Kind: action.Type, Text: "q"},
	} {
		var res action.Result
		h.must(wire.MethodAct, wire.ActRequest{Action: a}, &res, nil)
		if !res.OK {
			t.Fatalf("act %s: %s", a.Kind, res.Error)
		}
	}
	h.waitFor("xev's report of the click and the key", func(_ []*wire.Message, stdout string) bool {
		var press, release, key bool
		for _, e := range xevents.Parse(stdout) {
			switch {
			case e.Type == "ButtonPress" && e.Button == 1 && e.RootX == x && e.RootY == y:
				press = true
			case e.Type == "ButtonRelease" && e.Button == 1:
				release = true
			case e.Type == "KeyPress" && e.KeysymName == "q":
				key = true
			}
		}
		return press && release && key
	})
	// step: the action, then the screenshot in the same answer; without
	// a settle the action's cursor is the state's, where the move left it.
	mx, my := win.X+10, win.Y+12
	var st wire.StepResponse
	pix = h.must(wire.MethodStep, wire.StepRequest{Action: action.Action{Kind: action.MouseMove, X: &mx, Y: &my},
		Screenshot: wire.ScreenshotRequest{WithState: true}}, &st, nil)
	switch {
	case !st.Result.OK || st.Shot == nil || st.Shot.State == nil || st.Failed != "":
		t.Errorf("step: %+v", st)
	case st.Result.Cursor == nil || *st.Result.Cursor != (action.Point{X: mx, Y: my}) || st.Shot.State.Cursor != *st.Result.Cursor:
		t.Errorf("step: the result's cursor %v, the state's %v, want (%d,%d)", st.Result.Cursor, st.Shot.State.Cursor, mx, my)
	case len(pix) == 0 || st.Shot.Unchanged:
		t.Errorf("step: a screenshot with no pixels: %+v", st.Shot)
	}
	// With a settle: the wait's result is answered beside the action's,
	// and an unchanged screen is sent without pixels.
	var st2 wire.StepResponse
	settle := action.Action{Kind: action.Wait, Until: action.UntilStable, StableMS: 100, MS: 60000}
	pix = h.must(wire.MethodStep, wire.StepRequest{Action: action.Action{Kind: action.MouseMove, X: &mx, Y: &my}, Settle: &settle,
		Screenshot: wire.ScreenshotRequest{WithState: true, IfNot: st.Shot.Hash}}, &st2, nil)
	if st2.Settled == nil || !st2.Settled.OK || st2.Shot == nil || st2.Result.Cursor == nil || len(pix) != 0 && st2.Shot.Unchanged {
		t.Errorf("step with a settle: %+v", st2)
	}
	// A settle that is not a wait until stable is refused, nothing done.
	if _, err := h.call(wire.MethodStep, wire.StepRequest{Action: action.Action{Kind: action.MouseMove, X: &x, Y: &y}, Settle: &action.Action{Kind: action.Type, Text: "x"}}, nil, nil); !wire.IsCode(err, wire.CodeInvalid) {
		t.Errorf("step with a typing settle: %v, want %s", err, wire.CodeInvalid)
	}

	var bad action.Result
	if _, err := h.call(wire.MethodAct, wire.ActRequest{Action: action.Action{Kind: "jump"}}, &bad, nil); err == nil && bad.OK {
		t.Errorf("an unknown action was performed")
	}

	// stop: the app ends (SIGTERM to its group), the answer and the exit
	// event say how; the desktop goes with it.
	var stopped wire.StopResponse
	h.must(wire.MethodStop, wire.StopRequest{GraceMS: 2000}, &stopped, nil)
	if stopped.Exit == nil || stopped.Exit.Signal != "SIGTERM" {
		t.Errorf("stop: exit %+v, want SIGTERM", stopped.Exit)
	}
	h.waitFor("the exit event", func(evs []*wire.Message, _ string) bool {
		for _, m := range evs {
			if m.Method == wire.EventExit {
				return true
			}
		}
		return false
	})
	if _, err := os.Stat(filepath.Join(xserver.SocketDir, "X"+strings.TrimPrefix(started.Display, ":"))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Xvfb's socket is still there after stop: %v", err)
	}
}

func hasWindow(ws []observe.Window, id uint32) bool {
	for _, w := range ws {
		if w.ID == id {
			return true
		}
	}
	return false
}

// TestGuestLaunchFailures: what the guest answers when the app cannot be
// had — a command that was not staged, an app that exits before its
// window, a window that never appears — each with the code the host sorts
// it by, and the guest still serves afterwards.
func TestGuestLaunchFailures(t *testing.T) {
	testenv.Require(t, testenv.Programs("Xvfb"))
	for _, tt := range []struct {
		name   string
		script string // staged as "app"; "" stages nothing
		req    wire.LaunchRequest
		code   string
		want   string
	}{
		{"not staged", "", wire.LaunchRequest{Command: "app", WaitWindow: true, ReadyMS: 5000}, wire.CodeNotFound, `command "app" was not staged`},
		{"not local", "", wire.LaunchRequest{Command: "../app"}, wire.CodeInvalid, "is not a local path"},
		{"bad title pattern", "", wire.LaunchRequest{Command: "app", WindowTitle: "/(/"}, wire.CodeInvalid, "window_title"},
		{"exits first", "#!/bin/sh\necho bye >&2\nexit 3\n", wire.LaunchRequest{Command: "app", WaitWindow: true, ReadyMS: 30000}, wire.CodeAppExited, "exit code 3"},
		{"no window", "#!/bin/sh\nexec sleep 60\n", wire.LaunchRequest{Command: "app", WindowTitle: "never", ReadyMS: 300}, wire.CodeTimeout, `no window titled "never" appeared within 300ms`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := startGuest(t)
			dir := t.TempDir()
			h.must(wire.MethodStart, wire.StartRequest{Screen: observe.Screen{Width: 200, Height: 100, Depth: 24}, NoWM: true, Home: filepath.Join(dir, "home"), AppDir: filepath.Join(dir, "app"), TimeoutMS: 60000}, nil, nil)
			if tt.script != "" {
				h.must(wire.MethodWriteFile, wire.WriteFileRequest{Path: "app", Mode: 0o755}, nil, []byte(tt.script))
			}
			_, err := h.call(wire.MethodLaunch, tt.req, nil, nil)
			if !wire.IsCode(err, tt.code) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("launch: %v; want %s naming %q", err, tt.code, tt.want)
			}
			var shot wire.ScreenshotResponse
			h.must(wire.MethodScreenshot, wire.ScreenshotRequest{WithState: true}, &shot, nil)
			h.must(wire.MethodStop, wire.StopRequest{GraceMS: 500}, nil, nil)
		})
	}
}
