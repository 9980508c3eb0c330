package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	agentexec "github.com/codegirl-games/agentbox/agent/exec"
	"github.com/codegirl-games/agentbox/agent/script"
	"github.com/codegirl-games/agentbox/internal/plural"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/replay"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

type resumeFlags struct {
	sandboxFlags
	index  indexFlags
	force  bool
	timing string
	vault  vaultFlag
}

func newResumeCmd() *cobra.Command {
	var f resumeFlags
	cmd := &cobra.Command{
		Use:   "resume TRACE [flags]",
		Short: "Continue a run whose agentbox process died, from its last completed step",
		Long: `Resume continues a run whose agentbox process died (killed, out of memory,
the machine lost power): TRACE says "running" but nobody writes it
(agentbox ls shows it as "crashed (resumable)").

A fresh sandbox starts with the recorded app, inputs, image, screen and
settings; the recorded actions are replayed (with their timing, or --timing
fast) up to the last step whose result was recorded; the screen is compared
with the recording at every replayed step and at the seam, as a replay does,
and a divergence stops the resume with the replay's diff (exit 1) unless
--force. Then the run's own agent goes on: a script from the step after the
last completed one, an exec agent's program started with
` + agentexec.ResumedEnv + `=STEP (and resumed_after_step in its start message),
demo and idle as they are, a model agent (openai, openai-chat, anthropic)
with its recorded conversation: at every replayed step it decides again,
its requests answered from the step's recorded exchanges (exchange.json)
instead of the model, so that its first request after the seam carries
the earlier turns (a rehearsed decision that is not the recorded action
stops the resume, exit 1). The model's key comes from the environment,
as for run. Runs of a person are not resumed (exit 2).

The resumed run writes a new trace, whose run.json records resumed_from
(the crashed trace and its step); the crashed trace is finalised as crashed
and names the new one (resumed_by). A trace is resumed once; --force resumes
it again.

Exit codes: as run's; 1 also when the replayed screen diverged, 2 when TRACE
is not a crashed trace (running, finished, being resumed) or its agent
cannot be resumed.`,
		Example: `  agentbox resume agentbox-runs/20261129-202055-mover-ae0987
  agentbox resume RUN --timing fast
  agentbox resume RUN --force        # go on past a screen that differs`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runResume(cmd, f, args[0])
		},
	}
	fl := cmd.Flags()
	f.register(fl, "resume")
	f.index.register(fl)
	f.vault.register(fl)
	fl.BoolVar(&f.force, "force", false, "go on when the replayed screen differs from the recording, and resume a trace that was resumed already")
	fl.StringVar(&f.timing, "timing", string(replay.TimingRecorded), "when to send each replayed action: recorded (same intervals as the recording) or fast")
	return cmd
}

// resumableAgents are the agents a resume continues: their state is the
// script's position, nothing agentbox keeps, or (the model agents,
// agent.Rehearser) the conversation the trace's exchanges record.
var resumableAgents = map[string]bool{"script": true, "exec": true, "demo": true, "idle": true,
	"openai": true, "openai-chat": true, "anthropic": true}

func runResume(cmd *cobra.Command, f resumeFlags, dir string) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	timing, err := replay.ParseTiming(f.timing)
	if err != nil {
		return usageErrorf("--timing: %v", err)
	}
	so, err := f.validate()
	if err != nil {
		return err
	}
	vt, err := f.vault.load()
	if err != nil {
		return err
	}
	if err := checkOut(f.out); err != nil {
		return err
	}
	src, err := openTrace(dir)
	if err != nil {
		return err
	}
	switch lv, err := trace.CheckLiveness(dir); {
	case err != nil:
		return usageErrorf("%v", err)
	case lv == trace.Live:
		return usageErrorf("%s is still being written by a live agentbox: it did not crash", dir)
	case lv == trace.Resuming:
		return usageErrorf("%s is being resumed by another agentbox", dir)
	case lv == trace.Finished:
		return usageErrorf("%s finished (%s); there is nothing to resume (agentbox replay replays it)", dir, src.Run.Outcome)
	}
	name := src.Run.Agent.Name
	if !resumableAgents[name] {
		return usageErrorf("%s was run by %s, which resume does not continue: only runs of script, exec, demo, idle and the model agents (openai, openai-chat, anthropic) are resumed; start it again with agentbox run", dir, termsafe.Line(describeAgent(src.Run.Agent)))
	}
	if n := src.Run.Network; n != nil && (len(n.Allow) > 0 || len(n.Forward) > 0) {
		return usageErrorf("%s ran with a network (--allow-net/--forward); resume does not restore it yet: start it again with agentbox run", dir)
	}
	for _, st := range src.Steps {
		if a := st.Action; a != nil && a.Kind == action.TypeSecret && !vt.Has(a.Secret) {
			return usageErrorf("%s: step %d types secret %s: give a vault that holds it (--vault FILE)", dir, st.Step, a.Secret)
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return failErr(err)
	}
	upto := trace.LastCompleted(src)

	rec, err := f.recording(cmd, dir, src)
	if err != nil {
		return err
	}
	settle, clock, backend, envCfg := rec.settle, rec.clock, rec.backend, rec.env
	target := src.Run.App.TargetPath
	if target == "" {
		target = src.Run.App.Target
	}
	if src.Run.App.InImage && target == "" {
		target = src.Run.App.Command
	}
	if _, err := os.Stat(target); err != nil && !src.Run.App.InImage {
		return usageErrorf("the recorded app %s: %v (resume runs the recorded app)", target, err)
	}
	bundle, err := loadApp(target, envCfg.Resources, so.appEnv)
	if err != nil {
		return err
	}
	defer bundle.Close()
	bundle.Manifest.Args = src.Run.App.Args

	// The agent, as recorded.
	var next agent.Agent
	var sc *script.Script
	var sa *script.Agent
	actor := trace.ActorAgent
	taskFiles := bundle.Manifest.Task
	switch name {
	case "script":
		file := src.Run.Agent.Options["file"]
		if sc, err = script.Load(file, envCfg.Screen); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return usageErrorf("the recorded script %s is not found from here: resume in the directory the run started in", file)
			}
			return usageErrorf("%v", err)
		}
		if err := checkScriptSecrets(sc, vt); err != nil {
			return err
		}
		envCfg.A11y = envCfg.A11y || sc.NeedsA11y()
		envCfg.Observe = envCfg.Observe || sc.NeedsObserver()
		taskFiles = taskFiles.Merge(sc.Files)
		sa = script.New(sc)
		next, actor = sa, trace.ActorScript
	default:
		if next, err = agent.New(name, agent.Options(src.Run.Agent.Options)); err != nil {
			return usageErrorf("%s: recorded agent: %v", dir, err)
		}
		if e, ok := next.(*agentexec.Agent); ok {
			e.Resume(upto)
		}
		if err := preflight(cmd.Context(), name, next); err != nil {
			return err
		}
	}
	if c, ok := next.(agent.Closer); ok {
		defer c.Close()
	}
	inputs, err := loadInputs(taskFiles, bundle, envCfg.Resources)
	if err != nil {
		return err
	}
	defer inputs.Close()
	if err := checkHostLimits(cmd.Context(), backend, envCfg.Resources, runJSONNames, f.allowUnbounded); err != nil {
		return err
	}
	if err := checkClock(clock, backend, bundle); err != nil {
		return err
	}
	if p, ok := next.(agent.ProgressSetter); ok {
		p.SetProgress(stderr)
	}

	claim, err := trace.ClaimCrashed(dir, f.force)
	if err != nil {
		return usageErrorf("%v", err)
	}
	ctx, run, done := setUpRun(stderr, backend, bundle, f.out)
	defer done()
	resumedBy := ""
	defer func() {
		if err := claim.Release(resumedBy); err != nil {
			fmt.Fprintf(stderr, "agentbox: finalising %s as crashed: %v\n", termsafe.Line(dir), err)
			return
		}
		if !f.index.off {
			reindex(context.WithoutCancel(ctx), stderr, f.index, dir) // its row said running
		}
	}()

	ra := replay.NewResumeAgent(src, upto, replay.Rules{Area: replay.AreaWindows, Tolerance: replay.DefaultTolerance,
		MaxDiff: replay.DefaultMaxDiff, CursorArea: replay.DefaultCursorArea}, timing, next)
	ra.Force = f.force
	if sa != nil {
		named := map[string]*observe.Frame{}
		ra.Replayed = func(rec *trace.Step, obs *observe.Observation) {
			if rec.Decision == nil {
				return
			}
			if names, ok := rec.Decision.Meta[script.MetaRemembered].([]any); ok {
				for _, n := range names {
					if s, ok := n.(string); ok {
						named[s] = obs.Screen
					}
				}
			}
		}
		ra.Seam = func() error {
			return sa.Resume(scriptNext(src, upto), named)
		}
	}
	settings := src.Run.Settings
	if settings == nil {
		settings = &trace.Settings{}
	}
	timeout := f.timeout
	if timeout <= 0 {
		timeout = time.Duration(settings.TimeoutMS * float64(time.Millisecond))
		if timeout <= 0 {
			timeout = session.DefaultTimeout
		}
		if upto > 0 {
			timeout += time.Duration(src.Steps[min(upto, len(src.Steps))-1].TMS * float64(time.Millisecond))
		}
	}
	maxSteps := settings.MaxSteps
	if maxSteps <= 0 {
		maxSteps = session.DefaultMaxSteps
	}
	var maxRate float64 = session.DefaultMaxRate
	if settings.MaxRate != nil {
		maxRate = *settings.MaxRate
	}
	ix := openLiveIndex(stderr, f.index)
	defer ix.close()
	fmt.Fprintf(stderr, "agentbox: resume %s: %s after step %d of %d (%s) on %s, timing %s\n", run.ID, termsafe.Line(src.Run.ID),
		upto, len(src.Steps), termsafe.Line(describeAgent(src.Run.Agent)), backend.Name(), timing)
	t0 := time.Now()
	cfg := session.Config{
		RunID:        run.ID,
		Backend:      backend,
		Env:          envCfg,
		App:          bundle,
		AgentInfo:    src.Run.Agent,
		Actor:        actor,
		Task:         src.Run.Task,
		Inputs:       inputs,
		Vault:        vt,
		Collect:      taskFiles.Collect,
		MaxSteps:     maxSteps,
		Timeout:      timeout,
		StartTimeout: f.startTimeout,
		ReadyTimeout: time.Duration(settings.ReadyTimeoutMS * float64(time.Millisecond)),
		Settle:       settle,
		MaxRate:      maxRate,
		Clock:        clock,
		Tree:         settings.Tree,
		Marks:        settings.Marks,
		TraceDir:     run.Dir,
		LogCap:       settings.LogCap,
		Indexer:      ix.indexer(),
		Progress:     stderr,
		Verbose:      f.verbose,
		ResumedFrom:  &trace.ResumedFrom{Trace: abs, ID: src.Run.ID, Step: upto},
	}
	if sc != nil && sc.Grade != nil {
		cfg.Grader = sc.Grade
	}
	res, err := session.Run(ctx, cfg, session.Loop{Agent: ra, FreezeWhileThinking: settings.FreezeWhileThinking,
		Opened: func(s *session.Session) { ra.SetPeek(s.Peek) }})
	if err != nil {
		return failErr(err)
	}
	if a, err := filepath.Abs(run.Dir); err == nil {
		resumedBy = a
	}
	for _, m := range ra.Forced {
		fmt.Fprintf(stderr, "agentbox: --force: went on past: %s\n", termsafe.Line(m))
	}
	report(stdout, res)
	if ra.Divergence != nil {
		if err := ra.WriteDivergence(run.Dir, replay.Rules{Area: replay.AreaWindows, Tolerance: replay.DefaultTolerance,
			MaxDiff: replay.DefaultMaxDiff, CursorArea: replay.DefaultCursorArea}); err != nil {
			fmt.Fprintf(stderr, "agentbox: could not write the diff images: %v\n", err)
		} else if d := ra.Divergence; d.DiffFile != "" {
			fmt.Fprintf(stdout, "diff: %s · side by side: %s (--force goes on past it)\n", termsafe.Line(filepath.Join(run.Dir, d.DiffFile)), termsafe.Line(filepath.Join(run.Dir, d.CompareFile)))
		}
	}
	rehearsed := ""
	if ra.Rehearsed > 0 {
		rehearsed = fmt.Sprintf(" (the agent's conversation rebuilt from %s)", plural.S(ra.Rehearsed, "recorded step"))
	}
	fmt.Fprintf(stdout, "resumed %s after step %d: %s replayed%s, %s in all, in %v\n", termsafe.Line(src.Run.ID), upto,
		plural.S(ra.Replay().Replayed, "step"), rehearsed, plural.S(res.Steps, "step"), time.Since(t0).Round(10*time.Millisecond))
	return silentExitOrNil(res.ExitCode())
}

// scriptNext is where the script goes on after step upto: the script_next
// its decision recorded (0: from the start).
func scriptNext(src *trace.Trace, upto int) int {
	for i := len(src.Steps) - 1; i >= 0; i-- {
		st := src.Steps[i]
		if st.Step > upto || st.Decision == nil {
			continue
		}
		if v, ok := st.Decision.Meta[script.MetaNext].(float64); ok {
			return int(v)
		}
	}
	return 0
}
