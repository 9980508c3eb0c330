package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/observe"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

func TestSummarize(t *testing.T) {
	ms := func(v ...float64) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x * float64(time.Millisecond))
		}
		return d
	}
	twenty := make([]float64, 20)
	for i := range twenty {
		twenty[19-i] = float64(i + 1) // 20, 19, …, 1: summarize sorts
	}
	for _, tt := range []struct {
		name string
		in   []time.Duration
		want Stats
	}{
		{"none", nil, Stats{}},
		{"one", ms(2.5), Stats{N: 1, Min: 2.5, P50: 2.5, P95: 2.5, Max: 2.5, Mean: 2.5}},
		{"two", ms(3, 1), Stats{N: 2, Min: 1, P50: 1, P95: 3, Max: 3, Mean: 2}},
		{"twenty", ms(twenty...), Stats{N: 20, Min: 1, P50: 10, P95: 19, Max: 20, Mean: 10.5}},
		{"microseconds kept", []time.Duration{1500 * time.Microsecond, 1499*time.Microsecond + 999}, Stats{N: 2, Min: 1.499, P50: 1.499, P95: 1.5, Max: 1.5, Mean: 1.4995}},
	} {
		if got := summarize(tt.in); got != tt.want {
			t.Errorf("%s: summarize = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestFormatMS(t *testing.T) {
	for _, tt := range []struct {
		in   float64
		want string
	}{
		{0, "0.00 ms"},
		{1.25, "1.25 ms"},
		{9.994, "9.99 ms"},
		{10, "10 ms"},
		{343.4, "343 ms"},
		{999.4, "999 ms"},
		{1000, "1.00 s"},
		{1040, "1.04 s"},
		{61500, "61.50 s"},
	} {
		if got := FormatMS(tt.in); got != tt.want {
			t.Errorf("FormatMS(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
	s := Stats{N: 50, Min: 0.81, P50: 1.2, P95: 12.5, Max: 1480}
	if got, want := s.String(), "p50 1.20 ms  p95 12 ms  (min 0.81 ms, max 1.48 s, n=50)"; got != want {
		t.Errorf("Stats.String() = %q, want %q", got, want)
	}
}

// named is a backend that only has a name, for the report's header.
type named string

func (n named) Name() string { return string(n) }
func (n named) Create(context.Context, environment.Config) (environment.Environment, error) {
	return nil, errors.New("not a real backend")
}

// TestPrintGolden: the report agentbox bench prints, for Docker with the
// seed-style comparison and for the local backend without it
// (testdata/*.txt; go test -update rewrites them).
func TestPrintGolden(t *testing.T) {
	stats := func(p50 float64) Stats {
		return Stats{N: 50, Min: p50 * 0.8, P50: p50, P95: p50 * 1.5, Max: p50 * 3, Mean: p50 * 1.1}
	}
	floor := &StepFloor{Primitives: Primitives{SHM: true, Ping: stats(0.1), Motion: stats(0.05), Damage: stats(0.04)},
		FullFrame: &Primitives{SHM: true, FrameBytes: 151 << 10, Ping: stats(0.11), FrameTrip: stats(0.95), Motion: stats(0.06),
			Capture: stats(0.31), Damage: stats(0.04), Hash: stats(0.07), Encode: stats(0.41), Decode: stats(0.21), PNG: Stats{N: 50, Min: 8, P50: 9, P95: 11, Max: 12, Mean: 9.2}},
		Paired: true, UnchangedFloor: stats(0.19), FullFloor: stats(2.01)}
	floor.Unchanged, floor.Full = 0.19, 2.01
	rep := &Report{
		Machine:   Machine{CPUs: 2, OS: "linux/amd64", Kernel: "6.1.0", LoadBefore: [3]float64{1.5, 1.25, 1}, LoadAfter: [3]float64{2.25, 1.5, 1.1}},
		ColdStart: Stats{N: 5, Min: 980, P50: 1040, P95: 1310, Max: 1310, Mean: 1100},
		ColdFloor: Stats{N: 5, Min: 280, P50: 300, P95: 330, Max: 330, Mean: 305},
		ColdRatio: 1040.0 / 300,
		Steps: []StepStats{
			{Screen: observe.Screen{Width: 640, Height: 480, Depth: 24}, Unchanged: stats(1.3), Full: stats(4.2), Click: stats(2.1), Floor: floor},
			{Screen: observe.Screen{Width: 1920, Height: 1080, Depth: 24}, Unchanged: stats(6.5), Full: stats(31), Click: stats(7.2)},
		},
		RunPerStep: 5.25, RunSteps: 200, TraceShare: 0.123, TraceFinish: 42,
		Pool: &PoolStats{Eval: &EvalStats{Episodes: 48, Parallel: 12, Pool: 12, PerMinute: 150, Seconds: 19.2, Passed: 48,
			PooledPerMinute: 240, PooledSeconds: 12, PooledPass: 48, Warm: 12, Cold: 36,
			RelaunchPerMinute: 400, RelaunchSeconds: 7.2, RelaunchPass: 48, Relaunched: 36}},
	}
	for _, tt := range []struct {
		file string
		o    Options
		seed Stats
	}{
		{"report-docker.txt", Options{Backend: named("docker"), Image: "agentbox/runtime:bookworm"}, Stats{N: 20, Min: 240, P50: 262.5, P95: 300, Max: 301, Mean: 265}},
		{"report-local.txt", Options{Backend: named("local")}, Stats{}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			r := *rep
			if tt.seed.N == 0 {
				r.Skipped = []string{"the seed-style step (the local backend has none)"}
			}
			r.Seed = tt.seed
			if tt.seed.N > 0 {
				r.Ratio = tt.seed.P50 / r.RunPerStep
			}
			var b bytes.Buffer
			r.Print(&b, tt.o)
			path := filepath.Join("testdata", tt.file)
			if *update {
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -run TestPrintGolden ./bench/ -args -update writes it)", err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("%s differs (go test -update rewrites it after a deliberate change)\ngot:\n%s\nwant:\n%s", path, b.Bytes(), want)
			}
		})
	}
}

// TestMoverAgent: the full run's agent holds Right for 19 steps, then Left,
// moves the mouse in between, stays on the 640×480 screen, and finishes
// after n steps with nothing held.
func TestMoverAgent(t *testing.T) {
	const n = 85
	a := &moverAgent{n: n}
	held := map[string]bool{}
	for step := 1; step <= n; step++ {
		d, err := a.Decide(t.Context(), &observe.Observation{Step: step})
		if err != nil {
			t.Fatal(err)
		}
		act := d.Action
		switch act.Kind {
		case action.KeyDown:
			if held[act.Key] {
				t.Fatalf("step %d: %s pressed twice", step, act.Key)
			}
			held[act.Key] = true
		case action.KeyUp:
			if !held[act.Key] {
				t.Fatalf("step %d: %s released while up", step, act.Key)
			}
			delete(held, act.Key)
		case action.MouseMove:
			if *act.X < 0 || *act.X >= 640 || *act.Y < 0 || *act.Y >= 480 {
				t.Fatalf("step %d: mouse_move to (%d,%d) leaves the screen", step, *act.X, *act.Y)
			}
		case action.Done:
			if step != n {
				t.Fatalf("done at step %d, want %d", step, n)
			}
		default:
			t.Fatalf("step %d: unexpected %s", step, act.Kind)
		}
		switch step {
		case 1, 41:
			if act.Kind != action.KeyDown || act.Key != "Right" {
				t.Errorf("step %d: %s %s, want key_down Right", step, act.Kind, act.Key)
			}
		case 21:
			if act.Kind != action.KeyDown || act.Key != "Left" {
				t.Errorf("step %d: %s %s, want key_down Left", step, act.Kind, act.Key)
			}
		}
		if err := action.Validate(act, action.DefaultLimits(640, 480)); err != nil {
			t.Errorf("step %d: %s is invalid: %v", step, act.Kind, err)
		}
	}
	// Step 85 ends the run between a Right press (81) and its release.
	if len(held) != 1 || !held["Right"] {
		t.Errorf("held at the end: %v", held)
	}
}

// TestRunScriptedGuest runs every measurement against guests on in-process
// pipes (guestenvtest): what Run creates, measures, counts and closes,
// with no sandbox. The figures themselves are not checked.
func TestRunScriptedGuest(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "game"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command": "game", "window_title": "fake"}`), 0o644)
	backend := &guestenvtest.Backend{New: func() *guestenvtest.Guest { return &guestenvtest.Guest{} }}
	var progress bytes.Buffer
	o := Options{
		Backend: backend, App: dir, ColdRuns: 2, Samples: 5, FloorSamples: 4, RunSteps: 30, SeedSteps: 3,
		Screens:  []observe.Screen{{Width: 320, Height: 200, Depth: 24}, {Width: 800, Height: 600, Depth: 24}},
		Progress: &progress,
	}
	rep, err := Run(t.Context(), o)
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	if rep.ColdStart.N != 2 || len(rep.Steps) != 2 {
		t.Fatalf("cold starts %d, step sizes %d", rep.ColdStart.N, len(rep.Steps))
	}
	for i, s := range rep.Steps {
		if s.Screen != o.Screens[i] || s.Unchanged.N != 5 || s.Full.N != 5 || s.Click.N != 5 {
			t.Errorf("step stats %d: %+v", i, s)
		}
		// The unchanged screen's sandbox timed its step's primitives, the
		// full frame's every one, a sample before each step.
		if f := s.Floor; f == nil || !f.Paired || f.Ping.N != 4 || f.Motion.N != 4 || f.Damage.N != 4 || f.FrameTrip.N != 0 || f.Encode.N != 0 ||
			f.UnchangedFloor.N != 4 || f.Unchanged <= 0 || f.UnchangedRatio <= 0 || f.FullRatio <= 0 {
			t.Errorf("floor %d: %+v", i, s.Floor)
		} else if ff := f.FullFrame; ff == nil || ff.FrameTrip.N != 4 || ff.Motion.N != 4 || ff.PNG.N != 4 || ff.FrameBytes <= 0 ||
			ff.Decode.N != 4 || ff.Encode.N != 4 || f.FullFloor.N != 4 || f.Full != f.FullFloor.P50 {
			t.Errorf("full-frame floor %d: %+v", i, ff)
		}
	}
	if rep.RunSteps != 30 || rep.RunPerStep <= 0 || rep.TraceShare <= 0 {
		t.Errorf("full run: %d steps, %v ms a step, trace share %v", rep.RunSteps, rep.RunPerStep, rep.TraceShare)
	}
	if rep.Seed.N != 0 || !slices.Contains(rep.Skipped, "the seed-style step (the guestenvtest backend has none)") {
		t.Errorf("the seed-style step ran on %s (n=%d):\n%s", backend.Name(), rep.Seed.N, progress.String())
	}
	// 2 cold starts, 2 per screen size, 1 full run: each closed, each
	// guest ended cleanly.
	errs, closed := backend.GuestErrors()
	if closed != 7 || len(errs) != 7 {
		t.Errorf("%d environments closed, %d guests ended; want 7", closed, len(errs))
	}
	for _, err := range errs {
		if err != nil {
			t.Errorf("a guest: %v", err)
		}
	}
	var out bytes.Buffer
	rep.Print(&out, o)
	if !strings.Contains(out.String(), "backend guestenvtest") || strings.Contains(out.String(), "seed-style step (docker") ||
		!strings.Contains(out.String(), "step, screen unchanged:    ") || !strings.Contains(out.String(), "× floor") {
		t.Errorf("report:\n%s", out.String())
	}
}

// TestRunPoolScriptedGuest runs the server's and the pool's figures
// against guests on in-process pipes: the step through serve, resets from
// the pool and cold, and a pool filled to its size; then the full run
// goes on with the bundle (each server closes its own apps when it shuts
// down, so the figures after it still have theirs). Every sandbox is
// closed in the end.
func TestRunPoolScriptedGuest(t *testing.T) {
	testenv.Require(t, testenv.Programs("python3"))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "game"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command": "game", "window_title": "fake"}`), 0o644)
	backend := &guestenvtest.Backend{New: func() *guestenvtest.Guest { return &guestenvtest.Guest{} }, Relaunch: true}
	var progress bytes.Buffer
	o := Options{
		Backend: backend, App: dir, ColdRuns: 1, Samples: 2, RunSteps: 5,
		Screens: []observe.Screen{{Width: 320, Height: 200, Depth: 24}}, Progress: &progress,
		RemoteSamples: 2, PoolResets: 3, PoolCapacity: 3,
		PythonClient: filepath.Join("..", "python"), Python: "python3",
	}
	rep, err := Run(t.Context(), o)
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	p := rep.Pool
	if p == nil || p.ResetWarm.N != 3 || p.ResetCold.N != 3 || p.OpenWarm.N != 3 || p.OpenCold.N != 3 {
		t.Fatalf("pool figures: %+v", p)
	}
	// The Python client's loops on the same servers: reset.py's times.
	if p.PyRelaunch.N != 3 || p.PyDeep.N != 3 {
		t.Errorf("from Python: relaunch %+v, deep %+v", p.PyRelaunch, p.PyDeep)
	}
	if p.ResetRelaunch.N != 3 {
		t.Errorf("relaunch: %+v", p.ResetRelaunch)
	}
	// Its floor, a sample in turn with each relaunch, in a sandbox of the
	// bench's own: the scripted guest's 2 + 15 + 0.5 ms.
	if f := p.RelaunchFloor; f == nil || f.Total.N != 3 || f.Total.P50 != 17.5 || f.Kill.P50 != 2 || f.Start.P50 != 15 || f.Capture.P50 != 0.5 {
		t.Errorf("the relaunch's floor: %+v", p.RelaunchFloor)
	}
	if l := p.Loop; p.ResetLoop.N != 3 || l == nil || l.Resets != 3 || l.Warm+l.Cold != 3 || l.HitRate != float64(l.Warm)/3 || l.Target < 2 {
		t.Errorf("the back-to-back loop: %+v %+v", p.ResetLoop, p.Loop)
	}
	// The deep pool holds the whole loop: every reset warm, none waited.
	if l := p.DeepLoop; p.ResetDeep.N != 3 || l == nil || l.Resets != 3 || l.Warm != 3 || l.Cold != 0 || l.Waited != 0 {
		t.Errorf("the loop from a deep pool: %+v %+v", p.ResetDeep, p.DeepLoop)
	}
	if c := p.Capacity; c == nil || c.Filled != 3 || c.Target != 3 || c.Limit != "" || c.ServerRSSMiB <= 0 {
		t.Errorf("capacity: %+v", p.Capacity)
	}
	errs, closed := backend.GuestErrors()
	if closed != len(errs) {
		t.Errorf("%d environments created, %d closed", len(errs), closed)
	}
	var out bytes.Buffer
	rep.Print(&out, o)
	for _, want := range []string{"from the warm pool:", "cold create:", "back to back, no wait for the pool:", "back to back from a pool deeper than the loop (--pool 7, filled first)", "from Python (python/benchmarks/reset.py", "fresh, back to back from the deeper pool:", "hit rate", "3 of 3 idle",
		"its floor, in turn with it in a sandbox of the bench's own", "the start until its window is listed 15 ms", "against the floor: ", "against the Go loop's floor:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestSkipped: a bench with every count 0 measures nothing and says so:
// no "p50 0.00 ms … n=0" line, no "0-step run", every measurement named
// as skipped; its JSON holds no zero that reads as a result (golden:
// testdata/report-skipped.txt and .json).
func TestSkipped(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "game"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command": "game", "window_title": "fake"}`), 0o644)
	backend := &guestenvtest.Backend{New: func() *guestenvtest.Guest { return &guestenvtest.Guest{} }}
	var progress bytes.Buffer
	o := Options{Backend: backend, App: dir, Screens: []observe.Screen{{Width: 320, Height: 200, Depth: 24}}, Progress: &progress}
	rep, err := Run(t.Context(), o)
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	if _, closed := backend.GuestErrors(); closed != 0 || len(rep.Steps) != 0 {
		t.Errorf("%d sandboxes made, %d step sizes measured; want none", closed, len(rep.Steps))
	}
	if rep.Machine.CPUs <= 0 {
		t.Errorf("machine: %+v", rep.Machine)
	}
	// The machine's figures vary; the golden has fixed ones.
	rep.Machine = Machine{CPUs: 2, OS: "linux/amd64", LoadBefore: [3]float64{0.5, 0.25, 0.125}, LoadAfter: [3]float64{0.5, 0.25, 0.125}}
	var out bytes.Buffer
	rep.Print(&out, o)
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"n=0", "0.00 ms", "0-step", "1-step"} {
		if strings.Contains(out.String(), bad) {
			t.Errorf("the report says %q:\n%s", bad, out.String())
		}
	}
	for _, bad := range []string{`"N": 0`, `"P50": 0`, `"RunSteps"`, `"RunPerStep"`, `"Ratio"`} {
		if strings.Contains(string(data), bad) {
			t.Errorf("the JSON holds %s:\n%s", bad, data)
		}
	}
	golden(t, "report-skipped.txt", out.Bytes())
	golden(t, "report-skipped.json", append(data, '\n'))
}

// TestFloorRatios: the floors are the sums of their primitives' p50s (an
// unchanged screen's a damage check in place of a capture and a hash,
// where the guest uses DAMAGE), and the ratios agentbox's p50 over them; a
// step not measured has none.
func TestFloorRatios(t *testing.T) {
	ms := func(v float64, n int) []time.Duration {
		d := make([]time.Duration, n)
		for i := range d {
			d[i] = time.Duration(v * float64(time.Millisecond))
		}
		return d
	}
	base := environment.Floor{SHM: true, FrameBytes: 100, Ping: ms(0.1, 3), FrameTrip: ms(1, 3),
		Motion: ms(0.2, 3), Capture: ms(0.5, 3), Hash: ms(0.2, 3), Encode: ms(0.3, 3), Decode: ms(0.1, 3), PNG: ms(9, 3)}
	withDamage := base
	withDamage.Damage = ms(0.05, 3)
	for _, tt := range []struct {
		name            string
		floor           environment.Floor
		unchanged, full float64
	}{
		{"without DAMAGE", base, 1, 2.3},
		{"with DAMAGE", withDamage, 0.35, 2.3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := summarizeFloor(tt.floor)
			if math.Abs(f.Unchanged-tt.unchanged) > 1e-9 || math.Abs(f.Full-tt.full) > 1e-9 {
				t.Errorf("floors %v, %v; want %v, %v", f.Unchanged, f.Full, tt.unchanged, tt.full)
			}
		})
	}
	f := summarizeFloor(base)
	f.ratios(StepStats{Unchanged: Stats{N: 3, P50: 2}, Full: Stats{N: 3, P50: 4.6}})
	if math.Abs(f.UnchangedRatio-2) > 1e-9 || math.Abs(f.FullRatio-2) > 1e-9 {
		t.Errorf("ratios %v, %v; want 2, 2", f.UnchangedRatio, f.FullRatio)
	}
	f.ratios(StepStats{})
	if f.UnchangedRatio != 0 || f.FullRatio != 0 {
		t.Errorf("ratios of a step not measured: %v, %v", f.UnchangedRatio, f.FullRatio)
	}
	if got, want := AtFloor(2.2, 1.6), "2.20 ms = 1.4× floor 1.60 ms"; got != want {
		t.Errorf("AtFloor = %q, want %q", got, want)
	}
}

// golden compares got with testdata/name (go test -update rewrites it).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s ./bench/ -args -update writes it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it after a deliberate change)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// runIDs records the run ID of every sandbox created through it.
type runIDs struct {
	*guestenvtest.Backend
	mu  sync.Mutex
	ids []string
}

func (b *runIDs) Create(ctx context.Context, cfg environment.Config) (environment.Environment, error) {
	b.mu.Lock()
	b.ids = append(b.ids, cfg.RunID)
	b.mu.Unlock()
	return b.Backend.Create(ctx, cfg)
}

// TestTwoBenchesAtOnce: two benches at once share no run ID, so no
// container or Pod name (the backends name sandboxes by it) and no run
// label (the reaper and a run's forced teardown select by it): the full
// run's included, which once was the fixed "bench-run".
func TestTwoBenchesAtOnce(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "game"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command": "game", "window_title": "fake"}`), 0o644)
	var backends [2]*runIDs
	errs := make(chan error, 2)
	for i := range backends {
		backends[i] = &runIDs{Backend: &guestenvtest.Backend{New: func() *guestenvtest.Guest { return &guestenvtest.Guest{} }}}
		o := Options{
			Backend: backends[i], App: dir, ColdRuns: 1, Samples: 1, RunSteps: 3,
			Screens: []observe.Screen{{Width: 320, Height: 200, Depth: 24}}, Progress: io.Discard,
		}
		go func() { _, err := Run(t.Context(), o); errs <- err }()
	}
	for range backends {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	for i, b := range backends {
		if len(b.ids) < 3 {
			t.Errorf("bench %d created %d sandboxes: %q", i, len(b.ids), b.ids)
		}
		for _, id := range b.ids {
			if j, ok := seen[id]; ok {
				t.Errorf("run ID %q used by bench %d and bench %d", id, j, i)
			}
			seen[id] = i
		}
	}
}
