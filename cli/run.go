package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/agent/script"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

type runFlags struct {
	task         string
	agentName    string
	agentOpts    []string
	backend      string
	image        string
	ociRuntime   string
	screen       string
	cpus         float64
	memory       string
	pids         int
	tmpfs        string
	maxSteps     int
	timeout      time.Duration
	startTimeout time.Duration
	readyTimeout time.Duration
	out          string
	logCap       string
	env          []string
	noWM         bool
	verbose      bool
	guestBinary  string
	settle       string
	script       string
	freeze       bool
	maxRate      float64
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
  agentbox run app.json --agent demo --screen 1280x720 --timeout 2m -- --level 3`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target := args[0]
			var appArgs []string
			if n := cmd.ArgsLenAtDash(); n >= 0 {
				if n != 1 {
					return usageErrorf("run takes exactly one TARGET before --, got %d", n)
				}
				appArgs = args[n:]
			} else if len(args) > 1 {
				return usageErrorf("run takes one TARGET; put the app's arguments after --: %q", args[1:])
			}
			return runRun(cmd, f, target, appArgs, cmd.ArgsLenAtDash() >= 0)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.task, "task", "", "what the agent should do (given to the agent, recorded in the trace)")
	fl.StringVar(&f.agentName, "agent", "", "the agent: "+strings.Join(agent.Names(), ", "))
	fl.StringVar(&f.script, "script", "", "play a script (YAML or JSON: actions and checks) instead of --agent")
	fl.StringArrayVar(&f.agentOpts, "agent-opt", nil, "agent option KEY=VALUE (repeatable)")
	fl.StringVar(&f.backend, "backend", environment.Auto, backendUsage())
	fl.StringVar(&f.image, "image", "", "runtime image (default agentbox/runtime:bookworm; any image with Xvfb works)")
	fl.StringVar(&f.ociRuntime, "runtime", "", "OCI runtime registered with Docker, e.g. runsc (gVisor)")
	fl.StringVar(&f.screen, "screen", "640x480x24", "virtual screen WIDTHxHEIGHT[xDEPTH]")
	fl.Float64Var(&f.cpus, "cpus", 1, "CPU limit")
	fl.StringVar(&f.memory, "memory", "1g", "memory limit (e.g. 512m, 2g)")
	fl.IntVar(&f.pids, "pids", 256, "process limit")
	fl.StringVar(&f.tmpfs, "tmpfs", "256m", "size of the writable /tmp (app files, home)")
	fl.IntVar(&f.maxSteps, "max-steps", 100, "stop after this many agent steps (outcome failure)")
	fl.DurationVar(&f.timeout, "timeout", 5*time.Minute, "deadline for the agent loop (outcome failure)")
	fl.DurationVar(&f.startTimeout, "start-timeout", 60*time.Second, "deadline for creating the sandbox and launching the app")
	fl.DurationVar(&f.readyTimeout, "ready-timeout", 0, "deadline for the app's window and ready_output (default: the manifest's ready_timeout, else 30s)")
	fl.StringVar(&f.out, "out", "", "trace directory (must be new or empty; default ./agentbox-runs/RUN-ID)")
	fl.StringVar(&f.logCap, "log-cap", "8m", "cap on each of stdout.log and stderr.log, and on the window events recorded")
	fl.StringArrayVar(&f.env, "env", nil, "extra app environment variable KEY=VALUE (repeatable)")
	fl.BoolVar(&f.noWM, "no-wm", false, "start no window manager")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "print every step")
	fl.Float64Var(&f.maxRate, "max-rate", 1000, "at most this many actions per second (0: no bound); waits are recorded as throttled_ms")
	fl.BoolVar(&f.freeze, "freeze-while-thinking", false, "freeze the app's processes while the agent decides (the frozen time is recorded apart)")
	fl.StringVar(&f.settle, "settle", "none", "before each screenshot after an action: none, fixed:DURATION, or stable[:DURATION] (unchanged that long)")
	fl.StringVar(&f.guestBinary, "guest-binary", "", "static agentbox binary to run inside the sandbox (default: this one)")
	_ = fl.MarkHidden("guest-binary")
	return cmd
}

// runRun validates everything before anything starts, then runs.
func runRun(cmd *cobra.Command, f runFlags, target string, appArgs []string, argsGiven bool) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	switch {
	case f.agentName == "" && f.script == "":
		return usageErrorf("choose an agent with --agent (%s) or a script with --script FILE", strings.Join(agent.Names(), ", "))
	case f.agentName != "" && f.script != "":
		return usageErrorf("--agent and --script are exclusive: a script is its own agent")
	case f.script != "" && len(f.agentOpts) > 0:
		return usageErrorf("--agent-opt applies to --agent, not to --script")
	}
	opts, err := parseKV("--agent-opt", f.agentOpts)
	if err != nil {
		return err
	}
	screen, err := action.ParseScreen(f.screen)
	if err != nil {
		return usageErrorf("--screen %v", err)
	}
	mem, err := parseSize("--memory", f.memory)
	if err != nil {
		return err
	}
	tmpfs, err := parseSize("--tmpfs", f.tmpfs)
	if err != nil {
		return err
	}
	logCap, err := parseSize("--log-cap", f.logCap)
	if err != nil {
		return err
	}
	if err := checkRange("--log-cap", float64(logCap), 1, maxLogCap, " bytes"); err != nil {
		return err
	}
	env, err := parseKV("--env", f.env)
	if err != nil {
		return err
	}
	settle, err := session.ParseSettle(f.settle)
	if err != nil {
		return usageErrorf("--settle: %v", err)
	}
	if f.maxRate < 0 {
		return usageErrorf("--max-rate must not be negative")
	}
	if f.maxSteps <= 0 {
		return usageErrorf("--max-steps must be positive, got %d", f.maxSteps)
	}
	resources := environment.Resources{CPUs: f.cpus, MemoryMB: int(mem >> 20), PIDs: f.pids, TmpfsMB: int(tmpfs >> 20)}
	if err := checkResources(resources, flagNames); err != nil {
		return err
	}
	if f.timeout <= 0 || f.startTimeout <= 0 || f.readyTimeout < 0 {
		return usageErrorf("--timeout and --start-timeout must be positive")
	}
	backend, err := resolveBackend(cmd.Context(), stderr, f.backend, f.image, f.ociRuntime)
	if err != nil {
		return err
	}
	bundle, err := app.Load(target, app.Limits{MaxFiles: app.DefaultLimits.MaxFiles, MaxBytes: min(app.DefaultLimits.MaxBytes, tmpfs*3/4)})
	if err != nil {
		return usageErrorf("%v", err)
	}
	defer bundle.Close()
	if argsGiven && f.agentName == "exec" {
		// --agent exec -- PROGRAM ARGS…: the arguments are the agent's.
		if _, set := opts["command"]; set {
			return usageErrorf("give the exec agent's program either after -- or as --agent-opt command=…, not both")
		}
		cmdJSON, _ := json.Marshal(appArgs)
		opts["command"] = string(cmdJSON)
	} else if argsGiven {
		bundle.Manifest.Args = appArgs
	}
	if len(env) > 0 && bundle.Manifest.Env == nil {
		bundle.Manifest.Env = map[string]string{}
	}
	for k, v := range env {
		bundle.Manifest.Env[k] = v
	}
	var ag agent.Agent
	agentInfo := trace.AgentInfo{Name: f.agentName, Options: opts}
	if f.script != "" {
		sc, err := script.Load(f.script, screen)
		if err != nil {
			return usageErrorf("%v", err)
		}
		if sc.Screen != (action.Screen{}) && !cmd.Flags().Changed("screen") {
			screen = sc.Screen
		}
		if f.task == "" {
			f.task = sc.Task
		}
		if !cmd.Flags().Changed("max-steps") {
			f.maxSteps = scriptMaxSteps // waits poll; --timeout bounds the run
		}
		ag = script.New(sc)
		agentInfo = trace.AgentInfo{Name: "script", Options: map[string]string{"file": f.script}}
	} else {
		ag, err = agent.New(f.agentName, agent.Options(opts))
		if err != nil {
			return usageErrorf("%v", err)
		}
	}
	if c, ok := ag.(agent.Closer); ok {
		defer c.Close()
	}

	runID := newRunID(bundle)
	dir := f.out
	if dir == "" {
		dir = filepath.Join("agentbox-runs", runID)
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stopSignals := handleSignals(cancel, stderr, backend, environment.ReapOptions{RunID: runID})
	defer stopSignals()

	reapLeftovers(ctx, backend, stderr)

	fmt.Fprintf(stderr, "agentbox: run %s: %s with %s on %s\n", runID, termsafe.Line(target), termsafe.Line(describeAgent(agentInfo)), backend.Name())
	res, err := session.Run(ctx, session.Config{
		RunID:   runID,
		Backend: backend,
		Env: environment.Config{
			Image:       f.image,
			Runtime:     f.ociRuntime,
			Screen:      screen,
			Resources:   resources,
			NoWM:        f.noWM,
			GuestBinary: f.guestBinary,
		},
		App:                 bundle,
		Agent:               ag,
		AgentInfo:           agentInfo,
		Task:                f.task,
		MaxSteps:            f.maxSteps,
		Timeout:             f.timeout,
		StartTimeout:        f.startTimeout,
		ReadyTimeout:        f.readyTimeout,
		Settle:              settle,
		FreezeWhileThinking: f.freeze,
		MaxRate:             f.maxRate,
		TraceDir:            dir,
		LogCap:              logCap,
		Progress:            stderr,
		Verbose:             f.verbose,
	})
	if err != nil {
		return failErr(err)
	}
	report(stdout, res)
	return silentExitOrNil(res.ExitCode())
}

// scriptMaxSteps is the step limit of a script run unless --max-steps says
// otherwise: wait_for polls take steps, so the script's length is no bound.
const scriptMaxSteps = 100_000

func describeAgent(a trace.AgentInfo) string {
	if a.Name == "script" {
		return "script " + a.Options["file"]
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
	fmt.Fprintf(w, "\n%d steps in %v · trace: %s\n", r.Steps, r.Duration.Round(10*time.Millisecond), termsafe.Line(r.TraceDir))
}

// reapLeftovers removes, before a command starts its own, the sandboxes
// a killed agentbox left behind, and says which.
func reapLeftovers(ctx context.Context, backend environment.Backend, stderr io.Writer) {
	r, ok := backend.(environment.Reaper)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	reaped, _ := r.Reap(ctx, environment.ReapOptions{})
	for _, x := range reaped {
		fmt.Fprintf(stderr, "agentbox: removed leftover sandbox %s of run %s (%s)\n", termsafe.Line(shortID(x.ID)), termsafe.Line(x.RunID), termsafe.Line(x.Reason))
	}
}

// handleSignals turns the first SIGINT/SIGTERM into a graceful stop
// (the run ends as interrupted, the sandbox is removed) and a second one into
// a forced one (the sandbox is removed at once and agentbox exits 130).
func handleSignals(cancel context.CancelCauseFunc, stderr io.Writer, backend environment.Backend, reap environment.ReapOptions) (stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			fmt.Fprintf(stderr, "\nagentbox: %v: stopping the run (press Ctrl-C again to force)\n", s)
			cancel(session.ErrInterrupted)
		case <-done:
			return
		}
		select {
		case <-sigs:
			fmt.Fprintf(stderr, "agentbox: forced stop: removing the sandboxes\n")
			if r, ok := backend.(environment.Reaper); ok {
				ctx, c := context.WithTimeout(context.Background(), 10*time.Second)
				_, _ = r.Reap(ctx, reap)
				c()
			}
			os.Exit(ExitInterrupted)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}

func newRunID(b *app.Bundle) string {
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	name := filepath.Base(b.Manifest.Command)
	if b.Dir != "" && !b.InImage {
		name = filepath.Base(b.Dir)
	}
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, name)
	if len(name) > 24 {
		name = name[:24]
	}
	return fmt.Sprintf("%s-%s-%s", time.Now().Format("20060102-150405"), name, hex.EncodeToString(rnd[:]))
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

// parseSize reads a size in bytes with an optional binary unit (go-units'
// RAMInBytes: "512m", "2g", "64k", "1.5GiB") or a plain number of bytes.
func parseSize(flag, s string) (int64, error) {
	v, err := units.RAMInBytes(strings.TrimSpace(s))
	if err != nil || v <= 0 || v > 1<<50 {
		return 0, usageErrorf("%s %q: want a size like 512m or 2g", flag, s)
	}
	return v, nil
}
