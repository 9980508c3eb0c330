package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/agent/script"
	"github.com/codegirl-games/agentbox/grade"
	"github.com/codegirl-games/agentbox/internal/plural"
	"github.com/codegirl-games/agentbox/internal/suggest"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/live"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

type runFlags struct {
	sandboxFlags
	index     indexFlags
	task      string
	agentName string
	agentOpts []string
	script    string
	grade     string
	clockFlags
	json  bool
	live  liveFlag
	vault vaultFlag
	name  string // --name: a named sandbox
}

func newRunCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run TARGET [flags] [-- APP ARGS...]",
		Short: "Run an app in a fresh sandbox and let an agent drive it",
		Long: `Run starts TARGET in a fresh, hardened sandbox with its own virtual display,
lets the agent drive it step by step, records a trace, and removes the sandbox.

TARGET is a Linux executable, a directory holding agentbox.json, or a manifest
file. Arguments after -- replace the manifest's args (with --agent exec they are
the agent program and its arguments instead).

Exit codes: 0 success, 1 failure (the agent gave up, a check failed, the app
exited), 2 usage or configuration error, 3 infrastructure error, 130 interrupted.`,
		Example: `  agentbox run examples/mover --task "Move the character right." --agent demo
  agentbox run examples/mover --script examples/mover/play.yaml
  agentbox run examples/mover --agent exec -- python3 examples/agents/mover_agent.py
  agentbox run ./my-game --agent demo --agent-opt key=Left --out /tmp/trace
  agentbox run app.json --agent demo --screen 1280x720 --timeout 2m -- --level 3
  agentbox run examples/mover --agent demo --live      # watch in a browser, take control
  agentbox run xterm --agent human --live --timeout 30m # record a person's demonstration`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			appArgs, argsGiven, err := splitArgs("run", "TARGET", cmd, args)
			if err != nil {
				return err
			}
			return runRun(cmd, f, args[0], appArgs, argsGiven)
		},
	}
	fl := cmd.Flags()
	f.register(fl, "run")
	fl.StringVar(&f.task, "task", "", "what the agent should do (given to the agent, recorded in the trace)")
	fl.StringVar(&f.agentName, "agent", "", "the agent: "+strings.Join(agent.Names(), ", ")+", or human (none: a person drives at the live page)")
	fl.StringVar(&f.script, "script", "", "play a script (YAML or JSON: actions and checks) instead of --agent")
	fl.StringArrayVar(&f.agentOpts, "agent-opt", nil, "agent option KEY=VALUE (repeatable)")
	fl.StringVar(&f.grade, "grade", "", "grade the collected files with the checks of FILE (YAML: a list of checks, or grade: [...]; docs/tasks.md), run on the host after the episode, never shown to the agent")
	f.registerClock(fl, "the app")
	fl.StringVar(&f.name, "name", "", "a named sandbox: keep the app user's home across the runs of `NAME`, one at a time (agentbox sandboxes ls, rm)")
	fl.BoolVar(&f.json, "json", false, "print the result as one JSON object on stdout (messages stay on stderr)")
	f.live.register(fl, "the run")
	f.index.register(fl)
	f.vault.register(fl)
	return cmd
}

// runRun validates everything before anything starts, then runs.
func runRun(cmd *cobra.Command, f runFlags, target string, appArgs []string, argsGiven bool) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	switch {
	case f.agentName == "" && f.script == "":
		return usageErrorf("choose an agent with --agent (%s) or a script with --script FILE", strings.Join(runAgents(), ", "))
	case f.agentName != "" && f.script != "":
		return usageErrorf("--agent and --script are exclusive: a script is its own agent")
	case f.agentName != "" && !slices.Contains(runAgents(), f.agentName):
		return checkAgent(f.agentName, runAgents())
	case f.script != "" && len(f.agentOpts) > 0:
		return usageErrorf("--agent-opt applies to --agent, not to --script")
	case f.agentName == humanAgent && f.live.addr == "":
		return usageErrorf("--agent human needs --live: a person drives the app from the live page")
	case f.agentName == humanAgent && len(f.agentOpts) > 0:
		return usageErrorf("--agent human takes no --agent-opt")
	}
	opts, err := parseKV("--agent-opt", f.agentOpts)
	if err != nil {
		return err
	}
	var spec *grade.Spec
	if f.grade != "" {
		if spec, err = grade.Load(f.grade); err != nil {
			return usageErrorf("--grade: %v", err)
		}
	}
	so, err := f.validate()
	if err != nil {
		return err
	}
	if err := so.gate.liveCheck(f.live); err != nil {
		return err
	}
	vt, err := f.vault.load()
	if err != nil {
		return err
	}
	envCfg, env := so.env, so.appEnv
	// A grade that checks the observer's activity needs the observer.
	envCfg.Observe = envCfg.Observe || spec != nil && spec.NeedsObserver()
	backendName := f.backend
	if f.name != "" {
		if backendName, err = namedBackend(f.name, f.backend); err != nil {
			return err
		}
		envCfg.Name = f.name
	}
	logCap, settle := so.logCap, so.settle
	clock, err := f.parseClock(cmd.Flags())
	if err != nil {
		return err
	}
	var sc *script.Script
	if f.script != "" {
		if sc, err = script.Load(f.script, envCfg.Screen); err != nil {
			return usageErrorf("%v", err)
		}
		switch {
		case sc.Screen == (observe.Screen{}):
		case !cmd.Flags().Changed("screen"):
			envCfg.Screen = sc.Screen
		case envCfg.Screen != sc.Screen:
			// The script's coordinates were written for its screen.
			return usageErrorf("--screen %v contradicts the screen of %s (%v); drop --screen, or change the script's screen", envCfg.Screen, f.script, sc.Screen)
		}
		if f.task == "" {
			f.task = sc.Task
		}
		if err := checkScriptSecrets(sc, vt); err != nil {
			return err
		}
		// A script that names elements needs the accessibility bus.
		switch {
		case sc.Grade != nil && spec != nil:
			return usageErrorf("--grade and the grade of %s are exclusive; drop one", f.script)
		case sc.Grade != nil:
			spec = sc.Grade
		}
		envCfg.Observe = envCfg.Observe || spec != nil && spec.NeedsObserver()
		envCfg.A11y = envCfg.A11y || sc.NeedsA11y()
		envCfg.Observe = envCfg.Observe || sc.NeedsObserver()
		if !cmd.Flags().Changed("max-steps") {
			f.maxSteps = script.MaxSteps // waits poll; --timeout bounds the run
		}
	}
	if err := checkOut(f.out); err != nil {
		return err
	}
	// The agent and its options are checked before the backend is looked
	// for: a mistake in them is exit 2 on any machine, with or without a
	// sandbox to run in.
	agentArgs := argsGiven && f.agentName == "exec"
	if agentArgs {
		// --agent exec -- PROGRAM ARGS…: the arguments are the agent's.
		if _, set := opts["command"]; set {
			return usageErrorf("give the exec agent's program either after -- or as --agent-opt command=…, not both")
		}
		cmdJSON, _ := json.Marshal(appArgs)
		opts["command"] = string(cmdJSON)
	}
	var ag agent.Agent
	agentInfo := trace.AgentInfo{Name: f.agentName, Options: opts}
	actor := trace.ActorAgent
	switch {
	case sc != nil:
		ag = script.New(sc)
		agentInfo = trace.AgentInfo{Name: "script", Options: map[string]string{"file": f.script}}
		actor = trace.ActorScript
	case f.agentName == humanAgent:
		agentInfo = trace.AgentInfo{Name: humanAgent} // no agent: the session's person drives
	default:
		ag, err = agent.New(f.agentName, agent.Options(opts))
		if err != nil {
			return usageErrorf("%v", err)
		}
	}
	if c, ok := ag.(agent.Closer); ok {
		defer c.Close()
	}
	bundle, backend, note, err := loadTarget(cmd.Context(), target, &envCfg, env, &so.gate, chooseBackend(cmd, backendName), f.image, f.ociRuntime, f.allowUnbounded)
	if err != nil {
		return err
	}
	defer bundle.Close()
	so.gate.note(stderr, envCfg.A11y || bundle.Manifest.A11y)
	if argsGiven && !agentArgs {
		bundle.Manifest.Args = appArgs
	}
	taskFiles := bundle.Manifest.Task
	if sc != nil {
		taskFiles = taskFiles.Merge(sc.Files)
	}
	inputs, err := loadInputs(taskFiles, bundle, envCfg.Resources)
	if err != nil {
		return err
	}
	defer inputs.Close()
	if err := checkClock(clock, backend, bundle); err != nil {
		return err
	}
	if p, ok := ag.(agent.ProgressSetter); ok {
		p.SetProgress(stderr)
	}
	if err := preflight(context.Background(), f.agentName, ag); err != nil {
		return err
	}

	liveSrv, err := f.live.start(stderr, "agentbox run "+termsafe.Line(target), false)
	if err != nil {
		return err
	}
	defer stopLive(liveSrv)
	fmt.Fprint(stderr, note) // a sandbox is about to start
	ctx, run, done := setUpRun(stderr, backend, bundle, f.out)
	defer done()
	ix := openLiveIndex(stderr, f.index)
	defer ix.close()
	fmt.Fprintf(stderr, "agentbox: run %s: %s with %s on %s\n", run.ID, termsafe.Line(target), termsafe.Line(describeAgent(agentInfo)), backend.Name())
	cfg := session.Config{
		RunID:        run.ID,
		Backend:      backend,
		Env:          envCfg,
		App:          bundle,
		AgentInfo:    agentInfo,
		Actor:        actor,
		Task:         f.task,
		Inputs:       inputs,
		Vault:        vt,
		Collect:      taskFiles.Collect,
		MaxSteps:     f.maxSteps,
		Timeout:      f.timeout,
		StartTimeout: f.startTimeout,
		ReadyTimeout: f.readyTimeout,
		Settle:       settle,
		MaxRate:      f.maxRate,
		Clock:        clock,
		Tree:         f.a11yTree,
		Marks:        f.marks,
		Policy:       so.gate.policy,
		Approver:     so.gate.approver,
		TraceDir:     run.Dir,
		LogCap:       logCap,
		Indexer:      ix.indexer(),
		Progress:     stderr,
		Verbose:      f.verbose,
	}
	if spec != nil {
		cfg.Grader = spec
	}
	opened, finish := watch(liveSrv, live.Info{Name: target, Task: f.task, Agent: describeAgent(agentInfo), RunID: run.ID, Trace: run.Dir, Screen: envCfg.Screen}, &cfg)
	res, err := session.Run(ctx, cfg, session.Loop{Agent: ag, FreezeWhileThinking: f.freeze, Opened: opened})
	finish(res)
	stopLive(liveSrv)
	if err != nil {
		return failErr(err)
	}
	if f.json {
		if err := writeJSON(stdout, runResultJSON(run.ID, backend.Name(), res)); err != nil {
			return failErr(err)
		}
	} else {
		report(stdout, res)
	}
	return silentExitOrNil(res.ExitCode())
}

// runAgents are the names --agent takes: the registered agents and human.
// checkAgent is --agent NAME checked against the agents a verb takes: one
// error, with its "did you mean", for run and eval alike.
func checkAgent(name string, known []string) error {
	if name == "" || slices.Contains(known, name) {
		return nil
	}
	return usageErrorf("unknown agent %q%s (known: %s)", name, suggest.Hint(name, known), strings.Join(known, ", "))
}

func runAgents() []string {
	return slices.Sorted(slices.Values(append(agent.Names(), humanAgent)))
}

// runJSON is what run --json prints: one object (README: Machine-readable
// output).
type runJSON struct {
	ID         string        `json:"id"`
	Outcome    trace.Outcome `json:"outcome"`
	Reason     string        `json:"reason,omitempty"`
	Message    string        `json:"message,omitempty"`
	ExitCode   int           `json:"exit_code"`
	Steps      int           `json:"steps"`
	DurationMS float64       `json:"duration_ms"`
	Trace      string        `json:"trace"` // absolute
	Backend    string        `json:"backend"`
	Grade      *trace.Grade  `json:"grade,omitempty"` // with --grade or a script's grade
}

func runResultJSON(id, backend string, r session.Result) runJSON {
	return runJSON{ID: id, Outcome: r.Outcome, Reason: r.Reason, Message: r.Message, ExitCode: r.ExitCode(),
		Steps: r.Steps, DurationMS: float64(r.Duration.Microseconds()) / 1000, Trace: absOr(r.TraceDir), Backend: backend, Grade: r.Grade}
}

// preflight lets an agent that depends on a service (a model API) check,
// before any sandbox exists, that it answers and takes the credentials:
// nothing answering is an infrastructure error (exit 3), a refusal a
// configuration error (exit 2).
func preflight(ctx context.Context, name string, ag agent.Agent) error {
	p, ok := ag.(agent.Preflighter)
	if !ok {
		return nil
	}
	err := p.Preflight(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, agent.ErrUnreachable):
		return failErr(fmt.Errorf("agent %s: %w; nothing was started", name, err))
	}
	return usageErrorf("agent %s: %v; nothing was started", name, err)
}

func describeAgent(a trace.AgentInfo) string {
	switch a.Name {
	case "script":
		return "script " + a.Options["file"]
	case humanAgent:
		return "no agent (a person at the live page)"
	}
	return "agent " + a.Name
}

func silentExitOrNil(code int) error {
	if code == 0 {
		return nil
	}
	return silentExit(code)
}

// report prints the outcome and where the trace is.
func report(w io.Writer, r session.Result) {
	// The message holds text from outside agentbox: the agent's done
	// message, the app's last output, the guest's last words.
	fmt.Fprintf(w, "%s: %s", r.Outcome, termsafe.Text(r.Message))
	if r.Reason != "" && r.Reason != trace.ReasonDone {
		fmt.Fprintf(w, " [%s]", termsafe.Line(r.Reason))
	}
	fmt.Fprintf(w, "\n%s in %v · trace: %s\n", plural.S(r.Steps, "step"), r.Duration.Round(10*time.Millisecond), termsafe.Line(r.TraceDir))
	if g := r.Grade; g != nil {
		// Details quote the collected files: text agentbox did not write.
		fmt.Fprintf(w, "grade: %s, score %.3g: %s\n", g.Outcome, g.Score, termsafe.Text(g.Message))
	}
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func parseKV(flag string, list []string) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErrorf("%s %q: want KEY=VALUE", flag, kv)
		}
		m[k] = v
	}
	return m, nil
}
