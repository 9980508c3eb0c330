package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/environment"
	namedsb "github.com/codegirl-games/agentbox/environment/named"
	"github.com/codegirl-games/agentbox/internal/termsafe"
)

// namedBackend checks --name and chooses the backend of a run with it: a
// name already used keeps its backend (auto takes it; naming another is
// a usage error), a new one takes --backend's choice.
func namedBackend(name, backend string) (string, error) {
	if err := namedsb.Validate(name); err != nil {
		return "", usageErrorf("--name: %v", err)
	}
	root, err := namedsb.Root()
	if err != nil {
		return "", usageErrorf("--name: %v", err)
	}
	e, err := namedsb.Get(root, name)
	switch {
	case errors.Is(err, namedsb.ErrNotFound):
		return backend, nil
	case err != nil:
		return "", failErr(fmt.Errorf("--name %s: %w", name, err))
	case backend == environment.Auto || backend == "":
		return e.Backend, nil
	case backend != e.Backend:
		return "", usageErrorf("--name %s: the sandbox keeps its home in the %s backend, not %s: drop --backend, or use another name", name, e.Backend, backend)
	}
	return backend, nil
}

func newSandboxesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandboxes",
		Short: "List and remove named sandboxes (run --name NAME)",
		Long: `A named sandbox (agentbox run --name NAME) keeps the app user's home across the
runs of that name: a Docker volume (agentbox-home-NAME) for the docker backend,
a directory on this host for the local backend. One run holds a name at a time.
Their records are kept in $` + namedsb.EnvRoot + `, else /var/lib/agentbox/sandboxes as
root, else $XDG_STATE_HOME/agentbox/sandboxes (~/.local/state/agentbox/sandboxes).`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newSandboxesLsCmd(), newSandboxesRmCmd())
	return cmd
}

// sandboxRow is one named sandbox as `sandboxes ls --json` prints it.
type sandboxRow struct {
	Name     string          `json:"name"`
	Backend  string          `json:"backend"`
	Size     int64           `json:"size_bytes"` // at the end of its last run; -1 unknown
	Created  time.Time       `json:"created"`
	LastUsed time.Time       `json:"last_used,omitzero"`
	LastRun  string          `json:"last_run,omitempty"`
	LockedBy *namedsb.Holder `json:"locked_by,omitempty"`
}

func newSandboxesLsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the named sandboxes: backend, home size, last use, and the run that holds one now",
		Long: `ls lists the named sandboxes kept on this host: each one's backend, its home's
size when its last run ended, when that was, and the run that holds it now.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, err := namedsb.Root()
			if err != nil {
				return failErr(err)
			}
			list, err := namedsb.List(root)
			if err != nil {
				return failErr(err)
			}
			rows := make([]sandboxRow, 0, len(list))
			for _, e := range list {
				rows = append(rows, sandboxRow{Name: e.Name, Backend: e.Backend, Size: e.SizeBytes, Created: e.Created,
					LastUsed: e.LastUsed, LastRun: e.LastRun, LockedBy: e.Holder})
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			printSandboxes(cmd.OutOrStdout(), rows)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

func printSandboxes(w io.Writer, rows []sandboxRow) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "no named sandboxes")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tBACKEND\tSIZE\tLAST USED\tLOCKED BY")
	for _, r := range rows {
		size, used, by := "-", "-", "-"
		if r.Size >= 0 {
			size = humanBytes(r.Size)
		}
		if !r.LastUsed.IsZero() {
			used = r.LastUsed.Local().Format(time.DateTime)
		}
		if r.LockedBy != nil {
			by = fmt.Sprintf("run %s (pid %d)", r.LockedBy.RunID, r.LockedBy.PID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", termsafe.Line(r.Name), termsafe.Line(r.Backend), size, used, termsafe.Line(by))
	}
	tw.Flush()
}

func newSandboxesRmCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rm NAME...",
		Short: "Remove named sandboxes and their homes",
		Long: `rm removes named sandboxes: each one's home (its Docker volume, or its directory)
and its record. A sandbox a run holds is refused: its lock is held only while
that agentbox process lives (a killed one's lock is free), so stop the run first.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, names []string) error {
			for _, n := range names {
				if err := namedsb.Validate(n); err != nil {
					return usageErrorf("%v", err)
				}
			}
			root, err := namedsb.Root()
			if err != nil {
				return failErr(err)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
			defer cancel()
			for _, n := range names {
				err := removeNamed(ctx, cmd, root, n)
				switch {
				case errors.Is(err, namedsb.ErrNotFound):
					return usageErrorf("%v", err)
				case errors.Is(err, namedsb.ErrLocked):
					return failErr(err)
				case err != nil:
					return failErr(err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "removed sandbox %s\n", n)
			}
			return nil
		},
	}
	return cmd
}

// removeNamed removes one named sandbox: its backend's home, then its
// record.
func removeNamed(ctx context.Context, cmd *cobra.Command, root, name string) error {
	return namedsb.Remove(root, name, func(m namedsb.Meta) error {
		b, err := environment.Lookup(m.Backend, backendOptions(cmd))
		if err != nil {
			return err
		}
		h, ok := b.(environment.NamedHomes)
		if !ok {
			return fmt.Errorf("the %s backend keeps no named sandboxes", m.Backend)
		}
		return h.RemoveHome(ctx, name)
	})
}

// gcNamed removes the named sandboxes no run holds (gc --named), of
// backend when it is not "".
func gcNamed(ctx context.Context, cmd *cobra.Command, backend string, dryRun bool) ([]environment.Reaped, error) {
	root, err := namedsb.Root()
	if err != nil {
		return nil, err
	}
	list, err := namedsb.List(root)
	if err != nil {
		return nil, err
	}
	var out []environment.Reaped
	for _, e := range list {
		if e.Holder != nil || (backend != "" && e.Backend != backend) {
			continue
		}
		r := environment.Reaped{ID: "sandbox-" + e.Name, Name: "named sandbox " + e.Name + " (" + e.Backend + ")", RunID: e.LastRun,
			Owner: "-", Created: e.Created.Format(time.RFC3339), Reason: "--named"}
		if !dryRun {
			r.Err = removeNamed(ctx, cmd, root, e.Name)
			r.Removed = r.Err == nil
		}
		out = append(out, r)
	}
	return out, nil
}
