package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/dashboard"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/store"
)

type dashboardFlags struct {
	addr  string
	index indexFlags
}

func newDashboardCmd() *cobra.Command {
	var f dashboardFlags
	cmd := &cobra.Command{
		Use:   "dashboard [DIR...]",
		Short: "Serve a local web dashboard of the index of runs: runs, evals, pass rates, reports, replays, exports",
		Long: `Dashboard serves, on a loopback address until Ctrl-C, pages over the index
of runs (the one ls reads; agentbox index fills it): the runs and evals with
filters (app, agent, outcome, date range, eval, text in the task); pass
rates by day of every suite and of each of its tasks (a table and a chart);
the runs still being written; each run's facts and its report (rendered
from its trace); the replays and their verdicts; and an export of any
selection: one .tar.gz of the selected traces with a summary.csv.

DIR... are the trace roots: only runs and evals in them or below are shown
and served. Without DIR: the directories agentbox index walked, and
./agentbox-runs and ./agentbox-evals.

The pages need no network and run no script. As the live page, the
dashboard listens on loopback only; the address it prints carries a
token that the first load exchanges for a cookie; requests naming another
host or coming from another origin are refused.`,
		Example: `  agentbox dashboard
  agentbox dashboard --addr 127.0.0.1:8472 /data/agentbox-runs /data/agentbox-evals
  ssh -L 8472:127.0.0.1:8472 host agentbox dashboard --addr 127.0.0.1:8472   # from elsewhere`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDashboard(cmd, f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:0", "address to serve on (loopback only; port 0 picks a free one)")
	fl.StringVar(&f.index.path, "index", "", "the index to read (default $"+store.EnvPath+", else $XDG_DATA_HOME/agentbox/index.db)")
	return cmd
}

func runDashboard(cmd *cobra.Command, f dashboardFlags, args []string) error {
	stderr := cmd.ErrOrStderr()
	p, err := f.index.where()
	if err != nil {
		return failErr(err)
	}
	if p == "" {
		return usageErrorf("dashboard: the index is off (%s=%s): the dashboard reads the index of runs; give --index PATH", store.EnvPath, store.Off)
	}
	for _, d := range args {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return usageErrorf("dashboard: %s is not a directory", d)
		}
	}
	st, err := store.Open(p)
	if err != nil {
		return failErr(err)
	}
	defer st.Close()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	roots := args
	if len(roots) == 0 {
		if roots, err = st.Roots(ctx); err != nil {
			return failErr(err)
		}
		for _, d := range []string{runsDir, evalsDir} {
			if _, err := os.Stat(d); errors.Is(err, fs.ErrNotExist) {
				continue
			}
			a, _ := filepath.Abs(d)
			roots = append(roots, a)
		}
	}
	srv, err := dashboard.New(dashboard.Options{Store: st, Roots: roots})
	if err != nil {
		return failErr(err)
	}
	if err := srv.Listen(f.addr); err != nil {
		return usageErrorf("--addr: %v", err)
	}
	for _, r := range srv.Roots() {
		fmt.Fprintf(stderr, "agentbox: dashboard: trace root %s\n", termsafe.Line(r))
	}
	if len(srv.Roots()) == 0 {
		fmt.Fprintf(stderr, "agentbox: dashboard: no trace root (no DIR given, nothing indexed, no ./agentbox-runs): the pages will be empty\n")
	}
	fmt.Fprintf(stderr, "agentbox: dashboard: %s (Ctrl-C to stop)\n", srv.URL())
	<-ctx.Done()
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer scancel()
	_ = srv.Close(sctx)
	return nil
}
