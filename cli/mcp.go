package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/grade"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/internal/version"
	"github.com/codegirl-games/agentbox/mcp"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/serve"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

type mcpFlags struct {
	sandboxFlags
	task  string
	grade string
	vault vaultFlag
}

func newMCPCmd() *cobra.Command {
	var f mcpFlags
	cmd := &cobra.Command{
		Use:   "mcp TARGET [flags] [-- APP ARGS...]",
		Short: "Serve an app in a sandbox to an MCP client over stdio: screenshot, click, type, key, …",
		Long: `Mcp is a Model Context Protocol server on stdio for an MCP client (a desktop
assistant, an agent framework) that starts it: its tools look at TARGET's
screen in a fresh sandbox and act on it as a person at that desktop would —
screenshot, click, double_click, type, key, key_down, key_up, mouse_move,
mouse_down, mouse_up, drag, scroll, wait, cursor_position, done — and launch
it again (a new episode in a new sandbox), read its output and tell the
desktop's state. TARGET and the flags are run's. The app starts at the first
tool call that needs it.

Every action is validated as an agent's is and recorded in the episode's
trace (under --out, one directory per run ID) with the actor "mcp". When the
client closes stdin the running episode ends (interrupted, closed), its
sandbox is removed and its trace finalised; a signal does the same and exits
130. Stdout carries the protocol only; messages go to stderr.`,
		Example: `  agentbox mcp examples/mover
  agentbox mcp ./my-game --backend local --screen 1280x720 --out ~/agentbox-runs
  # an MCP client's configuration: {"command": "agentbox", "args": ["mcp", "/path/to/app"]}`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			appArgs, argsGiven, err := splitArgs("mcp", "TARGET", cmd, args)
			if err != nil {
				return err
			}
			return runMCP(cmd, f, args[0], appArgs, argsGiven)
		},
	}
	fl := cmd.Flags()
	f.register(fl, "mcp")
	f.vault.register(fl)
	fl.StringVar(&f.task, "task", "", "what the episodes are for (recorded in their traces; launch may change it)")
	fl.StringVar(&f.grade, "grade", "", "grade each episode's collected files with the checks of FILE (docs/tasks.md), on the host after the episode; the step that ends an episode answers with its files and grade")
	return cmd
}

// mcpFlagUse is mcp's use of a sandbox flag: run's, where the meaning is
// the same; its own where an episode differs from a run (--out is the
// directory of every episode's trace; an assistant's session takes longer
// than an agent's run: serve's defaults, as at its /v1/mcp); none for --freeze-while-thinking (an MCP client
// thinks between calls, outside any loop of agentbox's).
func mcpFlagUse(name string, run flagUse, runTakes bool) (flagUse, bool) {
	switch name {
	case "out":
		return flagUse{serve.DefaultOut, "directory of the episodes' traces, one per run ID"}, true
	case "timeout":
		return flagUse{serve.DefaultTimeout, "deadline of an episode (then its steps are refused; launch starts another)"}, true
	case "max-steps":
		return flagUse{serve.DefaultMaxSteps, "steps per episode (then they are refused; launch starts another)"}, true
	case "freeze-while-thinking", "approve":
		return flagUse{}, false
	case "log-cap":
		return flagUse{sizeFlag(trace.DefaultLogCap), "cap on each of an episode's stdout.log and stderr.log, and on the window events recorded"}, true
	case "policy":
		// stdin is the protocol's: no terminal to ask on; the client is asked.
		return flagUse{"", "policy file of allow/ask/deny rules every action passes before it runs; its asks go to the client where it supports elicitation, else they are denied (docs/policy.md)"}, true
	}
	return run, runTakes
}

// runMCP validates everything run validates before anything starts, then
// serves the client on stdin and stdout until it closes stdin.
func runMCP(cmd *cobra.Command, f mcpFlags, target string, appArgs []string, argsGiven bool) error {
	stderr := cmd.ErrOrStderr()
	var spec *grade.Spec
	if f.grade != "" {
		var err error
		if spec, err = grade.Load(f.grade); err != nil {
			return usageErrorf("--grade: %v", err)
		}
	}
	so, err := f.validate()
	if err != nil {
		return err
	}
	vt, err := f.vault.load()
	if err != nil {
		return err
	}
	envCfg, env := so.env, so.appEnv
	// A grade that checks the observer's activity needs the observer.
	envCfg.Observe = envCfg.Observe || spec != nil && spec.NeedsObserver()
	logCap, settle := so.logCap, so.settle
	if fi, err := os.Stat(f.out); err == nil && !fi.IsDir() {
		return usageErrorf("--out %s is a file; give a directory (each episode's trace is a new directory in it)", f.out)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return usageErrorf("--out %s: %v", f.out, err)
	}
	bundle, backend, note, err := loadTarget(cmd.Context(), target, &envCfg, env, &so.gate, chooseBackend(cmd, f.backend), f.image, f.ociRuntime, f.allowUnbounded)
	if err != nil {
		return err
	}
	defer bundle.Close()
	so.gate.note(stderr, envCfg.A11y || bundle.Manifest.A11y)
	if argsGiven {
		bundle.Manifest.Args = appArgs
	}
	inputs, err := loadInputs(bundle.Manifest.Task.Merge(app.TaskFiles{}), bundle, envCfg.Resources)
	if err != nil {
		return err
	}
	defer inputs.Close()

	if spec != nil && bundle.Manifest.Task.Collect.Empty() {
		return usageErrorf("--grade: %s collects no files (collect in its agentbox.json): there would be nothing to grade", target)
	}

	fmt.Fprint(stderr, note)
	ctx, stop := watchRun(stderr, backend, environment.ReapOptions{Mine: true})
	defer stop()
	cfg := session.Config{
		Backend:      backend,
		Env:          envCfg,
		App:          bundle,
		Task:         f.task,
		Inputs:       inputs,
		Vault:        vt,
		Collect:      bundle.Manifest.Task.Collect,
		MaxSteps:     f.maxSteps,
		Timeout:      f.timeout,
		StartTimeout: f.startTimeout,
		ReadyTimeout: f.readyTimeout,
		Settle:       settle,
		MaxRate:      f.maxRate,
		Tree:         f.a11yTree,
		Marks:        f.marks,
		Policy:       so.gate.policy,
		Approver:     so.gate.approver,
		LogCap:       logCap,
		Progress:     stderr,
		Verbose:      f.verbose,
	}
	if spec != nil {
		cfg.Grader = spec
	}
	// One session over stdio: its episodes are opened once, with the
	// client as who answers the policy's asks.
	open := func(_ string, asks policy.Approver) mcp.Episodes {
		return mcp.NewLocal(mcp.LocalOptions{
			Config: cfg,
			App:    bundleName(bundle), Out: f.out, Context: ctx, Asks: asks,
			RunID: func() string { return newRunID(bundle) },
		})
	}
	srv := mcp.New(mcp.Options{Open: open, Version: version.Version})
	fmt.Fprintf(stderr, "agentbox mcp: serving %s on %s over stdio; traces under %s\n", termsafe.Line(target), backend.Name(), termsafe.Line(absOr(f.out)))
	err = srv.ServeStdio(ctx, cmd.InOrStdin(), cmd.OutOrStdout())
	switch {
	case errors.Is(context.Cause(ctx), session.ErrInterrupted):
		fmt.Fprintf(stderr, "agentbox mcp: interrupted\n")
		return silentExit(ExitInterrupted)
	case err != nil:
		return failErr(fmt.Errorf("mcp: %w", err))
	}
	fmt.Fprintf(stderr, "agentbox mcp: the client closed the connection\n")
	return nil
}
