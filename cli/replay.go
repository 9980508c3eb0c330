package cli

import (
	"errors"
	"fmt"
	"image"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/plural"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/replay"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

type replayFlags struct {
	sandboxFlags
	index      indexFlags
	target     string
	area       string
	tolerance  int
	maxDiff    string
	cursorArea int
	ignore     []string
	timing     string
	vault      vaultFlag
}

func newReplayCmd() *cobra.Command {
	var f replayFlags
	cmd := &cobra.Command{
		Use:   "replay RUN [flags] [-- APP ARGS...]",
		Short: "Replay a recorded run in a fresh sandbox and report where the screen first differs",
		Long: `Replay starts a fresh sandbox with the recorded app, image, screen and
settings, re-sends the recorded actions with the recorded timing, and compares
every screen with the recorded one before acting. The replay is a run of its
own and writes a new trace (with replay.json, and on a divergence the
recorded, replayed, diff and side-by-side images under replay/).

Only the app's windows are compared (--area windows: not the window manager's
decorations, whose focus colour may change a moment after the window maps,
nor the desktop); --area screen compares every pixel. A pixel differs when a
channel differs by more than --tolerance; pixels in an --ignore region or in a
--cursor-area square at the pointer are not compared; a screen diverges when
more than --max-diff of its compared pixels differ.

--target replays against another build of the app (a directory with
agentbox.json, a manifest or an executable, as for run); the recorded
arguments are used with the recorded target, the new target's own otherwise,
and arguments after -- replace either.

Exit codes: 0 every screen matched, 1 a divergence, 2 usage error (not a
trace, a newer trace format, bad flags), 3 the replay could not run,
130 interrupted.`,
		Example: `  agentbox replay agentbox-runs/20261129-202055-mover-ae0987
  agentbox replay RUN --target ./build/mover-next
  agentbox replay RUN --tolerance 16 --max-diff 1% --ignore 0,0,640,20`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			appArgs, argsGiven, err := splitArgs("replay", "RUN", cmd, args)
			if err != nil {
				return err
			}
			return runReplay(cmd, f, args[0], appArgs, argsGiven)
		},
	}
	fl := cmd.Flags()
	f.register(fl, "replay")
	f.index.register(fl)
	f.vault.register(fl)
	fl.StringVar(&f.target, "target", "", "replay against this app instead of the recorded one (another build)")
	fl.StringVar(&f.area, "area", replay.AreaWindows, "what is compared: windows (the app's windows, not the window manager's decorations or the desktop) or screen (every pixel)")
	fl.IntVar(&f.tolerance, "tolerance", replay.DefaultTolerance, "per-channel colour difference (0–255) below which a pixel still matches")
	fl.StringVar(&f.maxDiff, "max-diff", pct(replay.DefaultMaxDiff), "share of compared pixels that may differ before a screen diverges (e.g. 0.5%, 0.005, or 0 for exact)")
	fl.IntVar(&f.cursorArea, "cursor-area", replay.DefaultCursorArea, "side in pixels of the square at the pointer that is not compared (0 compares it)")
	fl.StringArrayVar(&f.ignore, "ignore", nil, "region X0,Y0,X1,Y1 that is not compared (repeatable; X1,Y1 exclusive)")
	fl.StringVar(&f.timing, "timing", string(replay.TimingRecorded), "when to send each action: recorded (same offsets as the recording) or fast")
	return cmd
}

// parseFraction reads "0.5%", "0.005" or "0".
func parseFraction(flag, s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(t, "%"), 64)
	if pct {
		v /= 100
	}
	if err != nil || v < 0 || v > 1 {
		return 0, usageErrorf("%s %q: want a share of the pixels such as 0.5%% or 0.005", flag, s)
	}
	return v, nil
}

// parseRegion reads "X0,Y0,X1,Y1".
func parseRegion(s string) (image.Rectangle, error) {
	parts := strings.Split(s, ",")
	var n [4]int
	if len(parts) != 4 {
		return image.Rectangle{}, usageErrorf("--ignore %q: want X0,Y0,X1,Y1", s)
	}
	for i, p := range parts {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v < 0 {
			return image.Rectangle{}, usageErrorf("--ignore %q: %q is not a pixel position", s, p)
		}
		n[i] = v
	}
	if n[2] <= n[0] || n[3] <= n[1] {
		return image.Rectangle{}, usageErrorf("--ignore %q: X1,Y1 must be right of and below X0,Y0", s)
	}
	return image.Rect(n[0], n[1], n[2], n[3]), nil
}

// recording is what replay and resume take from a recorded run: its
// settle and clock, the backend (the flag's, else the recorded one) and
// the sandbox — the recording's, held to the rules of the flags that set
// it (a trace is input, and may have been crafted), with --image and
// --guest-binary applied.
type recording struct {
	settle  session.Settle
	clock   session.Clock
	backend environment.Backend
	env     environment.Config
}

func (f *sandboxFlags) recording(cmd *cobra.Command, dir string, src *trace.Trace) (recording, error) {
	var r recording
	var err error
	if r.settle, err = replay.SettleFromRun(src.Run); err != nil {
		return r, usageErrorf("%s: recorded settle: %v", dir, err)
	}
	if r.clock, err = session.ClockFromRun(src); err != nil {
		return r, usageErrorf("%s: %v", dir, err)
	}
	name := f.backend
	if name == "" {
		name = src.Run.Env.Backend
	}
	if r.backend, err = environment.Lookup(name, backendOptions(cmd)); err != nil {
		return r, usageErrorf("backend: %v", err)
	}
	if r.env, err = recordedEnv(src.Run); err != nil {
		return r, err
	}
	if f.image != "" {
		r.env.Image = f.image
	}
	r.env.GuestBinary = f.guestBinary
	return r, nil
}

func runReplay(cmd *cobra.Command, f replayFlags, dir string, appArgs []string, argsGiven bool) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	rules := replay.Rules{Area: f.area, Tolerance: f.tolerance, CursorArea: f.cursorArea}
	var err error
	if rules.MaxDiff, err = parseFraction("--max-diff", f.maxDiff); err != nil {
		return err
	}
	for _, s := range f.ignore {
		g, err := parseRegion(s)
		if err != nil {
			return err
		}
		rules.Ignore = append(rules.Ignore, g)
	}
	if err := rules.Validate(); err != nil {
		return usageErrorf("%v", err)
	}
	timing, err := replay.ParseTiming(f.timing)
	if err != nil {
		return usageErrorf("--timing: %v", err)
	}
	// The sandbox itself is the recording's (recordedEnv, below).
	so, err := f.validate()
	if err != nil {
		return err
	}
	vt, err := f.vault.load()
	if err != nil {
		return err
	}
	env := so.appEnv
	if err := checkOut(f.out); err != nil {
		return err
	}
	src, err := openTrace(dir)
	if err != nil {
		return err
	}
	for _, st := range src.Steps {
		if a := st.Action; a != nil && a.Kind == action.TypeSecret && !vt.Has(a.Secret) {
			return usageErrorf("%s: step %d types secret %s: give a vault that holds it (--vault FILE)", dir, st.Step, a.Secret)
		}
	}
	if len(src.Steps) == 0 {
		return usageErrorf("%s has no steps to replay (the run ended before its first observation: %s)", dir, src.Run.Message)
	}
	if src.Incomplete {
		fmt.Fprintf(stderr, "agentbox: %s is an incomplete trace; replaying its %d recorded steps\n", termsafe.Line(dir), len(src.Steps))
	}
	rec, err := f.recording(cmd, dir, src)
	if err != nil {
		return err
	}
	settle, clock, backend, envCfg := rec.settle, rec.clock, rec.backend, rec.env
	var logCap int64
	if src.Run.Settings != nil {
		logCap = src.Run.Settings.LogCap
	}
	fmt.Fprintf(stderr, "agentbox: replay sandbox: %s (limits from %s)\n", termsafe.Line(describeSandbox(envCfg, logCap)), termsafe.Line(filepath.Join(dir, trace.RunFile)))

	target := f.target
	if target == "" {
		target = src.Run.App.TargetPath // absolute: found from any directory
		if target == "" {
			target = src.Run.App.Target // a program of the image, or an older trace
		}
		if src.Run.App.InImage && target == "" {
			target = src.Run.App.Command
		}
		if _, err := os.Stat(target); err != nil && !src.Run.App.InImage {
			if errors.Is(err, fs.ErrNotExist) && !filepath.IsAbs(target) {
				return usageErrorf("the recorded app %s is not found from here: run replay in the directory the run started in, or give the app with --target", target)
			}
			return usageErrorf("the recorded app %s: %v (give the app with --target)", target, err)
		}
	}
	bundle, err := loadApp(target, envCfg.Resources, env)
	if err != nil {
		return err
	}
	defer bundle.Close()
	// The backend is asked last: what the trace and the command line say
	// is checked on any machine, with or without a sandbox to run in.
	if err := checkHostLimits(cmd.Context(), backend, envCfg.Resources, runJSONNames, f.allowUnbounded); err != nil {
		return err
	}
	if err := checkClock(clock, backend, bundle); err != nil {
		return err
	}
	switch {
	case argsGiven:
		bundle.Manifest.Args = appArgs
	case f.target == "":
		bundle.Manifest.Args = src.Run.App.Args // they may have come from run's --
	}

	ctx, run, done := setUpRun(stderr, backend, bundle, f.out)
	defer done()
	out := run.Dir
	ix := openLiveIndex(stderr, f.index)
	defer ix.close()
	fmt.Fprintf(stderr, "agentbox: replay %s: %d steps of %s against %s on %s (area %s, tolerance %d, max diff %s, timing %s)\n",
		run.ID, len(src.Steps), termsafe.Line(src.Run.ID), termsafe.Line(target), backend.Name(), rules.Area, rules.Tolerance, pct(rules.MaxDiff), timing)
	res, err := replay.Run(ctx, replay.Config{
		Source:       src,
		App:          bundle,
		Backend:      backend,
		Env:          envCfg,
		Settle:       settle,
		Clock:        clock,
		Rules:        rules,
		Timing:       timing,
		RunID:        run.ID,
		TraceDir:     out,
		Indexer:      ix.indexer(),
		Timeout:      f.timeout,
		StartTimeout: f.startTimeout,
		Progress:     stderr,
		Verbose:      f.verbose,
		Vault:        vt,
	})
	if err != nil {
		return failErr(err)
	}
	for _, n := range res.Notes {
		fmt.Fprintf(stderr, "agentbox: %s\n", termsafe.Line(n))
	}
	fmt.Fprintf(stdout, "%s: %s\n", res.Verdict, termsafe.Text(res.Message))
	if d := res.Divergence; d != nil && d.DiffFile != "" {
		fmt.Fprintf(stdout, "diff: %s · side by side: %s\n", termsafe.Line(filepath.Join(out, d.DiffFile)), termsafe.Line(filepath.Join(out, d.CompareFile)))
	}
	if res.Verdict == replay.Failed && res.Run.Reason != "" {
		fmt.Fprintf(stdout, "[%s]\n", termsafe.Line(res.Run.Reason))
	}
	fmt.Fprintf(stdout, "%d of %s replayed in %v · trace: %s (agentbox view %s)\n",
		res.Replayed, plural.S(res.Steps, "step"), res.Duration.Round(10*time.Millisecond), termsafe.Line(out), termsafe.Line(out))
	return silentExitOrNil(res.ExitCode())
}

func pct(f float64) string {
	return strconv.FormatFloat(100*f, 'f', -1, 64) + "%"
}
