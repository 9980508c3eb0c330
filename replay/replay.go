// Package replay turns a recorded run into a regression test: it starts a
// fresh environment with the same app, image, screen and settings, re-sends
// the recorded actions with the recorded timing, compares every screen with
// the recorded one (per pixel, with a tolerance, leaving out the pointer and
// chosen regions), and reports the first divergence with a diff image. The
// replay is itself a run, driven by a replay agent, and writes its own trace.
package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/vault"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

// File and folder a replay adds to its trace.
const (
	SummaryFile = "replay.json"
	FilesDir    = "replay"
)

// Verdicts.
const (
	Matched     = "matched"     // exit 0
	Diverged    = "diverged"    // exit 1
	Failed      = "error"       // exit 3: the replay could not run
	Interrupted = "interrupted" // exit 130
)

// Config is one replay.
type Config struct {
	Source *trace.Trace
	// Indexer, when set, indexes the replay's trace as it is written.
	Indexer trace.Indexer
	// App is the app to replay against: the recorded one, or another build.
	App     *app.Bundle
	Backend environment.Backend
	// Env is the sandbox; EnvFromRun fills it from the recording.
	Env    environment.Config
	Settle session.Settle
	// Clock is the app's clock: the recording's (session.ClockFromRun),
	// moved by the recorded amounts.
	Clock session.Clock
	// Vault types the recording's type_secret steps (it recorded their
	// names only).
	Vault    *vault.Vault
	Rules    Rules
	Timing   Timing
	RunID    string
	TraceDir string
	// Timeout bounds the replay's loop (default: the recording's, at least
	// its duration plus a minute).
	Timeout      time.Duration
	StartTimeout time.Duration
	ReadyTimeout time.Duration
	LogCap       int64
	Progress     io.Writer
	Verbose      bool
}

// EnvFromRun is the environment the recording ran in: image, OCI runtime,
// screen, limits, window manager, accessibility bus.
func EnvFromRun(run trace.Run) environment.Config {
	env := environment.Config{
		Image:   run.Env.Image,
		Runtime: run.Env.Runtime,
		Screen:  run.Env.Screen,
		NoWM:    !run.Env.WM,
	}
	if run.Settings != nil && run.Settings.NoWM {
		env.NoWM = true
	}
	// The X server as the recording's was: without GLX if it was.
	env.NoGLX = run.Settings != nil && run.Settings.NoGLX
	// A recording with the accessibility bus may hold actions on targets:
	// the replay resolves them again in its own live tree.
	env.A11y = run.Settings != nil && run.Settings.A11y
	num := func(k string) float64 {
		switch v := run.Env.Limits[k].(type) {
		case float64:
			return v
		case int:
			return float64(v)
		}
		return 0
	}
	env.Resources = environment.Resources{
		CPUs: num("cpus"), MemoryMB: int(num("memory_mb")), PIDs: int(num("pids")),
		TmpfsMB: int(num("tmpfs_mb")), ShmMB: int(num("shm_mb")),
	}
	return env
}

// FirstSettle is how a replay waits before its first screenshot: until
// the screen has been still for 100 ms (at most 3 s). A recording's first
// screen shows the app drawn; a replay that looked the moment the window
// was mapped could catch it still blank. The replay's clock starts at this
// screenshot, as the recording's did at its first.
var FirstSettle = session.Settle{Mode: session.SettleStable, Duration: 100 * time.Millisecond, Timeout: 3 * time.Second}

// SettleFromRun is the recording's settle mode (none for traces that
// predate its recording).
func SettleFromRun(run trace.Run) (session.Settle, error) {
	if run.Settings == nil || run.Settings.Settle == "" {
		return session.Settle{Mode: session.SettleNone}, nil
	}
	return session.ParseSettle(run.Settings.Settle)
}

// Result is how a replay ended.
type Result struct {
	Verdict    string
	Message    string
	Divergence *Divergence
	// Steps is the number of recorded steps; Replayed, how many matched and
	// were re-sent.
	Steps    int
	Replayed int
	Run      session.Result
	// Notes compare the two environments' fingerprints: a different app
	// build, image or agentbox.
	Notes    []string
	Duration time.Duration
	TraceDir string
}

// ExitCode maps the verdict to the process exit code.
func (r Result) ExitCode() int {
	switch r.Verdict {
	case Matched:
		return 0
	case Diverged:
		return 1
	case Interrupted:
		return 130
	}
	return 3
}

// summary is replay.json.
type summary struct {
	Verdict string `json:"verdict"`
	Message string `json:"message"`
	Source  struct {
		Dir     string `json:"dir"`
		ID      string `json:"id"`
		Steps   int    `json:"steps"`
		Outcome string `json:"outcome,omitempty"`
	} `json:"source"`
	Rules struct {
		Rules
		Ignore [][4]int `json:"ignore,omitempty"`
	} `json:"rules"`
	Timing      Timing           `json:"timing"`
	Replayed    int              `json:"replayed"`
	Divergence  *Divergence      `json:"divergence,omitempty"`
	Comparisons []StepComparison `json:"comparisons"`
	Notes       []string         `json:"notes,omitempty"`
	DurationMS  float64          `json:"duration_ms"`
}

// Run replays cfg.Source. The error is non-nil only when no trace could be
// written at all.
func Run(ctx context.Context, cfg Config) (Result, error) {
	t0 := time.Now()
	src := episodeOnly(cfg.Source)
	ag := NewAgent(src, cfg.Rules, cfg.Timing)
	timeout := cfg.Timeout
	if timeout <= 0 {
		if src.Run.Settings != nil && src.Run.Settings.TimeoutMS > 0 {
			timeout = time.Duration(src.Run.Settings.TimeoutMS * float64(time.Millisecond))
		}
		timeout = max(timeout, time.Duration(src.Run.DurationMS*float64(time.Millisecond))+time.Minute)
	}
	readyTimeout := cfg.ReadyTimeout
	if readyTimeout <= 0 && src.Run.Settings != nil {
		readyTimeout = time.Duration(src.Run.Settings.ReadyTimeoutMS * float64(time.Millisecond))
	}
	logCap := cfg.LogCap
	if logCap <= 0 && src.Run.Settings != nil {
		logCap = src.Run.Settings.LogCap
	}
	opts := map[string]string{
		"source":    src.Run.ID,
		"dir":       src.Dir,
		"tolerance": fmt.Sprint(cfg.Rules.Tolerance),
		"max_diff":  fmt.Sprint(cfg.Rules.MaxDiff),
		"timing":    string(cfg.Timing),
	}
	res, err := session.Run(ctx, session.Config{
		RunID:        cfg.RunID,
		Backend:      cfg.Backend,
		Env:          cfg.Env,
		App:          cfg.App,
		AgentInfo:    trace.AgentInfo{Name: "replay", Options: opts},
		Task:         src.Run.Task,
		MaxSteps:     len(src.Steps) + 1,
		Timeout:      timeout,
		StartTimeout: cfg.StartTimeout,
		ReadyTimeout: readyTimeout,
		Settle:       cfg.Settle,
		FirstSettle:  FirstSettle,
		Clock:        cfg.Clock,
		TraceDir:     cfg.TraceDir,
		LogCap:       logCap,
		Indexer:      cfg.Indexer,
		Progress:     cfg.Progress,
		Verbose:      cfg.Verbose,
		Vault:        cfg.Vault,
	}, session.Loop{Agent: ag, Opened: func(s *session.Session) { ag.Peek = s.Peek }})
	_ = ag.Close() // a comparison still in flight when the run ended
	if err != nil {
		return Result{}, err
	}
	r := Result{Run: res, Steps: len(src.Steps), Replayed: ag.Replayed, TraceDir: cfg.TraceDir}
	replayed, rerr := trace.Open(cfg.TraceDir)
	if rerr == nil {
		r.Notes = fingerprintNotes(src.Run, replayed.Run)
	}
	r.Verdict, r.Message, r.Divergence = verdict(src, replayed, ag, res, cfg.Rules)
	if r.Divergence != nil && r.Divergence.want != nil {
		if err := writeDivergence(cfg.TraceDir, src, r.Divergence, cfg.Rules); err != nil {
			r.Notes = append(r.Notes, "could not write the diff images: "+err.Error())
		}
	}
	r.Duration = time.Since(t0)
	if err := writeSummary(cfg, r, ag); err != nil {
		r.Notes = append(r.Notes, "could not write "+SummaryFile+": "+err.Error())
	}
	return r, nil
}

// episodeOnly is src without the steps of the actor collect (a task's
// before_collect, run after the episode ended): they are not the
// episode's, and a replay plays the episode.
func episodeOnly(src *trace.Trace) *trace.Trace {
	if src == nil {
		return nil
	}
	var steps []trace.Step
	for _, st := range src.Steps {
		if st.Actor != trace.ActorCollect {
			steps = append(steps, st)
		}
	}
	if len(steps) == len(src.Steps) {
		return src
	}
	out := *src
	out.Steps = steps
	return &out
}

// verdict decides how the replay compares with the recording.
func verdict(src, replayed *trace.Trace, ag *Agent, res session.Result, rules Rules) (string, string, *Divergence) {
	n := len(src.Steps)
	if d := ag.Divergence; d != nil {
		return Diverged, d.Message, d
	}
	switch {
	case res.Outcome == trace.Interrupted:
		return Interrupted, "the replay was interrupted: " + res.Message, nil
	case res.Outcome == trace.Error && (res.Reason == trace.ReasonAppStart || res.Reason == trace.ReasonNoWindow):
		d := &Divergence{Step: 1, Kind: "app_start", Message: "diverged before the first step: " + res.Message}
		return Diverged, d.Message, d
	case res.Outcome == trace.Error:
		return Failed, "the replay could not run: " + res.Message, nil
	}
	if ag.Replayed < n && !ag.Finished {
		step := ag.Replayed + 1
		d := &Divergence{Step: step, Kind: "ended", Message: fmt.Sprintf(
			"diverged at step %d: the replay ended (%s: %s) but the recording has %d steps", step, res.Reason, res.Message, n)}
		return Diverged, d.Message, d
	}
	// The last screen, after the agent's done, was never shown to the agent:
	// compare it here.
	finals := ""
	if src.Final != nil && src.Final.Observation != nil && replayed != nil && replayed.Final != nil && replayed.Final.Observation != nil && ag.Finished {
		d, err := compareFinal(src, replayed, rules)
		if err != nil {
			finals = " (final screen not compared: " + err.Error() + ")"
		} else if d != nil {
			ag.Comparisons = append(ag.Comparisons, StepComparison{Step: d.Step, Final: true, Match: false,
				Pixels: d.Diff.Pixels, Compared: d.Diff.Compared, Fraction: d.Diff.Fraction, MaxDelta: d.Diff.MaxDelta, Box: d.Box})
			return Diverged, d.Message, d
		} else {
			finals = " and the final screen"
		}
	}
	return Matched, fmt.Sprintf("all %d recorded steps%s match the recording", n, finals), nil
}

func compareFinal(src, replayed *trace.Trace, rules Rules) (*Divergence, error) {
	ro, po := src.Final.Observation, replayed.Final.Observation
	if ro.Screenshot == "" || po.Screenshot == "" {
		return nil, fmt.Errorf("no screenshot")
	}
	if ro.FrameHash == po.FrameHash && ro.Width == po.Width && ro.Height == po.Height {
		return nil, nil
	}
	want, err := LoadTracePNG(src.Dir, ro.Screenshot)
	if err != nil {
		return nil, err
	}
	got, err := LoadTracePNG(replayed.Dir, po.Screenshot)
	if err != nil {
		return nil, err
	}
	at := regionsOf(ro.Cursor, po.Cursor, ro.Windows, po.Windows)
	d := Compare(want, got, rules, at)
	if !d.Diverged(rules) {
		return nil, nil
	}
	div := &Divergence{Step: replayed.Final.Step, Final: true, Kind: "screen", Diff: &d, want: want, got: got, at: at,
		Message: fmt.Sprintf("diverged at the final screen (after step %d): %s (allowed: %.2f%% at tolerance %d)", replayed.Final.Step-1, d, 100*rules.MaxDiff, rules.Tolerance)}
	if d.Pixels > 0 {
		div.Box = &[4]int{d.Bounds.Min.X, d.Bounds.Min.Y, d.Bounds.Max.X, d.Bounds.Max.Y}
	}
	return div, nil
}

// writeDivergence saves the recorded and replayed screens, the diff and
// the three side by side under DIR/replay/.
func writeDivergence(dir string, src *trace.Trace, d *Divergence, rules Rules) error {
	if err := os.MkdirAll(filepath.Join(dir, FilesDir), 0o755); err != nil {
		return err
	}
	name := func(kind string) string {
		return filepath.ToSlash(filepath.Join(FilesDir, fmt.Sprintf("%s-%06d.png", kind, d.Step)))
	}
	diff := DiffImage(d.want, d.got, rules, d.at)
	if d.Diff != nil && d.Diff.SizeMismatch {
		diff = d.got
	}
	what := fmt.Sprintf("step %d", d.Step)
	if d.Final {
		what = "final screen"
	}
	px := ""
	if d.Diff != nil {
		px = fmt.Sprintf(": %d px differ", d.Diff.Pixels)
	}
	cmp := CompareImage(d.want, d.got, diff, [3]string{
		"recorded (" + src.Run.ID + ", " + what + ")", "replayed", "difference" + px,
	})
	for _, f := range []struct {
		name *string
		kind string
		img  image.Image
	}{{&d.DiffFile, "diff", diff}, {&d.CompareFile, "compare", cmp}, {&d.ExpectedFile, "expected", d.want}, {&d.ActualFile, "actual", d.got}} {
		rel := name(f.kind)
		if err := SavePNG(filepath.Join(dir, filepath.FromSlash(rel)), f.img); err != nil {
			return err
		}
		*f.name = rel
	}
	return nil
}

func writeSummary(cfg Config, r Result, ag *Agent) error {
	var s summary
	s.Verdict, s.Message = r.Verdict, r.Message
	s.Source.Dir, s.Source.ID, s.Source.Steps, s.Source.Outcome = cfg.Source.Dir, cfg.Source.Run.ID, len(cfg.Source.Steps), string(cfg.Source.Run.Outcome)
	s.Rules.Rules = cfg.Rules
	for _, g := range cfg.Rules.Ignore {
		s.Rules.Ignore = append(s.Rules.Ignore, [4]int{g.Min.X, g.Min.Y, g.Max.X, g.Max.Y})
	}
	s.Timing = cfg.Timing
	s.Replayed = ag.Replayed
	s.Divergence = r.Divergence
	s.Comparisons = ag.Comparisons
	if s.Comparisons == nil {
		s.Comparisons = []StepComparison{}
	}
	s.Notes = r.Notes
	s.DurationMS = float64(r.Duration.Microseconds()) / 1000
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if _, err := os.Stat(cfg.TraceDir); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(cfg.TraceDir, SummaryFile), append(data, '\n'), 0o644)
}

// fingerprintNotes says how the replay's environment differs from the
// recording's.
func fingerprintNotes(src, rep trace.Run) []string {
	var notes []string
	short := func(s string) string {
		s = strings.TrimPrefix(s, "sha256:")
		if len(s) > 12 {
			return s[:12]
		}
		return s
	}
	switch {
	case src.App.Digest == "" || rep.App.Digest == "":
	case src.App.Digest == rep.App.Digest:
		notes = append(notes, "app: the same build as recorded ("+short(src.App.Digest)+")")
	default:
		notes = append(notes, fmt.Sprintf("app: a different build (digest %s, recorded %s)", short(rep.App.Digest), short(src.App.Digest)))
	}
	if strings.Join(src.App.Args, " ") != strings.Join(rep.App.Args, " ") {
		notes = append(notes, fmt.Sprintf("app arguments: %q (recorded %q)", rep.App.Args, src.App.Args))
	}
	if src.Env.ImageID != "" && rep.Env.ImageID != "" && src.Env.ImageID != rep.Env.ImageID {
		notes = append(notes, fmt.Sprintf("image: %s (recorded %s)", short(rep.Env.ImageID), short(src.Env.ImageID)))
	}
	if src.Agentbox != rep.Agentbox {
		notes = append(notes, fmt.Sprintf("agentbox version %s (recorded with %s)", rep.Agentbox, src.Agentbox))
	}
	for _, k := range src.App.EnvKeys {
		found := false
		for _, k2 := range rep.App.EnvKeys {
			found = found || k == k2
		}
		if !found {
			notes = append(notes, fmt.Sprintf("environment variable %s was set in the recording (its value is not recorded): pass --env %s=…", k, k))
		}
	}
	return notes
}
