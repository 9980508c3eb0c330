package guestenv_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
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

// sessionFrames returns the frames of a healthy guest's side of a session
// (hello, the answers to hello, start, launch, a screenshot, an action, an
// unchanged screenshot and stop), with the first screenshot's answer
// replaced by shot if it is not nil and extra frames before the launch's
// answer: what FuzzGuestStream starts from.
func sessionFrames(shot []byte, extra ...[]byte) []byte {
	enc := func(h *wire.Header, body any, payload []byte) []byte {
		if body != nil {
			h.Body, _ = json.Marshal(body)
		}
		b, err := guestenvtest.Encode(h, payload)
		if err != nil {
			panic(err)
		}
		return b
	}
	res := func(method string, body any, payload []byte) []byte {
		return enc(&wire.Header{Type: wire.Response, Method: method}, body, payload)
	}
	blank, pix := guestenvtest.Blank(640, 480)
	if shot == nil {
		shot = res(wire.MethodScreenshot, blank, pix)
	}
	var b bytes.Buffer
	b.Write(enc(&wire.Header{Type: wire.Event, Method: wire.EventHello}, wire.Hello{Magic: wire.Magic, Protocol: wire.Protocol, Version: "fuzz"}, nil))
	b.Write(res(wire.MethodHello, wire.Hello{Magic: wire.Magic, Protocol: wire.Protocol}, nil))
	b.Write(res(wire.MethodStart, wire.StartResponse{Display: ":1", WM: true}, nil))
	b.Write(enc(&wire.Header{Type: wire.Event, Method: wire.EventOutput}, wire.OutputEvent{Stream: observe.Stdout}, []byte("ready\n")))
	b.Write(enc(&wire.Header{Type: wire.Event, Method: wire.EventWindow}, wire.WindowEvent{Kind: "mapped", Window: guestenvtest.Window}, nil))
	for _, e := range extra {
		b.Write(e)
	}
	b.Write(res(wire.MethodLaunch, wire.LaunchResponse{PID: 42, Window: &guestenvtest.Window}, nil))
	b.Write(shot)
	b.Write(res(wire.MethodAct, action.Result{OK: true}, nil))
	blank.Unchanged, blank.Encoding = true, ""
	b.Write(res(wire.MethodScreenshot, blank, nil))
	b.Write(enc(&wire.Header{Type: wire.Event, Method: wire.EventExit}, observe.Exit{Code: 0}, nil))
	b.Write(res(wire.MethodStop, wire.StopResponse{}, nil))
	return b.Bytes()
}

// FuzzGuestStream feeds arbitrary bytes to the host as the guest's stdout
// while the host runs a session (hello, start, launch, observe, act,
// observe, stop). The input is cut into frames; each response is sent
// when the host's next request arrives and takes that request's ID, so
// answers meet the calls they could answer. Whatever the bytes, the host
// must not panic or hang, and what it passes on stays within its bounds.
func FuzzGuestStream(f *testing.F) {
	f.Add(sessionFrames(nil))
	ev := guestenvtest.EventFrame
	f.Add(sessionFrames(nil, ev(wire.EventOutput, map[string]string{"stream": "x"}, []byte("y"))))
	f.Add(sessionFrames(nil, ev(wire.EventExit, observe.Exit{}, nil), ev(wire.EventExit, observe.Exit{}, nil)))
	f.Add(sessionFrames(nil, ev(wire.EventWindow, wire.WindowEvent{Kind: "title", Window: observe.Window{Title: string(bytes.Repeat([]byte{0xff}, 5000))}}, nil)))
	f.Add(sessionFrames(nil, ev(wire.EventLog, wire.LogEvent{Level: "warn", Msg: "m"}, nil)))
	body, _ := json.Marshal(wire.ScreenshotResponse{Width: 700, Height: 500, Hash: 3, Encoding: wire.EncodingBGRXS2})
	big, _ := guestenvtest.Encode(&wire.Header{Type: wire.Response, Method: wire.MethodScreenshot, Body: body},
		bytes.Clone(s2.Encode(nil, make([]byte, 4*700*500))))
	f.Add(sessionFrames(big))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzSession(t, data)
	})
}

// TestGuestStreamSeeds: the fuzz harness carries a healthy session to its
// end, and its hostile seeds stop where they should.
func TestGuestStreamSeeds(t *testing.T) {
	ev := guestenvtest.EventFrame
	tests := []struct {
		name    string
		data    []byte
		reached string
	}{
		{"healthy", sessionFrames(nil), "stop"},
		{"unknown stream", sessionFrames(nil, ev(wire.EventOutput, map[string]string{"stream": "x"}, []byte("y"))), "start"},
		{"second exit", sessionFrames(nil, ev(wire.EventExit, observe.Exit{}, nil), ev(wire.EventExit, observe.Exit{}, nil)), "stop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, reached := fuzzSession(t, tt.data)
			if reached != tt.reached {
				t.Errorf("the session reached %q, want %q", reached, tt.reached)
			}
			if tt.reached == "stop" && (rec.out[observe.Stdout] != 6 || len(rec.windows) != 1 || rec.exits != 1) {
				t.Errorf("passed on: %d bytes of stdout, %d windows, %d exits", rec.out[observe.Stdout], len(rec.windows), rec.exits)
			}
		})
	}
}

// fuzzSession runs one session on data and returns what was passed on and
// the last call that succeeded.
func fuzzSession(t *testing.T, data []byte) (*recorder, string) {
	// Cut the input into frames; what does not parse is sent raw at the end.
	var frames []*wire.Message
	br := bufio.NewReader(bytes.NewReader(data))
	for {
		m, err := wire.ReadFrame(br)
		if err != nil {
			break
		}
		frames = append(frames, m)
	}
	tail, _ := io.ReadAll(br)

	hostR, guestW := io.Pipe()
	guestR, hostW := io.Pipe()
	reqs := make(chan uint32, 16)
	go func() { // the host's requests, as they arrive
		defer close(reqs)
		r := bufio.NewReader(guestR)
		for {
			m, err := wire.ReadFrame(r)
			if err != nil {
				return
			}
			if m.Type == wire.Request && m.Method != wire.MethodCancel {
				reqs <- m.ID
			}
		}
	}()
	guestDone := make(chan struct{})
	go func() {
		defer close(guestDone)
		defer guestW.Close()
		w := bufio.NewWriter(guestW)
		hello := false // the host sends nothing before the guest's hello
		for _, m := range frames {
			hello = hello || m.Type == wire.Event && m.Method == wire.EventHello
			if m.Type == wire.Response && hello {
				if err := w.Flush(); err != nil {
					return
				}
				id, ok := <-reqs
				if !ok {
					return
				}
				m.ID = id
			}
			b, err := guestenvtest.Encode(&m.Header, m.Payload)
			if err != nil {
				return
			}
			if _, err := w.Write(b); err != nil {
				return
			}
		}
		w.Write(tail)
		w.Flush()
	}()

	rec := newRecorder()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	screen := observe.DefaultScreen
	const logCap = 1 << 20
	check := func(fr *observe.Frame, st environment.State) {
		if fr != nil && (fr.Width > screen.Width || fr.Height > screen.Height || len(fr.Pix) != 4*fr.Width*fr.Height) {
			t.Fatalf("a %d×%d frame of %d bytes on a %d×%d screen", fr.Width, fr.Height, len(fr.Pix), screen.Width, screen.Height)
		}
		if len(st.Windows) > guestenv.MaxWindows {
			t.Fatalf("%d windows in a state", len(st.Windows))
		}
		for _, w := range st.Windows {
			if len(w.Title) > guestenv.MaxTitle {
				t.Fatalf("a %d-byte title in a state", len(w.Title))
			}
		}
	}
	reached := ""
	func() {
		c, err := guestenv.Dial(ctx, hostR, hostW, rec, rec.log)
		if err != nil {
			return
		}
		reached = "hello"
		if _, err := c.Start(ctx, screen, false, time.Second); err != nil {
			return
		}
		reached = "start"
		bundle := &app.Bundle{Manifest: app.Manifest{Command: "app"}}
		if _, err := c.Launch(ctx, environment.LaunchSpec{App: bundle, LogCap: logCap}, nil); err != nil {
			return
		}
		reached = "launch"
		for i := 0; i < 2; i++ {
			fr, st, err := c.Observe(ctx)
			if err != nil {
				return
			}
			reached = "observe"
			check(fr, st)
			if i == 0 {
				if _, err := c.Act(ctx, action.Action{Kind: action.Wait, MS: 1}); err != nil {
					return
				}
				reached = "act"
			}
		}
		if _, err := c.Stop(ctx, time.Second); err == nil {
			reached = "stop"
		}
	}()
	if ctx.Err() != nil {
		t.Fatalf("the session hung: %v", ctx.Err())
	}
	hostW.Close()
	hostR.CloseWithError(errors.New("session over"))
	<-guestDone

	rec.mu.Lock()
	defer rec.mu.Unlock()
	for s := range rec.streams {
		if s != observe.Stdout && s != observe.Stderr {
			t.Fatalf("output on stream %q was passed on", s)
		}
	}
	for s, n := range rec.out {
		if n > logCap {
			t.Fatalf("%d bytes of %s passed on (cap %d)", n, s, logCap)
		}
	}
	if rec.exits > 1 {
		t.Fatalf("%d exits passed on", rec.exits)
	}
	for _, w := range rec.windows {
		if len(w.Title) > guestenv.MaxTitle {
			t.Fatalf("a %d-byte title passed on", len(w.Title))
		}
	}
	return rec, reached
}
