package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/eval"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/store"
	"github.com/codegirl-games/agentbox/trace"
)

// lsMaxDepth bounds how deep ls looks for traces under DIR (eval suites put
// them at SUITE/TASK/NNN).
const lsMaxDepth = 4

type lsFlags struct {
	json  bool
	index indexFlags
	lsFilter
}

// lsFilter is ls's selection (store.Filter's, for either source).
type lsFilter struct {
	app, agent, outcome, task, eval string
	since, until                    string
	from, to                        time.Time // since and until, parsed
}

func newLsCmd() *cobra.Command {
	var f lsFlags
	cmd := &cobra.Command{
		Use:   "ls [DIR]",
		Short: "List the runs and evals under DIR (default ./agentbox-runs and ./agentbox-evals), newest first",
		Long: `Ls lists the traces under DIR, newest first: where each is, its outcome and
reason, steps, duration, app and agent; then the evals (directories holding
an eval's summary.json): where each is, its suite, how many episodes passed,
its duration. Without DIR it looks in ./agentbox-runs and ./agentbox-evals,
where run and eval write by default. An eval's episodes are listed when DIR
is that eval (agentbox ls EVALDIR); other traces below DIR (SUITE/TASK/NNN)
are found too.

Once DIR is indexed (agentbox index DIR), ls answers from the index of runs
in one query; a DIR never indexed is read trace by trace (only each
run.json and summary.json). The filters narrow either: --app, --agent and
--task match text the run's app (an eval's suite), agent and task contain;
--outcome a run's outcome (success, failure, error, interrupted,
incomplete) or an eval's result (passed, failed, interrupted,
infrastructure); --since and --until when it started.`,
		Example: `  agentbox ls
  agentbox ls agentbox-evals/20261129-202055-mover-1a2b3c   # one eval's episodes
  agentbox ls /tmp/runs --json
  agentbox ls --app calc --outcome failure --since 7d
  agentbox ls --eval agentbox-evals/20261129-202055-mover-1a2b3c --outcome failure`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLs(cmd, f, args)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.json, "json", false, "print JSON (one array of runs and evals, each with its kind) instead of tables")
	fl.StringVar(&f.app, "app", "", "only runs whose app (evals whose suite) contains TEXT")
	fl.StringVar(&f.agent, "agent", "", "only runs whose agent contains TEXT")
	fl.StringVar(&f.outcome, "outcome", "", "only runs of this outcome (success, failure, error, interrupted, incomplete) and evals of this result (passed, failed, interrupted, infrastructure)")
	fl.StringVar(&f.task, "task", "", "only runs whose task contains TEXT")
	fl.StringVar(&f.eval, "eval", "", "only the episodes of this eval (its directory, or its ID when indexed)")
	fl.StringVar(&f.since, "since", "", "only what started at or after this time (2026-11-29, 2026-11-29T20:00:00Z, or a duration ago: 36h, 7d)")
	fl.StringVar(&f.until, "until", "", "only what started before this time (as --since)")
	fl.StringVar(&f.index.path, "index", "", "the index to read (default $"+store.EnvPath+", else $XDG_DATA_HOME/agentbox/index.db; \"off\": read the traces)")
	return cmd
}

func runLs(cmd *cobra.Command, f lsFlags, args []string) error {
	var err error
	if f.from, err = lsTime("--since", f.since); err != nil {
		return err
	}
	if f.to, err = lsTime("--until", f.until); err != nil {
		return err
	}
	dirs, named := []string{runsDir, evalsDir}, false
	if len(args) == 1 {
		dirs, named = args, true
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	st := openLsStore(cmd.ErrOrStderr(), f.index)
	if st != nil {
		defer st.Close()
	}
	if f.eval != "" {
		if fi, err := os.Stat(f.eval); err == nil && fi.IsDir() {
			dirs, named = []string{f.eval}, true
		} else if st == nil {
			return usageErrorf("ls: --eval %s: %v", f.eval, err)
		} else { // by ID, from the store: absolute paths
			entries, err := lsFromStore(ctx, st, "", f.lsFilter)
			if err != nil {
				return failErr(err)
			}
			return printLs(cmd, f, entries, []string{f.eval}, nil)
		}
	}
	var entries []lsEntry
	var searched []string
	for _, dir := range dirs {
		if !named {
			if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
				continue // nothing run or evaluated here yet
			}
		}
		var found []lsEntry
		covered := false
		if st != nil {
			covered, err = st.Covered(ctx, dir)
			if err != nil {
				return failErr(err)
			}
		}
		if covered {
			if found, err = lsFromStore(ctx, st, dir, f.lsFilter); err != nil {
				return failErr(err)
			}
		} else {
			var warnings []string
			found, warnings, err = listRuns(dir)
			if err != nil {
				return err
			}
			for _, w := range warnings {
				fmt.Fprintf(cmd.ErrOrStderr(), "agentbox: %s\n", termsafe.Line(w))
			}
			found = f.lsFilter.keep(dir, found)
		}
		if !named { // paths that work from here: agentbox-evals/…
			for i := range found {
				found[i].Path = filepath.Join(dir, found[i].Path)
			}
		}
		entries = append(entries, found...)
		searched = append(searched, dir)
	}
	return printLs(cmd, f, entries, dirs, searched)
}

func printLs(cmd *cobra.Command, f lsFlags, entries []lsEntry, dirs, searched []string) error {
	sortLs(entries)
	if f.json {
		return writeLsJSON(cmd.OutOrStdout(), entries)
	}
	if len(entries) == 0 {
		where := strings.Join(dirs, " or ")
		if len(searched) > 0 {
			where = strings.Join(searched, " or ")
		}
		what := "runs or evals"
		if f.lsFilter.any() {
			what = "matching runs or evals"
		}
		fmt.Fprintf(cmd.OutOrStdout(), "no %s in %s\n", what, termsafe.Line(where))
		return nil
	}
	writeLs(cmd.OutOrStdout(), entries, time.Local)
	return nil
}

// runsDir is where run and replay write when --out is not given.
const runsDir = "agentbox-runs"

// Kinds of ls entries.
const (
	lsRun  = "run"
	lsEval = "eval"
)

// lsEntry is one run or eval in the listing. An eval has its suite in App
// and no agent; Passed and Episodes count its episodes.
type lsEntry struct {
	Kind       string  `json:"kind"`
	Path       string  `json:"path"` // relative to DIR; without DIR, to the current directory
	ID         string  `json:"id"`
	Status     string  `json:"status"`
	Outcome    string  `json:"outcome,omitempty"`
	Reason     string  `json:"reason,omitempty"`
	Steps      int     `json:"steps"`
	DurationMS float64 `json:"duration_ms,omitempty"`
	App        string  `json:"app"`
	Agent      string  `json:"agent,omitempty"`
	Task       string  `json:"task,omitempty"`
	// Sandbox is a run's named sandbox (run --name), from run.json's
	// environment.sandbox.
	Sandbox  string    `json:"sandbox,omitempty"`
	Started  time.Time `json:"started"`
	Passed   *int      `json:"passed,omitempty"`
	Episodes *int      `json:"episodes,omitempty"`
	// Liveness, for a run not finalised or finalised as crashed: running,
	// crashed (its agentbox died: agentbox resume continues it),
	// resuming, or resumed (crashed, and resumed already).
	Liveness string `json:"liveness,omitempty"`
}

// liveness is what lsEntry.Liveness says of the trace at dir (status and
// reason from its run.json or the index).
func liveness(dir, status, reason string) string {
	if status == trace.StatusComplete && reason != trace.ReasonCrashed {
		return ""
	}
	lv, err := trace.CheckLiveness(dir)
	if err != nil {
		return ""
	}
	if lv == trace.Crashed && reason == trace.ReasonCrashed {
		if run, err := trace.ReadRun(dir); err == nil && run.ResumedBy != "" {
			return "resumed"
		}
	}
	return string(lv)
}

// listRuns finds traces and evals under dir, newest first. Directories
// that are neither are skipped; ones that cannot be read are warnings. An
// eval below dir is one entry (its episodes are not listed); when dir is
// an eval, its episodes are listed too.
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
		if isEvalDir(p) {
			sum, err := eval.ReadSummary(p)
			if err != nil {
				warnings = append(warnings, strings.TrimPrefix(err.Error(), "eval: "))
				return fs.SkipDir
			}
			passed, episodes := sum.Totals.Passed, sum.Totals.Episodes
			entries = append(entries, lsEntry{Kind: lsEval, Path: rel, ID: sum.RunID, Status: trace.StatusComplete,
				Outcome: evalOutcome(sum), DurationMS: sum.DurationMS, App: sum.Suite, Started: sum.Started,
				Passed: &passed, Episodes: &episodes})
			if depth > 0 {
				return fs.SkipDir // its episodes: agentbox ls EVALDIR
			}
			return nil
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
			Kind: lsRun, Path: rel, ID: run.ID, Status: run.Status, Outcome: string(run.Outcome), Reason: run.Reason,
			Steps: run.Steps, DurationMS: run.DurationMS, App: lsApp(run.App), Agent: lsAgent(run.Agent),
			Task: run.Task, Sandbox: run.Env.Sandbox, Started: run.Started, Liveness: liveness(p, run.Status, run.Reason),
		})
		return fs.SkipDir // a trace's own folders hold no traces
	})
	if err != nil {
		return nil, nil, failErr(fmt.Errorf("ls: %w", err))
	}
	sortLs(entries)
	return entries, warnings, nil
}

// sortLs orders entries newest first.
func sortLs(entries []lsEntry) {
	sort.SliceStable(entries, func(i, j int) bool {
		if !entries[i].Started.Equal(entries[j].Started) {
			return entries[i].Started.After(entries[j].Started)
		}
		return entries[i].Path < entries[j].Path
	})
}

// evalOutcome is an eval's outcome in the words of its exit code.
func evalOutcome(s *eval.Summary) string { return store.EvalOutcome(s) }

func lsApp(a trace.AppInfo) string { return store.AppLabel(a) }

func lsAgent(a trace.AgentInfo) string { return store.AgentLabel(a) }

func (e lsEntry) outcome() string {
	switch {
	case e.Kind == lsEval:
		return e.Outcome
	case e.Liveness == string(trace.Crashed):
		return "crashed (resumable)"
	case e.Liveness == "resumed":
		return "crashed (resumed)"
	case e.Liveness == string(trace.Resuming):
		return "crashed (resuming)"
	case e.Status != trace.StatusComplete:
		return "incomplete"
	case e.Reason != "" && e.Reason != trace.ReasonDone:
		return string(e.Outcome) + " (" + e.Reason + ")"
	}
	return string(e.Outcome)
}

// writeLs prints the runs' table, then the evals'; times are shown in loc.
func writeLs(w io.Writer, entries []lsEntry, loc *time.Location) {
	var runs, evals []lsEntry
	for _, e := range entries {
		if e.Kind == lsEval {
			evals = append(evals, e)
		} else {
			runs = append(runs, e)
		}
	}
	cells := func(e lsEntry) (started, d string) {
		started, d = "-", "-"
		if !e.Started.IsZero() {
			started = e.Started.In(loc).Format("2006-01-02 15:04:05")
		}
		if e.DurationMS > 0 {
			d = (time.Duration(e.DurationMS*1e3) * time.Microsecond).Round(10 * time.Millisecond).String()
		}
		return started, d
	}
	if len(runs) > 0 {
		// SANDBOX only when a run listed had a named one (run --name).
		named := slices.ContainsFunc(runs, func(e lsEntry) bool { return e.Sandbox != "" })
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		head := "STARTED\tRUN\tOUTCOME\tSTEPS\tDURATION\tAPP\tAGENT"
		if named {
			head += "\tSANDBOX"
		}
		fmt.Fprintln(tw, head)
		for _, e := range runs {
			started, d := cells(e)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s", started, lsCell(e.Path), lsCell(e.outcome()), e.Steps, d, lsCell(e.App), lsCell(e.Agent))
			switch {
			case named && e.Sandbox != "":
				fmt.Fprintf(tw, "\t%s", lsCell(e.Sandbox))
			case named:
				fmt.Fprint(tw, "\t-")
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	if len(evals) > 0 {
		if len(runs) > 0 {
			fmt.Fprintln(w)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "STARTED\tEVAL\tRESULT\tPASSED\tDURATION\tSUITE")
		for _, e := range evals {
			started, d := cells(e)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\n", started, lsCell(e.Path), lsCell(e.outcome()), *e.Passed, *e.Episodes, d, lsCell(e.App))
		}
		tw.Flush()
	}
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
