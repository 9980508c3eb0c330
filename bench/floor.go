package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
)

// StepFloor is what the primitives of a step cost alone, measured in the
// same sandbox as the step (environment.Floorer), and agentbox's step
// held against them. The floor of a step of an unchanged screen is one
// empty round trip over the backend's channel, one XTEST motion with its
// sync and one check for damage where the guest uses DAMAGE (one capture
// of the screen and its hash where it does not: that is then what the
// step makes); of a full-frame step, an XTEST motion, a capture and its
// hash, with the frame carried back by the round trip, compressed as a
// screenshot's and decompressed.
type StepFloor struct {
	SHM        bool // the captures went through MIT-SHM
	FrameBytes int  // the compressed frame the frame's round trip carried
	Ping       Stats
	FrameTrip  Stats
	Motion     Stats
	Capture    Stats
	Damage     Stats // the check for damage of an unchanged screen (skipped without DAMAGE)
	Hash       Stats
	Encode     Stats // the frame's compression (guest)
	Decode     Stats // and decompression (host)
	PNG        Stats
	// Unchanged and Full are the floors (sums of the primitives' p50s);
	// the ratios are agentbox's p50 over them (absent where agentbox's
	// step was not measured).
	Unchanged      float64
	Full           float64
	UnchangedRatio float64 `json:",omitempty"`
	FullRatio      float64 `json:",omitempty"`
}

func summarizeFloor(f environment.Floor) *StepFloor {
	s := &StepFloor{
		SHM: f.SHM, FrameBytes: f.FrameBytes,
		Ping: summarize(f.Ping), FrameTrip: summarize(f.FrameTrip), Motion: summarize(f.Motion),
		Capture: summarize(f.Capture), Damage: summarize(f.Damage), Hash: summarize(f.Hash), PNG: summarize(f.PNG),
		Encode: summarize(f.Encode), Decode: summarize(f.Decode),
	}
	if s.Damage.N > 0 {
		s.Unchanged = s.Ping.P50 + s.Motion.P50 + s.Damage.P50
	} else {
		s.Unchanged = s.Ping.P50 + s.Motion.P50 + s.Capture.P50 + s.Hash.P50
	}
	s.Full = s.FrameTrip.P50 + s.Motion.P50 + s.Capture.P50 + s.Hash.P50 + s.Encode.P50 + s.Decode.P50
	return s
}

// ratios holds agentbox's step against the floor.
func (s *StepFloor) ratios(st StepStats) {
	s.UnchangedRatio = ratio(st.Unchanged, s.Unchanged)
	s.FullRatio = ratio(st.Full, s.Full)
}

func ratio(s Stats, floor float64) float64 {
	if s.N == 0 || floor <= 0 {
		return 0
	}
	return s.P50 / floor
}

// stepFloor measures the floor in env.
func stepFloor(ctx context.Context, o Options, env environment.Environment) (*StepFloor, error) {
	fl, ok := env.(environment.Floorer)
	if !ok {
		return nil, nil
	}
	f, err := fl.Floor(ctx, o.FloorSamples)
	if err != nil {
		return nil, fmt.Errorf("the floor of its primitives: %w", err)
	}
	return summarizeFloor(f), nil
}

// AtFloor renders agentbox's figure against its floor: "2.20 ms = 1.4×
// floor 1.57 ms".
func AtFloor(v, floor float64) string {
	if floor <= 0 {
		return FormatMS(v)
	}
	return fmt.Sprintf("%s = %.1f× floor %s", FormatMS(v), v/floor, FormatMS(floor))
}

func (s *StepFloor) print(w io.Writer, st StepStats) {
	shm := "MIT-SHM"
	if !s.SHM {
		shm = "core GetImage"
	}
	fmt.Fprintf(w, "  the floor, its primitives alone in the same sandbox (p50, n=%d):\n", s.Ping.N)
	fmt.Fprintf(w, "    empty round trip %s, with the frame %s (%d KiB), XTEST motion + sync %s,\n",
		FormatMS(s.Ping.P50), FormatMS(s.FrameTrip.P50), s.FrameBytes>>10, FormatMS(s.Motion.P50))
	damage, unchanged := "no DAMAGE", "round trip + motion + capture + hash"
	if s.Damage.N > 0 {
		damage, unchanged = "damage check "+FormatMS(s.Damage.P50), "round trip + motion + damage check"
	}
	fmt.Fprintf(w, "    %s capture %s, %s, hash %s, compress %s + decompress %s, PNG encode %s (n=%d)\n",
		shm, FormatMS(s.Capture.P50), damage, FormatMS(s.Hash.P50), FormatMS(s.Encode.P50), FormatMS(s.Decode.P50), FormatMS(s.PNG.P50), s.PNG.N)
	if st.Unchanged.N > 0 {
		fmt.Fprintf(w, "  step, screen unchanged:    %s (%s)\n", AtFloor(st.Unchanged.P50, s.Unchanged), unchanged)
		fmt.Fprintf(w, "  step, full frame:          %s (frame round trip + motion + capture + hash + compress + decompress)\n", AtFloor(st.Full.P50, s.Full))
	}
}

// Machine is what the figures were measured on, so that a reader can
// judge their noise.
type Machine struct {
	CPUs       int
	OS         string
	Kernel     string     `json:",omitempty"`
	LoadBefore [3]float64 // the 1-, 5- and 15-minute load averages
	LoadAfter  [3]float64
}

func loadAvg() [3]float64 {
	var l [3]float64
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	for i, f := range strings.Fields(string(data)) {
		if i >= 3 {
			break
		}
		l[i], _ = strconv.ParseFloat(f, 64)
	}
	return l
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), OS: runtime.GOOS + "/" + runtime.GOARCH, LoadBefore: loadAvg()}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	return m
}

func (m Machine) String() string {
	l := func(v [3]float64) string { return fmt.Sprintf("%.2f %.2f %.2f", v[0], v[1], v[2]) }
	k := ""
	if m.Kernel != "" {
		k = ", Linux " + m.Kernel
	}
	return fmt.Sprintf("%d CPUs (%s%s); load average %s before, %s after", m.CPUs, m.OS, k, l(m.LoadBefore), l(m.LoadAfter))
}

// MarshalJSON writes a measurement that was asked away (no samples) as
// {"Skipped": true}, never as zeros that read as results.
func (s Stats) MarshalJSON() ([]byte, error) {
	if s.N == 0 {
		return []byte(`{"Skipped":true}`), nil
	}
	type plain Stats
	return json.Marshal(plain(s))
}

// screenName is "640x480".
func screenName(s observe.Screen) string { return fmt.Sprintf("%dx%d", s.Width, s.Height) }
