package cli

import (
	"context"
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
	"github.com/codegirl-games/agentbox/internal/termsafe"
)

func newEvalCmd() *cobra.Command {
	var (
		parallel, episodes, maxSteps, pids int
		out, backendName, image, memory    string
		ociRuntime, tmpfs, guestBinary     string
		cpus                               float64
		timeout                            time.Duration
		freeze                             bool
		maxRate                            float64
	)
	cmd := &cobra.Command{
		Use:   "eval SUITE",
		Short: "Run every task of a suite several times, several sandboxes at once, and summarise",
		Long: `eval runs each task of SUITE (YAML) its number of episodes, --parallel
sandboxes at once, each in its own container, and writes summary.json,
junit.xml and one trace directory per episode into --out. It shows live
progress, prints a table per task (passes, mean steps, mean duration, what
did not pass by kind), and exits 0 when every episode passed, 1 when any
task failed (or an agent broke), 3 when only infrastructure failed, 130 when
interrupted. Ctrl-C stops scheduling, removes every running sandbox and
still writes the summary.

Infrastructure errors (image, daemon, guest, an app that would not start)
are counted apart from task failures.`,
		Example: `  agentbox eval examples/suite.yaml --parallel 4 --out /tmp/eval`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if parallel <= 0 || parallel > 256 {
				return usageErrorf("--parallel must be between 1 and 256, got %d", parallel)
			}
			if episodes < 0 || maxSteps <= 0 || timeout <= 0 {
				return usageErrorf("--episodes must not be negative; --max-steps and --timeout must be positive")
			}
			mem, err := parseSize("--memory", memory)
			if err != nil {
				return err
			}
			tmp, err := parseSize("--tmpfs", tmpfs)
			if err != nil {
				return err
			}
			resources := environment.Resources{CPUs: cpus, MemoryMB: int(mem >> 20), PIDs: pids, TmpfsMB: int(tmp >> 20)}
			if err := checkResources(resources, flagNames); err != nil {
				return err
			}
			suite, err := eval.Load(args[0])
			if err != nil {
				return usageErrorf("%v", err)
			}
			if err := suite.Preflight(context.Background()); err != nil {
				if errors.Is(err, agent.ErrUnreachable) {
					return failErr(fmt.Errorf("%w; nothing was started", err))
				}
				return usageErrorf("%v; nothing was started", err)
			}
			backend, err := resolveBackend(cmd.Context(), stderr, backendName, image, ociRuntime)
			if err != nil {
				return err
			}
			runID := time.Now().Format("20060102-150405") + "-" + sanitizeName(suite.Name)
			if out == "" {
				out = filepath.Join("agentbox-evals", runID)
			}
			if entries, _ := os.ReadDir(out); len(entries) > 0 {
				return usageErrorf("--out %s exists and is not empty; choose a new directory (nothing was overwritten)", out)
			}

			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			stop := handleSignals(cancel, stderr, backend, environment.ReapOptions{Mine: true})
			defer stop()
			reapLeftovers(ctx, backend, stderr)
			sum, err := eval.Run(ctx, suite, eval.Options{
				Backend: backend, Parallel: parallel, Episodes: episodes, Out: out, RunID: runID,
				Env: environment.Config{
					Image: image, Runtime: ociRuntime, GuestBinary: guestBinary,
					Resources: resources,
				},
				Timeout: timeout, MaxSteps: maxSteps, FreezeWhileThinking: freeze, MaxRate: maxRate,
				Progress: stderr, Terminal: isTerminal(stderr),
			})
			if err != nil && sum == nil {
				return failErr(err)
			}
			sum.PrintTable(stdout)
			fmt.Fprintf(stdout, "summary: %s · junit: %s\n", termsafe.Line(filepath.Join(out, eval.SummaryFile)), termsafe.Line(filepath.Join(out, eval.JUnitFile)))
			if err != nil {
				return failErr(err)
			}
			return silentExitOrNil(sum.ExitCode())
		},
	}
	fl := cmd.Flags()
	fl.IntVarP(&parallel, "parallel", "j", 1, "sandboxes at once")
	fl.IntVar(&episodes, "episodes", 0, "episodes per task (overrides the suite's)")
	fl.StringVar(&out, "out", "", "output directory (must be new or empty; default ./agentbox-evals/RUN-ID)")
	fl.StringVar(&backendName, "backend", environment.Auto, backendUsage())
	fl.StringVar(&image, "image", "", "runtime image for tasks that name none")
	fl.StringVar(&ociRuntime, "runtime", "", "OCI runtime registered with Docker, e.g. runsc")
	fl.DurationVar(&timeout, "timeout", 5*time.Minute, "per-episode deadline for tasks that name none")
	fl.IntVar(&maxSteps, "max-steps", 100, "per-episode step limit for agent tasks that name none")
	fl.Float64Var(&cpus, "cpus", 1, "CPU limit per sandbox")
	fl.StringVar(&memory, "memory", "1g", "memory limit per sandbox")
	fl.IntVar(&pids, "pids", 256, "process limit per sandbox")
	fl.StringVar(&tmpfs, "tmpfs", "256m", "writable /tmp per sandbox")
	fl.BoolVar(&freeze, "freeze-while-thinking", false, "freeze each app while its agent decides")
	fl.Float64Var(&maxRate, "max-rate", 1000, "at most this many actions per second per episode (0: no bound)")
	fl.StringVar(&guestBinary, "guest-binary", "", "static agentbox binary to run inside the sandboxes")
	_ = fl.MarkHidden("guest-binary")
	return cmd
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
