package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/observe"
)

// TestRemoteStepScriptedGuest: the step through agentbox serve is
// measured in-process, over the WebSocket, over HTTP and over the
// WebSocket with every frame, as many samples each; every environment
// the measurement made (one session, three served) is closed.
func TestRemoteStepScriptedGuest(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "game"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command": "game", "window_title": "fake"}`), 0o644)
	b, err := app.Load(dir, app.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	backend := &guestenvtest.Backend{New: func() *guestenvtest.Guest { return &guestenvtest.Guest{} }}
	rs, err := remoteStep(t.Context(), Options{Backend: backend, RemoteSamples: 7}, b)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]Stats{"in-process": rs.InProcess, "WebSocket": rs.WebSocket, "HTTP": rs.HTTP, "WebSocket, every frame": rs.WebSocketFull} {
		if s.N != 7 || s.P50 <= 0 {
			t.Errorf("%s: %+v", name, s)
		}
	}
	errs, closed := backend.GuestErrors()
	if closed != 4 {
		t.Errorf("%d of 4 environments closed (%v)", closed, errs)
	}
}

// TestPrintRemoteGolden: the report with the step through agentbox serve
// (testdata/report-remote.txt; go test -update rewrites it).
func TestPrintRemoteGolden(t *testing.T) {
	st := func(p50 float64) Stats {
		return Stats{N: 300, Min: p50 * 0.8, P50: p50, P95: p50 * 1.5, Max: p50 * 3, Mean: p50 * 1.1}
	}
	rep := &Report{
		Machine:    Machine{CPUs: 2, OS: "linux/amd64", LoadBefore: [3]float64{1, 1, 1}, LoadAfter: [3]float64{1.5, 1, 1}},
		ColdStart:  Stats{N: 5, Min: 980, P50: 1040, P95: 1310, Max: 1310, Mean: 1100},
		RunPerStep: 5.25, RunSteps: 200, TraceShare: 0.123, TraceFinish: 42,
		Remote: &RemoteStats{Screen: observe.Screen{Width: 640, Height: 480, Depth: 24},
			InProcess: st(1.1), WebSocket: st(1.35), HTTP: st(1.6), WebSocketFull: st(2.9)},
	}
	var b bytes.Buffer
	rep.Print(&b, Options{Backend: named("local")})
	path := filepath.Join("testdata", "report-remote.txt")
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestPrintRemoteGolden ./bench/ -args -update writes it)", err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("%s differs\ngot:\n%s\nwant:\n%s", path, b.Bytes(), want)
	}
}
