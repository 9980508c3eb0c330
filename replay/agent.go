package replay

import (
	"context"
	"fmt"
	"image"
	"strconv"
	"sync"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/mask"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// Timing says when the replay agent sends each recorded action.
type Timing string

// Timings.
const (
	// TimingRecorded sends each action at the same offset from the first
	// observation as in the recording (never earlier; later only when the
	// replay runs behind).
	TimingRecorded Timing = "recorded"
	// TimingFast sends each action as soon as the screen was compared.
	TimingFast Timing = "fast"
)

// ParseTiming reads "recorded" or "fast".
func ParseTiming(s string) (Timing, error) {
	switch Timing(s) {
	case TimingRecorded, TimingFast:
		return Timing(s), nil
	}
	return "", fmt.Errorf("timing %q: want recorded or fast", s)
}

// StepComparison is how one replayed screen compared with the recording.
type StepComparison struct {
	Step     int     `json:"step"`
	Final    bool    `json:"final,omitempty"`
	Match    bool    `json:"match"`
	Pixels   int     `json:"pixels"`
	Compared int     `json:"compared"`
	Fraction float64 `json:"fraction"`
	MaxDelta int     `json:"max_delta"`
	Box      *[4]int `json:"box,omitempty"` // [x0,y0,x1,y1) of the differing pixels
	// Note says why a screen was not compared pixel by pixel (identical
	// frame hash, no recorded screenshot).
	Note      string  `json:"note,omitempty"`
	Recorded  string  `json:"recorded_frame,omitempty"`
	Replayed  string  `json:"replayed_frame,omitempty"`
	CompareMS float64 `json:"compare_ms"`
}

// Divergence is the first replayed screen (or state) that differs from the
// recording.
type Divergence struct {
	Step  int    `json:"step"`
	Final bool   `json:"final,omitempty"`
	Kind  string `json:"kind"` // screen, size, app_state, ended, app_start
	// Message says what differs, in a sentence.
	Message string  `json:"message"`
	Diff    *Diff   `json:"diff_stats,omitempty"`
	Box     *[4]int `json:"box,omitempty"`
	// Files written next to the replay's trace (relative to it).
	DiffFile     string `json:"diff,omitempty"`
	CompareFile  string `json:"compare,omitempty"`
	ExpectedFile string `json:"expected,omitempty"`
	ActualFile   string `json:"actual,omitempty"`

	want, got *image.RGBA
	at        Regions
}

// Agent re-sends a recorded run's actions and compares every screen it
// observes with the recorded one. The comparison runs in the background
// while the action plays, so it never delays the recorded timing; a screen
// beyond the rules ends the run at the next decision: done, unsuccessful,
// reason diverged (the report names the step whose screen differed).
type Agent struct {
	src    *trace.Trace
	rules  Rules
	timing Timing

	byStep map[int]*trace.Step
	cache  map[string]*image.RGBA

	recAnchor float64   // the recording's first observation, ms
	anchor    time.Time // the replay's first observation
	lastRec   float64   // the previous action's recorded time, ms
	lastSent  time.Time // when the replay sent it

	pending chan *Divergence // the comparison in flight, if any

	// Peek, when set, looks at the screen between steps (Session.Peek).
	// A person's recorded screen is the one they saw when they acted, not
	// the one right after the previous action: the replay looks again at
	// the recorded moment to compare like with like.
	Peek func(context.Context) (*observe.Frame, environment.State, error)

	mu sync.Mutex // guards Comparisons

	// Comparisons lists every screen compared, in order.
	Comparisons []StepComparison
	// Divergence is the first difference, nil while everything matched.
	Divergence *Divergence
	// Replayed counts the recorded actions sent again.
	Replayed int
	// Finished is true once the agent ended the run itself after the last
	// recorded step.
	Finished bool
}

// NewAgent makes a replay agent for a recorded trace.
func NewAgent(src *trace.Trace, rules Rules, timing Timing) *Agent {
	a := &Agent{src: src, rules: rules, timing: timing, byStep: map[int]*trace.Step{}, cache: map[string]*image.RGBA{}}
	for i := range src.Steps {
		s := &src.Steps[i]
		a.byStep[s.Step] = s
	}
	if len(src.Steps) > 0 {
		first := src.Steps[0]
		a.recAnchor = first.TMS
		if first.Decision != nil {
			a.recAnchor -= first.Decision.LatencyMS
		}
	}
	return a
}

// Decide implements agent.Agent.
func (a *Agent) Decide(ctx context.Context, obs *observe.Observation) (agent.Decision, error) {
	if a.anchor.IsZero() {
		a.anchor = time.Now()
	}
	// The previous screen's comparison has had the whole action to finish.
	if d, err := a.settle(ctx); err != nil {
		return agent.Decision{}, err
	} else if d != nil {
		return d.decision(), nil
	}
	rec, ok := a.byStep[obs.Step]
	if !ok {
		// Past the recorded steps: the recording ended here (step limit,
		// deadline). Its final screen, when there is one, must match.
		if fin := a.src.Final; fin != nil && fin.Step == obs.Step && fin.Observation != nil {
			a.start(obs, fin.Observation, true)
			if d, err := a.settle(ctx); err != nil {
				return agent.Decision{}, err
			} else if d != nil {
				return d.decision(), nil
			}
		}
		a.Finished = true
		return doneDecision(true, fmt.Sprintf("replay: all %d recorded steps matched", a.Replayed), nil), nil
	}
	if rec.Actor == trace.ActorHuman && a.Peek != nil && a.timing == TimingRecorded {
		// A person looked when they acted: wait for that moment, then look.
		if err := a.wait(ctx, rec); err != nil {
			return agent.Decision{}, err
		}
		if rec.Observation != nil {
			a.start(a.lookAgain(ctx, obs), rec.Observation, false)
		}
	} else {
		if rec.Observation != nil {
			a.start(obs, rec.Observation, false)
		}
		if err := a.wait(ctx, rec); err != nil {
			return agent.Decision{}, err
		}
	}
	if rec.Action == nil || rec.Action.Kind == action.Done {
		// The recording's last decision: no action follows to hide the
		// comparison behind.
		if d, err := a.settle(ctx); err != nil {
			return agent.Decision{}, err
		} else if d != nil {
			return d.decision(), nil
		}
		a.Replayed++
		a.Finished = true
		return doneDecision(true, fmt.Sprintf("replay: all %d recorded steps matched", a.Replayed), nil), nil
	}
	a.Replayed++
	msg := "replayed"
	if rec.Decision != nil && rec.Decision.Message != "" {
		msg = "replayed: " + rec.Decision.Message
	}
	if p := rec.Policy; p != nil && !p.Allowed {
		// The recording's policy gate did not let it run: neither does
		// the replay (a wait in its place keeps the steps in line).
		return agent.Decision{Action: action.Action{Kind: action.Wait, MS: 1},
			Message: fmt.Sprintf("replay: not performed, as in the recording (policy rule %q)", p.Rule)}, nil
	}
	return agent.Decision{Action: *rec.Action, Message: msg}, nil
}

// lookAgain is obs with the screen and the desktop's state as they are
// now; obs itself when the screen cannot be looked at (the sandbox is
// busy or going: the comparison then says what it saw).
func (a *Agent) lookAgain(ctx context.Context, obs *observe.Observation) *observe.Observation {
	f, st, err := a.Peek(ctx)
	if err != nil || f == nil {
		return obs
	}
	now := *obs
	now.Screen, now.Cursor, now.Windows, now.Running = f, st.Cursor, st.Windows, st.Running
	return &now
}

// start begins comparing a replayed observation with a recorded one. The
// app's state is compared at once; the screen in the background.
func (a *Agent) start(obs *observe.Observation, rec *trace.Observation, final bool) {
	ch := make(chan *Divergence, 1)
	a.pending = ch
	if d := a.checkState(obs, rec, final); d != nil {
		ch <- d
		return
	}
	go func() { ch <- a.check(obs, rec, final) }()
}

// settle waits for the comparison in flight and returns the divergence it
// found, if any.
func (a *Agent) settle(ctx context.Context) (*Divergence, error) {
	if a.pending == nil {
		return nil, nil
	}
	select {
	case d := <-a.pending:
		a.pending = nil
		if d != nil && a.Divergence == nil {
			a.Divergence = d
		}
		return d, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close waits for a comparison still in flight (the run ended first) and
// keeps its verdict.
func (a *Agent) Close() error {
	_, err := a.settle(context.Background())
	return err
}

func doneDecision(ok bool, msg string, meta map[string]any) agent.Decision {
	d := agent.Decision{Action: action.Action{Kind: action.Done, Success: &ok, Message: msg}, Message: msg, Meta: meta}
	if !ok {
		d.Reason = agent.ReasonDiverged
	}
	return d
}

func (d *Divergence) decision() agent.Decision {
	meta := map[string]any{"replay": map[string]any{"step": d.Step, "match": false, "kind": d.Kind}}
	return doneDecision(false, d.Message, meta)
}

// wait holds the action until the recorded interval since the previous
// action has passed (the first action: since the first observation). Keeping
// intervals, not offsets from the start, keeps a held key held as long as in
// the recording even when an earlier step ran late.
func (a *Agent) wait(ctx context.Context, rec *trace.Step) error {
	defer func() { a.lastSent, a.lastRec = time.Now(), rec.TMS }()
	if a.timing != TimingRecorded {
		return nil
	}
	base, recBase := a.anchor, a.recAnchor
	if !a.lastSent.IsZero() {
		base, recBase = a.lastSent, a.lastRec
	}
	d := time.Until(base.Add(time.Duration((rec.TMS - recBase) * float64(time.Millisecond))))
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// checkState compares the app's state (running or not); a difference is a
// divergence.
func (a *Agent) checkState(obs *observe.Observation, rec *trace.Observation, final bool) *Divergence {
	if rec.Running == obs.Running {
		return nil
	}
	where := describeStep(obs.Step, final)
	c := StepComparison{Step: obs.Step, Final: final, Match: false, Note: "app state differs", Recorded: rec.FrameHash}
	a.record(c)
	msg := fmt.Sprintf("diverged at %s: the app was running in the recording but had exited in the replay", where)
	if obs.Running {
		msg = fmt.Sprintf("diverged at %s: the app had exited in the recording but is still running in the replay", where)
	}
	return &Divergence{Step: obs.Step, Final: final, Kind: "app_state", Message: msg}
}

func describeStep(step int, final bool) string {
	if final {
		return "the final screen (step " + strconv.Itoa(step) + ")"
	}
	return "step " + strconv.Itoa(step)
}

func (a *Agent) record(c StepComparison) {
	a.mu.Lock()
	a.Comparisons = append(a.Comparisons, c)
	a.mu.Unlock()
}

// check compares the observed screen with the recorded one by the rules.
func (a *Agent) check(obs *observe.Observation, rec *trace.Observation, final bool) *Divergence {
	t0 := time.Now()
	c := StepComparison{Step: obs.Step, Final: final, Match: true, Recorded: rec.FrameHash}
	defer func() {
		c.CompareMS = float64(time.Since(t0).Microseconds()) / 1000
		a.record(c)
	}()
	if obs.Screen == nil {
		c.Note = "no replayed screenshot"
		return nil
	}
	c.Replayed = trace.FrameHash(obs.Screen.Hash)
	if rec.Screenshot == "" {
		c.Note = "no recorded screenshot"
		return nil
	}
	if c.Replayed == rec.FrameHash && obs.Screen.Width == rec.Width && obs.Screen.Height == rec.Height {
		c.Note = "identical frame"
		return nil
	}
	want, err := a.load(rec.Screenshot)
	if err != nil {
		c.Note = "recorded screenshot unreadable: " + err.Error()
		return nil
	}
	got := obs.Screen.Image()
	if len(rec.Masked) > 0 {
		// What the recording painted over was never seen: the replay's
		// screen is painted the same before it is compared (a replay
		// without the recording's vault or policy masks nothing itself).
		areas := make([]mask.Area, len(rec.Masked))
		for i, m := range rec.Masked {
			areas[i] = mask.Area{Rect: m.Rect}
		}
		got = mask.Paint(obs.Screen, areas).Image()
	}
	at := regionsOf(rec.Cursor, obs.Cursor, rec.Windows, obs.Windows)
	d := Compare(want, got, a.rules, at)
	c.Pixels, c.Compared, c.Fraction, c.MaxDelta = d.Pixels, d.Compared, d.Fraction, d.MaxDelta
	if d.Pixels > 0 {
		c.Box = &[4]int{d.Bounds.Min.X, d.Bounds.Min.Y, d.Bounds.Max.X, d.Bounds.Max.Y}
	}
	if !d.Diverged(a.rules) {
		return nil
	}
	c.Match = false
	where := describeStep(obs.Step, final)
	div := &Divergence{
		Step: obs.Step, Final: final, Kind: "screen", Diff: &d, Box: c.Box,
		Message: fmt.Sprintf("diverged at %s: %s (allowed: %.2f%% at tolerance %d)", where, d, 100*a.rules.MaxDiff, a.rules.Tolerance),
		want:    want, got: got, at: at,
	}
	if d.SizeMismatch {
		div.Kind = "size"
		div.Message = fmt.Sprintf("diverged at %s: the screen is %dx%d, the recording's was %dx%d", where, got.Bounds().Dx(), got.Bounds().Dy(), want.Bounds().Dx(), want.Bounds().Dy())
	}
	return div
}

// regionsOf collects the pointer positions and app windows of a recorded
// and a replayed observation.
func regionsOf(rc, pc action.Point, rw, pw []observe.Window) Regions {
	at := Regions{Cursors: []image.Point{{rc.X, rc.Y}, {pc.X, pc.Y}}}
	for _, ws := range [][]observe.Window{rw, pw} {
		for _, w := range ws {
			at.Windows = append(at.Windows, image.Rect(w.X, w.Y, w.X+w.Width, w.Y+w.Height))
		}
	}
	return at
}

func (a *Agent) load(rel string) (*image.RGBA, error) {
	if img, ok := a.cache[rel]; ok {
		return img, nil
	}
	img, err := LoadTracePNG(a.src.Dir, rel)
	if err != nil {
		return nil, err
	}
	if len(a.cache) > 64 { // bounded: frames are revisited rarely
		clear(a.cache)
	}
	a.cache[rel] = img
	return img, nil
}
