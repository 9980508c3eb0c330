package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/trace"
)

// lsMaxDepth bounds how deep ls looks for traces under DIR (eval suites put
// them at SUITE/TASK/NNN).
const lsMaxDepth = 4

type lsFlags struct {
	json bool
}

func newLsCmd() *cobra.Command {
	var f lsFlags
	cmd := &cobra.Command{
		Use:   "ls [DIR]",
		Short: "List the runs under DIR (default ./agentbox-runs), newest first",
		Long: `Ls lists the traces under DIR (default ./agentbox-runs), newest first: where
each is, its outcome and reason, steps, duration, app and agent. It reads only
each trace's run.json, so it is fast on thousands of runs. Traces of eval
suites (SUITE/TASK/NNN) are found too.`,
		Example: `  agentbox ls
  agentbox ls /tmp/eval --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "agentbox-runs"
			if len(args) == 1 {
				dir = args[0]
			}
			entries, warnings, err := listRuns(dir)
			if err != nil {
				return err
			}
			for _, w := range warnings {
				fmt.Fprintf(cmd.ErrOrStderr(), "agentbox: %s\n", termsafe.Line(w))
			}
			if f.json {
				return writeLsJSON(cmd.OutOrStdout(), entries)
			}
			if len(entries) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "no runs in %s\n", termsafe.Line(dir))
				return nil
			}
			writeLs(cmd.OutOrStdout(), entries, time.Local)
			return nil
		},
	}
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON (one array of runs) instead of a table")
	return cmd
}

// lsEntry is one run in the listing.
type lsEntry struct {
	Path       string    `json:"path"` // relative to DIR
	ID         string    `json:"id"`
	Status     string    `json:"status"`
	Outcome    string    `json:"outcome,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Steps      int       `json:"steps"`
	DurationMS float64   `json:"duration_ms,omitempty"`
	App        string    `json:"app"`
	Agent      string    `json:"agent"`
	Started    time.Time `json:"started"`
}

// listRuns finds traces under dir, newest first. Directories that are not
// traces are skipped; traces that cannot be read are warnings.
func listRuns(dir string) ([]lsEntry, []string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, nil, usageErrorf("ls: %v", err)
	}
	if !st.IsDir() {
		return nil, nil, usageErrorf("ls: %s is not a directory", dir)
	}
	var entries []lsEntry
	var warnings []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			warnings = append(warnings, err.Error())
			return fs.SkipDir
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		depth := 0
		if rel != "." {
			depth = strings.Count(rel, string(filepath.Separator)) + 1
		}
		if _, err := os.Stat(filepath.Join(p, trace.RunFile)); err != nil {
			if depth >= lsMaxDepth || (depth > 0 && d.Name() == trace.ScreenshotsDir) {
				return fs.SkipDir
			}
			return nil
		}
		run, err := trace.ReadRun(p)
		if err != nil {
			warnings = append(warnings, strings.TrimPrefix(err.Error(), "trace: "))
			return fs.SkipDir
		}
		entries = append(entries, lsEntry{
			Path: rel, ID: run.ID, Status: run.Status, Outcome: string(run.Outcome), Reason: run.Reason,
			Steps: run.Steps, DurationMS: run.DurationMS, App: lsApp(run.App), Agent: lsAgent(run.Agent),
			Started: run.Started,
		})
		return fs.SkipDir // a trace's own folders hold no traces
	})
	if err != nil {
		return nil, nil, failErr(fmt.Errorf("ls: %w", err))
	}
	sort.SliceStable(entries, func(i, j int) bool {
		if !entries[i].Started.Equal(entries[j].Started) {
			return entries[i].Started.After(entries[j].Started)
		}
		return entries[i].Path < entries[j].Path
	})
	return entries, warnings, nil
}

func lsApp(a trace.AppInfo) string {
	if a.Target != "" {
		return a.Target
	}
	return a.Command
}

func lsAgent(a trace.AgentInfo) string {
	if a.Name == "script" && a.Options["file"] != "" {
		return "script " + filepath.Base(a.Options["file"])
	}
	if a.Name == "replay" && a.Options["source"] != "" {
		return "replay of " + a.Options["source"]
	}
	return a.Name
}

func (e lsEntry) outcome() string {
	switch {
	case e.Status != trace.StatusComplete:
		return "incomplete"
	case e.Reason != "" && e.Reason != trace.ReasonDone:
		return string(e.Outcome) + " (" + e.Reason + ")"
	}
	return string(e.Outcome)
}

// writeLs prints the table; times are shown in loc.
func writeLs(w io.Writer, entries []lsEntry, loc *time.Location) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STARTED\tRUN\tOUTCOME\tSTEPS\tDURATION\tAPP\tAGENT")
	for _, e := range entries {
		started, d := "-", "-"
		if !e.Started.IsZero() {
			started = e.Started.In(loc).Format("2006-01-02 15:04:05")
		}
		if e.DurationMS > 0 {
			d = (time.Duration(e.DurationMS*1e3) * time.Microsecond).Round(10 * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", started, lsCell(e.Path), lsCell(e.outcome()), e.Steps, d, lsCell(e.App), lsCell(e.Agent))
	}
	tw.Flush()
}

// lsCell renders a value read from a trace (or a directory name) for one
// cell of the table: controls escaped, and tabs, which would shift the
// columns, as spaces.
func lsCell(s string) string {
	return strings.ReplaceAll(termsafe.Line(s), "\t", " ")
}

func writeLsJSON(w io.Writer, entries []lsEntry) error {
	if entries == nil {
		entries = []lsEntry{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(entries)
}
