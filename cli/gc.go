package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/owner"
	"github.com/codegirl-games/agentbox/internal/termsafe"
)

func newGCCmd() *cobra.Command {
	var (
		all, dryRun, withNamed bool
		backendName            string
	)
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove sandboxes and temporary files that a killed agentbox left behind",
		Long: `gc finds the sandboxes agentbox labelled as its own and removes those whose
owning agentbox process (on this host) is gone. --all removes every agentbox
sandbox, including those of runs still in progress. Named sandboxes (run --name)
are kept, whatever the options, unless --named: then those no run holds go too.

It also removes the temporary directories (serve's uploads, a sandbox network's
sockets, an exec agent's screenshots) that agentbox processes on this host made
and could not remove because they were killed: this user's, and as root any
user's; those of live processes are kept, even with --all.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			names := environment.Backends()
			if backendName != "" {
				names = []string{backendName}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
			defer cancel()
			var reaped []environment.Reaped
			for _, name := range names {
				b, err := environment.Lookup(name, backendOptions(cmd))
				if err != nil {
					return usageErrorf("--backend: %v", err)
				}
				r, ok := b.(environment.Reaper)
				if !ok {
					if backendName != "" {
						return usageErrorf("backend %s leaves nothing behind to collect", backendName)
					}
					continue
				}
				got, err := r.Reap(ctx, environment.ReapOptions{All: all, DryRun: dryRun})
				if err != nil {
					if backendName == "" && errors.Is(err, environment.ErrUnavailable) {
						continue // e.g. no Docker daemon: nothing of Docker's to collect here
					}
					return failErr(err)
				}
				reaped = append(reaped, got...)
			}
			if withNamed {
				got, err := gcNamed(ctx, cmd, backendName, dryRun)
				if err != nil {
					return failErr(err)
				}
				reaped = append(reaped, got...)
			}
			out := cmd.OutOrStdout()
			temps, failed := reapTempDirs(out, dryRun)
			for _, x := range reaped {
				verb := "removed"
				switch {
				case x.Err != nil:
					verb, failed = "failed to remove", failed+1
				case dryRun:
					verb = "would remove"
				}
				fmt.Fprintf(out, "%s %s %s (run %s, owner %s, created %s): %s", verb, termsafe.Line(shortID(x.ID)), termsafe.Line(x.Name), termsafe.Line(x.RunID), termsafe.Line(x.Owner), termsafe.Line(x.Created), termsafe.Line(x.Reason))
				if x.Err != nil {
					fmt.Fprintf(out, ": %s", termsafe.Line(x.Err.Error()))
				}
				fmt.Fprintln(out)
			}
			if len(reaped) == 0 && temps == 0 {
				fmt.Fprintln(out, "nothing to collect")
			}
			if failed > 0 {
				return failErr(fmt.Errorf("%d sandboxes or directories could not be removed", failed))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "remove every agentbox sandbox, even of live runs")
	cmd.Flags().BoolVar(&withNamed, "named", false, "also remove the named sandboxes (run --name) that no run holds, their homes with them")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be removed")
	cmd.Flags().StringVar(&backendName, "backend", "", "backend to collect from (default: every backend available here)")
	return cmd
}

// reapTempDirs removes (or with dryRun lists) the temporary directories of
// agentbox processes that are gone (owner.Orphans), a line each, and
// returns how many it found and how many it could not remove. A
// directory that cannot be listed is reported as one failure.
func reapTempDirs(out io.Writer, dryRun bool) (found, failed int) {
	orphans, err := owner.Orphans("")
	if err != nil {
		fmt.Fprintf(out, "failed to look for temporary directories: %s\n", termsafe.Line(err.Error()))
		return 0, 1
	}
	for _, o := range orphans {
		verb := "removed"
		var rerr error
		if dryRun {
			verb = "would remove"
		} else if rerr = o.Remove(); rerr != nil {
			verb, failed = "failed to remove", failed+1
		}
		fmt.Fprintf(out, "%s temporary directory %s (%s, created %s): %s", verb, termsafe.Line(o.Path), termsafe.Line(o.Kind), o.Created.UTC().Format(time.RFC3339), termsafe.Line(o.Reason))
		if rerr != nil {
			fmt.Fprintf(out, ": %s", termsafe.Line(rerr.Error()))
		}
		fmt.Fprintln(out)
	}
	return len(orphans), failed
}
