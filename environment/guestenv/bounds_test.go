package guestenv_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv"
	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/wire"
)

// recorder is an environment.Events that keeps what it was told.
type recorder struct {
	mu      sync.Mutex
	out     map[observe.Stream]int64
	dropped map[observe.Stream]int64
	streams map[observe.Stream]bool
	windows []observe.Window
	exits   int
	drops   map[string]int64
	logs    int
	logLen  int
}

func newRecorder() *recorder {
	return &recorder{out: map[observe.Stream]int64{}, dropped: map[observe.Stream]int64{}, streams: map[observe.Stream]bool{}, drops: map[string]int64{}}
}

func (r *recorder) Output(s observe.Stream, data []byte, dropped int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.streams[s] = true
	r.out[s] += int64(len(data))
	r.dropped[s] += dropped
}

func (r *recorder) Exited(observe.Exit) {
	r.mu.Lock()
	r.exits++
	r.mu.Unlock()
}

func (r *recorder) Window(kind string, w observe.Window) {
	r.mu.Lock()
	r.windows = append(r.windows, w)
	r.mu.Unlock()
}

func (r *recorder) Dropped(kind string, n int64) {
	r.mu.Lock()
	r.drops[kind] += n
	r.mu.Unlock()
}

func (r *recorder) log(line string) {
	r.mu.Lock()
	r.logs++
	r.logLen += len(line)
	r.mu.Unlock()
}

// session drives one fake guest the way the runtime does: create, launch,
// observe twice, act, close. It returns the first error and what the
// recorder saw, and fails if the calls do not end.
type session struct {
	err    error
	at     string // the call that failed
	rec    *recorder
	state  environment.State
	result action.Result
}

func runSession(t *testing.T, g *guestenvtest.Guest) session {
	t.Helper()
	s := session{rec: newRecorder()}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	b := &guestenvtest.Backend{New: func() *guestenvtest.Guest { return g }}
	env, err := b.Create(ctx, environment.Config{Screen: observe.DefaultScreen, Events: s.rec, GuestLog: s.rec.log})
	if err != nil {
		s.err, s.at = err, "create"
		return s
	}
	defer func() {
		env.Close(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the session did not end: %v", ctx.Err())
		}
	}()
	bundle := &app.Bundle{Manifest: app.Manifest{Command: "app"}}
	if _, err := env.Launch(ctx, environment.LaunchSpec{App: bundle, LogCap: 1 << 20}); err != nil {
		s.err, s.at = err, "launch"
		return s
	}
	for i := 0; i < 2; i++ {
		if _, s.state, err = env.Observe(ctx); err != nil {
			s.err, s.at = err, "observe"
			return s
		}
	}
	if s.result, err = env.Act(ctx, action.Action{Kind: action.Wait, MS: 1}); err != nil {
		s.err, s.at = err, "act"
	}
	return s
}

func onLaunch(f func(w *guestenvtest.Writer)) *guestenvtest.Guest {
	return &guestenvtest.Guest{OnLaunch: f}
}

func onShot(f func(w *guestenvtest.Writer, id uint32)) *guestenvtest.Guest {
	return &guestenvtest.Guest{OnScreenshot: func(w *guestenvtest.Writer, m *wire.Message, n int) bool {
		f(w, m.ID)
		return true
	}}
}

func output(w *guestenvtest.Writer, stream string, payload []byte) error {
	return w.Event(wire.EventOutput, map[string]any{"stream": stream}, payload)
}

// TestHostileGuestRefused: what the real guest can never send is a protocol
// error, refused before the host allocates for it; the call in progress
// fails as the guest's failure.
func TestHostileGuestRefused(t *testing.T) {
	bigShot := s2.Encode(nil, make([]byte, 4*1024*1024)) // declared 8192×8192 below
	tests := []struct {
		name  string
		guest *guestenvtest.Guest
		at    string
		want  string
	}{
		{"screenshot larger than the screen", onShot(func(w *guestenvtest.Writer, id uint32) {
			w.Reply(id, wire.MethodScreenshot, wire.ScreenshotResponse{Width: 8192, Height: 8192, Hash: 7, Encoding: wire.EncodingBGRXS2}, bigShot)
		}), "observe", "a 8192×8192 screenshot does not fit the 640×480 screen"},
		{"screenshot one pixel wider than the screen", onShot(func(w *guestenvtest.Writer, id uint32) {
			w.Reply(id, wire.MethodScreenshot, wire.ScreenshotResponse{Width: 641, Height: 480, Hash: 7, Encoding: wire.EncodingBGRXS2}, []byte{1})
		}), "observe", "does not fit the 640×480 screen"},
		{"screenshot whose pixels are not its size", onShot(func(w *guestenvtest.Writer, id uint32) {
			w.Reply(id, wire.MethodScreenshot, wire.ScreenshotResponse{Width: 640, Height: 480, Hash: 7, Encoding: wire.EncodingBGRXS2}, s2.Encode(nil, make([]byte, 100)))
		}), "observe", "decodes to 100 bytes, want 1228800"},
		{"screenshot payload beyond its encoded bound", onShot(func(w *guestenvtest.Writer, id uint32) {
			w.Reply(id, wire.MethodScreenshot, wire.ScreenshotResponse{Width: 1, Height: 1, Hash: 7, Encoding: wire.EncodingBGRXS2}, make([]byte, 1000))
		}), "observe", "a 1×1 screenshot with a 1000-byte payload"},
		{"screenshot in an unknown encoding", onShot(func(w *guestenvtest.Writer, id uint32) {
			w.Reply(id, wire.MethodScreenshot, wire.ScreenshotResponse{Width: 640, Height: 480, Hash: 7, Encoding: "png"}, []byte{1})
		}), "observe", `unknown pixel encoding "png"`},
		{"unchanged screenshot with pixels", onShot(func(w *guestenvtest.Writer, id uint32) {
			w.Reply(id, wire.MethodScreenshot, wire.ScreenshotResponse{Unchanged: true}, []byte{1})
		}), "observe", "an unchanged screenshot carries a 1-byte payload"},
		{"unknown output stream", onLaunch(func(w *guestenvtest.Writer) {
			output(w, strings.Repeat("s", 4096), []byte("x"))
		}), "launch", "unknown output stream"},
		{"oversized output event", onLaunch(func(w *guestenvtest.Writer) {
			output(w, "stdout", make([]byte, 1<<20))
		}), "launch", "1048576 bytes of output in one event"},
		{"negative dropped count", onLaunch(func(w *guestenvtest.Writer) {
			w.Event(wire.EventOutput, map[string]any{"stream": "stderr", "dropped": -5}, nil)
		}), "launch", "-5 dropped bytes"},
		{"unknown window event", onLaunch(func(w *guestenvtest.Writer) {
			w.Event(wire.EventWindow, wire.WindowEvent{Kind: "exploded"}, nil)
		}), "launch", `unknown window event "exploded"`},
		{"window event with a payload", onLaunch(func(w *guestenvtest.Writer) {
			w.Event(wire.EventWindow, wire.WindowEvent{Kind: "title"}, make([]byte, 10))
		}), "launch", "only output has one"},
		{"a connection opened without the network carried", onLaunch(func(w *guestenvtest.Writer) {
			w.Event(wire.NetOpen, wire.NetStream{Conn: 1, Socket: "proxy.sock"}, nil)
		}), "launch", "without the network over the stream"},
		{"event body too large", onLaunch(func(w *guestenvtest.Writer) {
			w.Event(wire.EventWindow, wire.WindowEvent{Kind: "title", Window: observe.Window{Title: strings.Repeat("t", 300<<10)}}, nil)
		}), "launch", "the event's body is"},
		{"unknown event", onLaunch(func(w *guestenvtest.Writer) {
			w.Event("surprise", nil, nil)
		}), "launch", `unknown event "surprise"`},
		{"a second hello", onLaunch(func(w *guestenvtest.Writer) {
			w.Event(wire.EventHello, wire.Hello{Magic: wire.Magic, Protocol: wire.Protocol}, nil)
		}), "launch", "a second hello"},
		{"a request from the guest", onLaunch(func(w *guestenvtest.Writer) {
			w.Frame(&wire.Header{Type: wire.Request, ID: 1, Method: wire.MethodStop}, nil)
		}), "launch", "the guest sent a request"},
		{"a response for another method", onLaunch(func(w *guestenvtest.Writer) {
			// The launch is request 3 (hello, start, launch).
			w.Reply(3, wire.MethodScreenshot, wire.ScreenshotResponse{Width: 640, Height: 480}, nil)
		}), "launch", `response to request 3 (launch) is for "screenshot"`},
		{"a response with a payload", onLaunch(func(w *guestenvtest.Writer) {
			w.Reply(3, wire.MethodLaunch, wire.LaunchResponse{PID: 1}, make([]byte, 10))
		}), "launch", "a launch response without a screenshot carries a 10-byte payload"},
		{"an error response with a payload", onLaunch(func(w *guestenvtest.Writer) {
			w.Frame(&wire.Header{Type: wire.Response, ID: 3, Method: wire.MethodLaunch, Error: &wire.RemoteError{Code: wire.CodeInternal, Message: "x"}}, make([]byte, 10))
		}), "launch", "an error response carries a 10-byte payload"},
		{"a frame above the frame limit", onLaunch(func(w *guestenvtest.Writer) {
			w.Raw([]byte{0xff, 0xff, 0xff, 0xff})
		}), "launch", "frame too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := runSession(t, tt.guest)
			if s.err == nil || s.at != tt.at || !strings.Contains(s.err.Error(), tt.want) {
				t.Fatalf("%s: %v; want it to fail with %q", s.at, s.err, tt.want)
			}
			if !errors.Is(s.err, environment.ErrGuest) {
				t.Errorf("the error is not the guest's: %v", s.err)
			}
		})
	}
}

// TestHostileGuestCapped: what the real guest may send in any amount,
// because the app decides it, is capped and counted; the run goes on.
func TestHostileGuestCapped(t *testing.T) {
	const logCap = 1 << 20 // runSession's LogCap
	t.Run("output beyond the cap", func(t *testing.T) {
		s := runSession(t, onLaunch(func(w *guestenvtest.Writer) {
			chunk := make([]byte, 32<<10)
			for i := 0; i < 4*logCap/len(chunk); i++ {
				output(w, "stdout", chunk)
			}
			w.Event(wire.EventOutput, wire.OutputEvent{Stream: observe.Stdout, Dropped: 5}, nil)
			output(w, "stderr", []byte("still here"))
		}))
		if s.err != nil {
			t.Fatalf("%s: %v", s.at, s.err)
		}
		r := s.rec
		if r.out[observe.Stdout] != logCap || r.dropped[observe.Stdout] != 3*logCap+5 || r.out[observe.Stderr] != 10 {
			t.Errorf("stdout %d bytes, %d dropped; stderr %d; want %d, %d, 10", r.out[observe.Stdout], r.dropped[observe.Stdout], r.out[observe.Stderr], logCap, 3*logCap+5)
		}
	})
	t.Run("window title flood", func(t *testing.T) {
		const n = 2000
		title := strings.Repeat("t", 4000)
		s := runSession(t, onLaunch(func(w *guestenvtest.Writer) {
			for i := 0; i < n; i++ {
				w.Event(wire.EventWindow, wire.WindowEvent{Kind: "title", Window: observe.Window{ID: 1, Title: fmt.Sprint(i, title)}}, nil)
			}
		}))
		if s.err != nil {
			t.Fatalf("%s: %v", s.at, s.err)
		}
		r := s.rec
		kept := len(r.windows)
		if int64(kept)*4100 > logCap || kept == 0 || int64(kept)+r.drops["window"] != n {
			t.Errorf("%d window events passed on, %d dropped; want about %d passed, the rest dropped", kept, r.drops["window"], logCap/4100)
		}
	})
	t.Run("long titles and many windows", func(t *testing.T) {
		long := strings.Repeat("é", 2500) // 5000 bytes
		var many []observe.Window
		for i := 0; i < 600; i++ { // a 3 MB header, within the 4 MiB a frame may have
			many = append(many, observe.Window{ID: uint32(i), Title: long})
		}
		g := &guestenvtest.Guest{
			OnLaunch: func(w *guestenvtest.Writer) {
				w.Event(wire.EventWindow, wire.WindowEvent{Kind: "mapped", Window: observe.Window{ID: 2, Title: long}}, nil)
			},
			OnScreenshot: func(w *guestenvtest.Writer, m *wire.Message, n int) bool {
				resp, pix := guestenvtest.Blank(640, 480)
				resp.State.Windows = many
				w.Reply(m.ID, m.Method, resp, pix)
				return true
			},
			OnAct: func(w *guestenvtest.Writer) {},
		}
		s := runSession(t, g)
		if s.err != nil {
			t.Fatalf("%s: %v", s.at, s.err)
		}
		if len(s.state.Windows) != guestenv.MaxWindows {
			t.Errorf("the state has %d windows, want %d", len(s.state.Windows), guestenv.MaxWindows)
		}
		for _, w := range append(s.state.Windows, s.rec.windows...) {
			if len(w.Title) > guestenv.MaxTitle || !strings.HasSuffix(w.Title, "…[cut]") || !strings.HasPrefix(w.Title, "éé") {
				t.Fatalf("a %d-byte title was kept: %q…", len(w.Title), w.Title[:20])
			}
		}
	})
	t.Run("exit events after the first", func(t *testing.T) {
		s := runSession(t, onLaunch(func(w *guestenvtest.Writer) {
			for i := 0; i < 1000; i++ {
				w.Event(wire.EventExit, observe.Exit{Code: i}, nil)
			}
		}))
		if s.err != nil {
			t.Fatalf("%s: %v", s.at, s.err)
		}
		if s.rec.exits != 1 || s.rec.drops["exit"] != 999 {
			t.Errorf("%d exits passed on, %d dropped; want 1 and 999", s.rec.exits, s.rec.drops["exit"])
		}
	})
	t.Run("log flood", func(t *testing.T) {
		s := runSession(t, onLaunch(func(w *guestenvtest.Writer) {
			for i := 0; i < 1000; i++ {
				w.Event(wire.EventLog, wire.LogEvent{Level: "warn", Msg: strings.Repeat("m", 100000)}, nil)
			}
		}))
		if s.err != nil {
			t.Fatalf("%s: %v", s.at, s.err)
		}
		if s.rec.logLen > 1<<20 || s.rec.logs == 0 || int64(s.rec.logs)+s.rec.drops["log"] != 1000 {
			t.Errorf("%d log lines (%d bytes) passed on, %d dropped", s.rec.logs, s.rec.logLen, s.rec.drops["log"])
		}
	})
	t.Run("answers to requests never made", func(t *testing.T) {
		s := runSession(t, onLaunch(func(w *guestenvtest.Writer) {
			for i := 0; i < 20; i++ {
				w.Reply(uint32(1000+i), wire.MethodScreenshot, nil, make([]byte, 4<<20))
			}
		}))
		if s.err != nil {
			t.Fatalf("late answers are skipped, the run goes on: %s: %v", s.at, s.err)
		}
	})
	t.Run("long error message", func(t *testing.T) {
		g := &guestenvtest.Guest{OnScreenshot: func(w *guestenvtest.Writer, m *wire.Message, n int) bool {
			if n == 1 {
				return false
			}
			w.Frame(&wire.Header{Type: wire.Response, ID: m.ID, Method: m.Method, Error: &wire.RemoteError{Code: wire.CodeInternal, Message: strings.Repeat("e", 1<<20)}}, nil)
			return true
		}}
		s := runSession(t, g)
		if s.err == nil || len(s.err.Error()) > guestenv.MaxText+200 {
			t.Errorf("error of %d bytes: %.100v", len(fmt.Sprint(s.err)), s.err)
		}
	})
}
