package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/eval"
	"github.com/codegirl-games/agentbox/internal/plural"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/live"
	"github.com/codegirl-games/agentbox/pool"
	"github.com/codegirl-games/agentbox/session"
)

// evalsDir is where evals write when --out is not given.
const evalsDir = "agentbox-evals"

func newEvalCmd() *cobra.Command {
	var (
		f                  sandboxFlags
		parallel, episodes int
		poolSize, poolMax  int
		poolLaunch         bool
		modelConcurrency   int
		asJSON             bool
		resume             string
		lv                 liveFlag
		agentName          string
		vlt                vaultFlag
		agentOpts          []string
		cf                 clockFlags
		resetMode          string
		ixf                indexFlags
	)
	cmd := &cobra.Command{
		Use:   "eval SUITE",
		Short: "Run every task of a suite several times, several sandboxes at once, and summarise",
		Long: `eval runs each task of SUITE (YAML) its number of episodes, --parallel
sandboxes at once, each in its own sandbox, and writes summary.json,
junit.xml and one trace directory per episode into --out (default
./agentbox-evals/EVAL-ID). It shows live progress, prints a table per task
(passes, mean steps, mean duration, what did not pass by kind), and exits 0
when every episode passed, 1 when any task failed (or an agent broke), 3
when only infrastructure failed, 130 when interrupted. Ctrl-C stops
scheduling, removes every running sandbox and still writes the summary.

Infrastructure errors (image, daemon, guest, an app that would not start)
are counted apart from task failures. Everything is checked before the
first episode: the suite, the flags, and the sandbox's limits against what
the backend can give on this machine (exit 2).

--screen is the screen of the tasks that name none (neither the task nor
its script); --env is added to every task's app (over the task's env).
--pool N keeps N sandboxes per task warm (display and window manager up,
no app), so that an episode only starts its app; each serves one episode,
and the pool is removed when the eval ends; --pool-launch also starts the
task's app in them (an episode then begins with its app running, held
until then; not for tasks on a virtual clock). --reset relaunch starts a
task's episodes after its first in the sandbox of an earlier one, reset in
place (the app and all it started killed, the home and /tmp restored, the
display's state reset; the window manager kept), where the backend can;
an episode keeps its sandbox only while the task has more episodes to
start than sandboxes kept, so the last ones are removed as their episodes
end, and the pool once every episode has made its claim.
agentbox view EVALDIR writes one page for the whole eval.

--agent NAME (with --agent-opt K=V) runs every task with that agent,
replacing the suite's agents and scripts (a script still gives its task's
text and screen); a suite whose tasks name no agent, such as one made by
agentbox import osworld, needs it.`,
		Example: `  agentbox eval examples/suite.yaml --parallel 4 --out /tmp/eval
  agentbox view /tmp/eval          # one page: every task and episode, linked to its run's report
  agentbox eval osworld.yaml --agent exec --agent-opt command=./my-agent`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("name") {
				// Taken (hidden) only to say why, rather than "unknown flag".
				return usageErrorf("eval takes no --name: a named sandbox's home carries what one run leaves to the next, and an eval's episodes must start alike for their pass rates to mean anything (run --name sets a sandbox up; a task's inputs stage files into every episode)")
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			switch {
			case parallel <= 0 || parallel > 256:
				return usageErrorf("--parallel must be between 1 and 256, got %d", parallel)
			case episodes < 0:
				return usageErrorf("--episodes must not be negative, got %d", episodes)
			case poolSize < 0 || poolSize > pool.MaxSize:
				return usageErrorf("--pool must be between 0 and %d, got %d", pool.MaxSize, poolSize)
			case poolLaunch && poolSize == 0:
				return usageErrorf("--pool-launch needs --pool")
			case poolMax != 0 && poolSize == 0:
				return usageErrorf("--pool-max needs --pool")
			case poolMax != 0 && (poolMax < poolSize || poolMax > pool.MaxSize):
				return usageErrorf("--pool-max must be between --pool (%d) and %d, got %d", poolSize, pool.MaxSize, poolMax)
			case modelConcurrency < 0 || modelConcurrency > maxModelConcurrency:
				return usageErrorf("--model-concurrency must be between 0 (no limit) and %d, got %d", maxModelConcurrency, modelConcurrency)
			}
			if resetMode != "fresh" && resetMode != "relaunch" {
				return usageErrorf("--reset must be fresh or relaunch, got %q", resetMode)
			}
			if agentName == "" && len(agentOpts) > 0 {
				return usageErrorf("--agent-opt needs --agent")
			}
			if err := checkAgent(agentName, agent.Names()); err != nil {
				return err
			}
			agentOptions, err := parseKV("--agent-opt", agentOpts)
			if err != nil {
				return err
			}
			so, err := f.validate()
			if err != nil {
				return err
			}
			envCfg, env := so.env, so.appEnv
			// A suite's tasks and their apps' manifests may name their
			// own policies: --approve answers theirs too.
			if err := so.gate.complete(nil, true); err != nil {
				return err
			}
			if err := so.gate.liveCheck(lv); err != nil {
				return err
			}
			so.gate.note(stderr, envCfg.A11y)
			clock, err := cf.parseClock(cmd.Flags())
			if err != nil {
				return err
			}
			if resume != "" && f.out != "" {
				return usageErrorf("--resume DIR continues the eval in DIR: drop --out")
			}
			if err := checkOut(f.out); err != nil {
				return err
			}
			vt, err := vlt.load()
			if err != nil {
				return err
			}
			suite, err := eval.LoadWith(args[0], eval.LoadOptions{Screen: envCfg.Screen, Agent: agentName, AgentOptions: agentOptions})
			if err != nil {
				return usageErrorf("%v", err)
			}
			if vt != nil {
				err = suite.CheckSecrets(vt.Has)
			} else {
				err = suite.CheckSecrets(nil)
			}
			if err != nil {
				return usageErrorf("%v", err)
			}
			backend, note, err := resolveBackend(cmd.Context(), chooseBackend(cmd, f.backend), f.image, f.ociRuntime)
			if err != nil {
				return err
			}
			// Limits beyond what the backend can give here would fail every
			// episode as "infrastructure": they are the user's to fix.
			if err := checkHostLimits(cmd.Context(), backend, envCfg.Resources, flagNames, f.allowUnbounded); err != nil {
				return err
			}
			if err := suite.Preflight(context.Background()); err != nil {
				if errors.Is(err, agent.ErrUnreachable) {
					return failErr(fmt.Errorf("%w; nothing was started", err))
				}
				return usageErrorf("%v; nothing was started", err)
			}
			runID, out, err := evalOut(suite.Name, f.out)
			if resume != "" {
				runID, out, err = resumedEval(resume)
			}
			if err != nil {
				return err
			}
			if err := checkNetwork(backend, envCfg.Network); err != nil {
				return err
			}
			if err := checkClock(clock, backend, nil); err != nil {
				return err
			}
			if resetMode == "relaunch" && !environment.CapabilitiesOf(backend).Relaunch {
				return usageErrorf("--reset relaunch: the %s backend cannot reset a sandbox in place (it lacks the capability relaunch); use --reset fresh", backend.Name())
			}

			liveSrv, err := lv.start(stderr, "agentbox eval "+termsafe.Line(suite.Name), true)
			if err != nil {
				return err
			}
			defer stopLive(liveSrv)
			fmt.Fprint(stderr, note) // sandboxes are about to start
			ctx, stop := watchRun(stderr, backend, environment.ReapOptions{Mine: true})
			defer stop()
			ix := openLiveIndex(stderr, ixf)
			defer ix.close()
			sum, err := eval.Run(ctx, suite, eval.Options{
				Backend: backend, Parallel: parallel, Episodes: episodes, Out: out, RunID: runID, Resume: resume != "",
				Env: envCfg, AppEnv: env, Settle: so.settle, LogCap: so.logCap, Clock: clock,
				Timeout: f.timeout, StartTimeout: f.startTimeout, ReadyTimeout: f.readyTimeout,
				MaxSteps: f.maxSteps, FreezeWhileThinking: f.freeze, MaxRate: f.maxRate,
				Tree: f.a11yTree, Marks: f.marks, Vault: vt,
				Policy: so.gate.policy, Approver: so.gate.approver,
				Progress: stderr, Terminal: isTerminal(stderr), Verbose: f.verbose,
				Pool: poolSize, PoolMax: poolMax, PoolLaunch: poolLaunch, PoolStats: func(st pool.Stats) {
					fmt.Fprintf(stderr, "agentbox: warm pool: %s from the pool, %s cold, %s replaced, %s failed\n",
						plural.S(int(st.Warm), "episode"), plural.S(int(st.Cold), "start"), plural.Count(int(st.Replaced), "sandbox", "sandboxes"), plural.S(int(st.Failed), "create"))
				},
				Watch:            liveEpisodes(liveSrv),
				Relaunch:         resetMode == "relaunch",
				ModelConcurrency: modelConcurrency,
				Indexer:          ix.indexer(),
			})
			stopLive(liveSrv)
			if err == nil && sum != nil {
				ix.eval(out) // summary.json is written
			}
			if err != nil && sum == nil {
				if errors.Is(err, session.ErrNoClock) {
					return usageErrorf("--clock virtual: %s; nothing was started", err)
				}
				return failErr(err)
			}
			code := sum.ExitCode()
			if err != nil { // the summary could not be written
				fmt.Fprintf(stderr, "agentbox: %s\n", termsafe.Text(err.Error()))
				code = ExitError
			}
			if asJSON {
				abs := absOr(out)
				if err := writeJSON(stdout, evalJSON{Summary: sum, Out: abs,
					SummaryFile: filepath.Join(abs, eval.SummaryFile), JUnitFile: filepath.Join(abs, eval.JUnitFile), ExitCode: code}); err != nil {
					return silentExit(ExitError)
				}
			} else {
				sum.PrintTable(stdout)
				fmt.Fprintf(stdout, "summary: %s · junit: %s\n", termsafe.Line(filepath.Join(out, eval.SummaryFile)), termsafe.Line(filepath.Join(out, eval.JUnitFile)))
			}
			return silentExitOrNil(code)
		},
	}
	fl := cmd.Flags()
	f.register(fl, "eval")
	fl.IntVarP(&parallel, "parallel", "j", eval.DefaultParallel, "sandboxes at once")
	fl.IntVar(&episodes, "episodes", 0, "episodes per task (overrides the suite's)")
	fl.IntVar(&poolSize, "pool", 0, "keep this many sandboxes warm (display and window manager up) per task's sandbox, so an episode only launches its app (0: none)")
	fl.IntVar(&modelConcurrency, "model-concurrency", 0, "at most this many model requests in flight over all episodes (model agents), the rest queued; a 429's Retry-After holds them all; each step records its queue wait apart (0: no limit)")
	fl.BoolVar(&poolLaunch, "pool-launch", false, "also launch the task's app ahead in its pooled sandboxes: an episode from the pool starts with its app running (held, stopped, until then)")
	fl.IntVar(&poolMax, "pool-max", 0, fmt.Sprintf("the most sandboxes the warm pool holds over all tasks (default %d × --pool)", pool.DefaultMaxPerSize))
	cf.registerClock(fl, "each episode's app")
	fl.StringVar(&resetMode, "reset", "fresh", "how a task's next episode starts: fresh (a new sandbox) or relaunch (an earlier episode's sandbox, reset in place)")
	vlt.register(fl)
	fl.StringVar(&agentName, "agent", "", "run every task with this agent, replacing the suite's agents and scripts")
	fl.StringArrayVar(&agentOpts, "agent-opt", nil, "option KEY=VALUE of --agent (repeatable)")
	fl.StringVar(&resume, "resume", "", "continue the eval in DIR (its agentbox died, or it was interrupted): run only its episodes that did not finish (crashed, never started, or ended by the infrastructure; such a trace is moved aside to NNN.crashed-N), and write the summary over them all; give the same SUITE and flags")
	fl.BoolVar(&asJSON, "json", false, "print the summary as one JSON object on stdout (progress stays on stderr)")
	fl.String("name", "", "not taken: refused with why (see run --name)")
	_ = fl.MarkHidden("name")
	lv.register(fl, "every episode (a grid, each opening to its own view)")
	ixf.register(fl)
	return cmd
}

// liveEpisodes gives each episode a view on the live page (nil without one).
func liveEpisodes(srv *live.Server) func(string, int, *session.Config, *session.Loop) func(session.Result) {
	if srv == nil {
		return nil
	}
	return func(task string, n int, cfg *session.Config, loop *session.Loop) func(session.Result) {
		var finish func(session.Result)
		loop.Opened, finish = watch(srv, live.Info{Name: fmt.Sprintf("%s · episode %d", task, n), Task: cfg.Task, Agent: describeAgent(cfg.AgentInfo),
			RunID: cfg.RunID, Trace: cfg.TraceDir, Screen: cfg.Env.Screen}, cfg)
		return finish
	}
}

// evalJSON is what eval --json prints: summary.json's object, with where
// the eval wrote and its exit code (README: Machine-readable output).
type evalJSON struct {
	*eval.Summary
	Out         string `json:"out"` // absolute, as the two files
	SummaryFile string `json:"summary_file"`
	JUnitFile   string `json:"junit_file"`
	ExitCode    int    `json:"exit_code"`
}

// evalOut names an eval and chooses its output directory: --out as given
// (checked new or empty), else a new directory under ./agentbox-evals
// named by the time, the suite and a random suffix, created here so that
// two evals started in the same second never share one.
func evalOut(suiteName, flagOut string) (runID, out string, err error) {
	newID := func() string {
		var rnd [3]byte
		_, _ = rand.Read(rnd[:])
		return time.Now().Format("20060102-150405") + "-" + sanitizeName(suiteName) + "-" + hex.EncodeToString(rnd[:])
	}
	if flagOut != "" {
		return newID(), flagOut, nil
	}
	if err := os.MkdirAll(evalsDir, 0o755); err != nil {
		return "", "", failErr(fmt.Errorf("eval: %w", err))
	}
	for range 100 {
		runID = newID()
		out = filepath.Join(evalsDir, runID)
		switch err := os.Mkdir(out, 0o755); {
		case err == nil:
			return runID, out, nil
		case !errors.Is(err, os.ErrExist):
			return "", "", failErr(fmt.Errorf("eval: %w", err))
		}
	}
	return "", "", failErr(fmt.Errorf("eval: no new directory under %s after 100 tries", evalsDir))
}

func sanitizeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, s)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// maxModelConcurrency bounds --model-concurrency.
const maxModelConcurrency = 1024

// resumedEval is the run ID and directory of the eval --resume DIR
// continues: its summary's run ID when it wrote one, else DIR's name.
func resumedEval(dir string) (runID, out string, err error) {
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return "", "", usageErrorf("--resume %s: not an eval directory: %v", dir, err)
	}
	runID = filepath.Base(filepath.Clean(dir))
	if sum, err := eval.ReadSummary(dir); err == nil && sum.RunID != "" {
		runID = sum.RunID
	}
	return runID, dir, nil
}
