package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
	"github.com/codegirl-games/agentbox/wire"
)

// TestHostileGuestFloods: a hostile guest (or anything that writes the
// guest's stdout) floods the host with every kind of message while the real
// runtime, sink and trace writer take them in. The host's memory stays
// under a fixed bound, the trace stays bounded, and every run ends.
//
// Memory is the process's peak RSS (VmHWM) over each run, reset before it
// through /proc/self/clear_refs, so a short spike counts as much as a leak.
func TestHostileGuestFloods(t *testing.T) {
	testenv.Require(t, testenv.Slow("floods hundreds of megabytes through the host"))
	const (
		logCap = 1 << 20
		// memBound is the most a run may add to the host's peak RSS. A
		// healthy run adds a few MiB; the attacks below added hundreds.
		memBound = 128 << 20
		// fileBound is the most any trace file may hold.
		fileBound = 2 * logCap
	)
	// An 8192×8192 black screenshot, s2-compressed to a few bytes (Encode
	// returns them inside a buffer of the uncompressed size: copy).
	huge := bytes.Clone(s2.Encode(nil, make([]byte, 4*8192*8192)))
	title := strings.Repeat("t", 4000)
	// The guest writes prepared frames over and over, so that what it
	// allocates itself does not count against the host.
	repeat := func(w *guestenvtest.Writer, frame []byte, n int) {
		for i := 0; i < n && w.Err() == nil; i++ {
			w.Raw(frame)
		}
	}

	floods := []struct {
		name  string
		guest *guestenvtest.Guest
		// want is how the run ends: normally when the flood is what a
		// guest may send (it is capped), as an environment error when it
		// is refused as a protocol error.
		want trace.Outcome
	}{
		{"an 8192×8192 screenshot", &guestenvtest.Guest{OnScreenshot: func(w *guestenvtest.Writer, m *wire.Message, n int) bool {
			w.Reply(m.ID, m.Method, wire.ScreenshotResponse{Width: 8192, Height: 8192, Hash: 9, Encoding: wire.EncodingBGRXS2,
				State: &wire.State{Running: true}}, huge)
			return true
		}}, trace.Error},
		{"60,000 output streams with 4 KB names", &guestenvtest.Guest{OnLaunch: func(w *guestenvtest.Writer) {
			// One frame, its stream name made unique in place each time.
			name := strings.Repeat("s", 4096)
			frame := guestenvtest.EventFrame(wire.EventOutput, map[string]any{"stream": name}, []byte("no newline"))
			at := bytes.Index(frame, []byte(name))
			for i := 0; i < 60000 && w.Err() == nil; i++ {
				copy(frame[at:], fmt.Sprintf("%08d", i))
				w.Raw(frame)
			}
		}}, trace.Error},
		{"64 MiB of stdout past the guest's cap", &guestenvtest.Guest{OnLaunch: func(w *guestenvtest.Writer) {
			chunk := bytes.Repeat([]byte("flood\n"), 32<<10/6)
			repeat(w, guestenvtest.EventFrame(wire.EventOutput, map[string]any{"stream": "stdout"}, chunk), 64<<20/len(chunk))
		}}, trace.Success},
		{"20,000 window titles of 4 KB", &guestenvtest.Guest{OnLaunch: func(w *guestenvtest.Writer) {
			repeat(w, guestenvtest.EventFrame(wire.EventWindow, wire.WindowEvent{Kind: "title", Window: observe.Window{ID: 1, Title: title}}, nil), 20000)
		}}, trace.Success},
		{"100,000 exit events", &guestenvtest.Guest{OnLaunch: func(w *guestenvtest.Writer) {
			repeat(w, guestenvtest.EventFrame(wire.EventExit, observe.Exit{Code: 0}, nil), 100000)
		}}, trace.Failure}, // the app exited (once)
		{"2,000 log events of 100 KB", &guestenvtest.Guest{OnLaunch: func(w *guestenvtest.Writer) {
			repeat(w, guestenvtest.EventFrame(wire.EventLog, wire.LogEvent{Level: "warn", Msg: strings.Repeat("m", 100000)}, nil), 2000)
		}}, trace.Success},
		{"answers of 60 MiB to requests never made", &guestenvtest.Guest{OnAct: func(w *guestenvtest.Writer) {
			for i := 0; i < 10; i++ {
				w.FrameZeros(&wire.Header{Type: wire.Response, ID: uint32(100000 + i), Method: wire.MethodScreenshot}, 60<<20)
			}
		}}, trace.Success},
		{"events with 4 MiB headers", &guestenvtest.Guest{OnLaunch: func(w *guestenvtest.Writer) {
			repeat(w, guestenvtest.EventFrame("surprise", map[string]string{"x": strings.Repeat("h", 4<<20-100)}, nil), 50)
		}}, trace.Error},
	}
	for _, f := range floods {
		t.Run(f.name, func(t *testing.T) {
			b := &guestenvtest.Backend{New: func() *guestenvtest.Guest { return f.guest }}
			dir := filepath.Join(t.TempDir(), "trace")
			cfg := Config{
				RunID: "hostile", Backend: b, TraceDir: dir, Task: "t", LogCap: logCap, Timeout: 2 * time.Minute,
				App: &app.Bundle{Target: "app", Manifest: app.Manifest{Command: "app"}},
			}
			base := resetPeakRSS(t)
			res, err := Run(t.Context(), cfg, Loop{Agent: &scripted{steps: []agent.Decision{
				{Action: action.Action{Kind: action.Wait, MS: 5}},
				{Action: action.Action{Kind: action.Wait, MS: 5}},
				{Action: action.Action{Kind: action.Done}},
			}}})
			peak := peakRSS(t)
			if err != nil {
				t.Fatal(err)
			}
			grew := peak - base
			t.Logf("%s/%s (%s); peak RSS %d MiB above the %d MiB before the run", res.Outcome, res.Reason, firstLine(res.Message), grew>>20, base>>20)
			if grew > memBound {
				t.Errorf("the host's peak RSS grew by %d MiB during the run (bound %d MiB)", grew>>20, memBound>>20)
			}
			if res.Outcome != f.want {
				t.Errorf("outcome %s/%s (%s), want %s", res.Outcome, res.Reason, res.Message, f.want)
			}
			if f.want == trace.Error && (res.Reason != trace.ReasonEnvironment || !strings.Contains(res.Message, "protocol error")) {
				t.Errorf("reason %s (%s), want environment for a protocol error", res.Reason, res.Message)
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				fi, err := e.Info()
				if err != nil || e.IsDir() {
					continue
				}
				if fi.Size() > fileBound {
					t.Errorf("%s is %d bytes (bound %d)", e.Name(), fi.Size(), fileBound)
				}
				if e.Name() == trace.StepsFile {
					t.Logf("%s: %d bytes", e.Name(), fi.Size())
				}
			}
			var run struct {
				Logs map[string]any `json:"logs"`
			}
			data, _ := os.ReadFile(filepath.Join(dir, trace.RunFile))
			json.Unmarshal(data, &run)
			t.Logf("run.json logs: %v", run.Logs)
			if errs, closed := b.GuestErrors(); closed != 1 {
				t.Errorf("%d environments closed, want 1 (guest: %v)", closed, errs)
			}
		})
	}
}

// resetPeakRSS frees what the heap can give back, resets the process's
// peak RSS to its current RSS and returns that.
func resetPeakRSS(t *testing.T) int64 {
	t.Helper()
	goruntime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("cannot reset the peak RSS (Linux ≥ 4.0 has /proc/self/clear_refs): %v", err)
	}
	return procStatus(t, "VmHWM")
}

func peakRSS(t *testing.T) int64 { return procStatus(t, "VmHWM") }

// procStatus reads a "kB" field of /proc/self/status, in bytes.
func procStatus(t *testing.T, field string) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("/proc/self/status: %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("/proc/self/status has no %s", field)
	return 0
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return fmt.Sprintf("%.160s", s)
}
