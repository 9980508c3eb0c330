package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
)

// Primitives are a step's primitives timed alone in one sandbox
// (environment.Floorer): one empty round trip over the backend's channel
// (Ping), the round trip of one that carries a whole frame back (FrameTrip,
// the frame FrameBytes compressed as a screenshot's, and its
// decompression on the host, Decode), one XTEST motion with its sync, one
// capture of the screen (MIT-SHM when SHM), the check for damage of an
// unchanged screen (skipped without DAMAGE), the hash of a frame, its
// compression in the guest (Encode) and a PNG encode.
type Primitives struct {
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
}

// StepFloor is what the primitives of a step cost alone, measured in the
// same sandbox as the step, and agentbox's step held against them. The
// floor of a step of an unchanged screen is one empty round trip over the
// backend's channel, one XTEST motion with its sync and one check for
// damage where the guest uses DAMAGE (one capture of the screen and its
// hash where it does not: that is then what the step makes); of a
// full-frame step, an XTEST motion, a capture and its hash, with the
// frame carried back by the round trip, compressed as a screenshot's and
// decompressed.
//
// The floor is taken a sample at a time, in turn with the step's samples
// (Paired): a floor sample (each primitive once), a step, a floor sample,
// a step, … on the same sandbox, so that both see the same machine. A
// sample's floor is the sum of its primitives; UnchangedFloor and
// FullFloor are those sums over the samples, Unchanged and Full their
// medians, and a ratio is the step's median over that median. The
// primitives (embedded) are the unchanged-screen sandbox's, timed in turn
// with the unchanged step: only those of its floor (the round trip, the
// motion and the damage check; a capture and a hash without DAMAGE), the
// others skipped; FullFrame the full-frame sandbox's, every primitive, in
// turn with the full-frame step, where FullFloor and Full come from.
// Without a full-frame step (--samples 0) one sandbox times everything. (Before
// Paired, the floor was a phase of its own before the steps, and
// Unchanged and Full the sums of the primitives' p50s.)
type StepFloor struct {
	Primitives
	FullFrame      *Primitives `json:",omitempty"`
	Paired         bool        `json:",omitempty"`
	UnchangedFloor Stats
	FullFloor      Stats
	Unchanged      float64
	Full           float64
	// The ratios are agentbox's median step over the median floor
	// (absent where agentbox's step was not measured).
	UnchangedRatio float64 `json:",omitempty"`
	FullRatio      float64 `json:",omitempty"`
}

// summarizeFloor summarises one sandbox's floor samples: its primitives,
// and each sample's floors (the i-th sample of every primitive is one
// sample of the floor).
func summarizeFloor(f environment.Floor) *StepFloor {
	s := &StepFloor{Primitives: Primitives{
		SHM: f.SHM, FrameBytes: f.FrameBytes,
		Ping: summarize(f.Ping), FrameTrip: summarize(f.FrameTrip), Motion: summarize(f.Motion),
		Capture: summarize(f.Capture), Damage: summarize(f.Damage), Hash: summarize(f.Hash), PNG: summarize(f.PNG),
		Encode: summarize(f.Encode), Decode: summarize(f.Decode),
	}}
	sums := func(parts ...[]time.Duration) []time.Duration {
		n := len(parts[0])
		for _, p := range parts {
			n = min(n, len(p))
		}
		d := make([]time.Duration, n)
		for _, p := range parts {
			for i := range d {
				d[i] += p[i]
			}
		}
		return d
	}
	if len(f.Damage) > 0 {
		s.UnchangedFloor = summarize(sums(f.Ping, f.Motion, f.Damage))
	} else {
		s.UnchangedFloor = summarize(sums(f.Ping, f.Motion, f.Capture, f.Hash))
	}
	s.FullFloor = summarize(sums(f.FrameTrip, f.Motion, f.Capture, f.Hash, f.Encode, f.Decode))
	s.Unchanged, s.Full = s.UnchangedFloor.P50, s.FullFloor.P50
	return s
}

// withFullFrame takes the full-frame step's floor from the full-frame
// sandbox's samples.
func (s *StepFloor) withFullFrame(full *StepFloor) {
	s.FullFrame = &full.Primitives
	s.FullFloor, s.Full = full.FullFloor, full.Full
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

// AtFloor renders agentbox's figure against its floor: "2.20 ms = 1.4×
// floor 1.57 ms".
func AtFloor(v, floor float64) string {
	if floor <= 0 {
		return FormatMS(v)
	}
	return fmt.Sprintf("%s = %.1f× floor %s", FormatMS(v), v/floor, FormatMS(floor))
}

func (s *StepFloor) print(w io.Writer, st StepStats) {
	shm := func(p *Primitives) string {
		if p.SHM {
			return "MIT-SHM"
		}
		return "core GetImage"
	}
	png := func(p *Primitives) string {
		if p.PNG.N == 0 {
			return "PNG encode skipped"
		}
		return fmt.Sprintf("PNG encode %s (n=%d)", FormatMS(p.PNG.P50), p.PNG.N)
	}
	unchanged := "round trip + motion + capture + hash"
	if s.Damage.N > 0 {
		unchanged = "round trip + motion + damage check"
	}
	// Without a full-frame step, one sandbox timed every primitive.
	f, how := s.FullFrame, "in the step's sandbox, a sample before each step"
	if f == nil {
		f, how = &s.Primitives, "in the same sandbox"
	}
	fmt.Fprintf(w, "  the floor, its primitives alone %s (p50, n=%d):\n", how, s.Motion.N)
	if s.Damage.N > 0 {
		fmt.Fprintf(w, "    screen unchanged: empty round trip %s, XTEST motion + sync %s, damage check %s\n",
			FormatMS(s.Ping.P50), FormatMS(s.Motion.P50), FormatMS(s.Damage.P50))
	} else {
		fmt.Fprintf(w, "    screen unchanged: empty round trip %s, XTEST motion + sync %s, no DAMAGE: %s capture %s, hash %s\n",
			FormatMS(s.Ping.P50), FormatMS(s.Motion.P50), shm(&s.Primitives), FormatMS(s.Capture.P50), FormatMS(s.Hash.P50))
	}
	fmt.Fprintf(w, "    full frame: the frame's round trip %s (%d KiB), XTEST motion + sync %s, %s capture %s, hash %s, compress %s + decompress %s; %s\n",
		FormatMS(f.FrameTrip.P50), f.FrameBytes>>10, FormatMS(f.Motion.P50), shm(f), FormatMS(f.Capture.P50), FormatMS(f.Hash.P50),
		FormatMS(f.Encode.P50), FormatMS(f.Decode.P50), png(f))
	if st.Unchanged.N > 0 {
		if s.Paired {
			fmt.Fprintf(w, "  against the floor: the step's median over the median of the floor's samples taken in turn with it (a sample's floor: the sum of its primitives)\n")
		}
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
