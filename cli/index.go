package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/codegirl-games/agentbox/eval"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/store"
	"github.com/codegirl-games/agentbox/trace"
)

// uniqueDirs drops directories given twice (as given, or made absolute).
func uniqueDirs(dirs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range dirs {
		a, err := filepath.Abs(d)
		if err != nil {
			a = d
		}
		if !seen[a] {
			seen[a] = true
			out = append(out, d)
		}
	}
	return out
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// indexFlags choose the store: --index PATH, --no-index.
type indexFlags struct {
	path string
	off  bool
}

func (f *indexFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.path, "index", "", "the index of runs (default $"+store.EnvPath+", else $XDG_DATA_HOME/agentbox/index.db; \"off\": none)")
	fl.BoolVar(&f.off, "no-index", false, "do not write this run into the index (agentbox index adds it later)")
}

// where is the store's path, or "" when it is off.
func (f *indexFlags) where() (string, error) {
	if f.off {
		return "", nil
	}
	p := f.path
	if p == "" {
		var err error
		if p, err = store.DefaultPath(); err != nil {
			return "", err
		}
	}
	if p == store.Off {
		return "", nil
	}
	return p, nil
}

// indexCloseWait bounds how long a command waits at its end for the
// index to take what is queued (the rest is for `agentbox index`).
const indexCloseWait = 5 * time.Second

// liveIndex is the store's Indexer for a command that writes traces. The
// store never fails or stops a run: a store that cannot be opened or
// written is a warning, and the run goes on unindexed.
type liveIndex struct {
	s  *store.Store
	ix *store.Indexer
}

func openLiveIndex(stderr io.Writer, f indexFlags) *liveIndex {
	p, err := f.where()
	if err == nil && p == "" {
		return &liveIndex{}
	}
	var s *store.Store
	if err == nil {
		s, err = store.Open(p)
	}
	if err != nil {
		fmt.Fprintf(stderr, "agentbox: warning: not indexing (the trace is written all the same; `agentbox index` adds it later): %s\n", termsafe.Line(err.Error()))
		return &liveIndex{}
	}
	ix := store.NewIndexer(s, func(err error) {
		fmt.Fprintf(stderr, "agentbox: warning: the index missed some of this run (the trace is whole; `agentbox index` catches up): %s\n", termsafe.Line(err.Error()))
	})
	return &liveIndex{s: s, ix: ix}
}

// indexer is the trace.Indexer to give a session (nil when off: never a
// typed nil).
func (l *liveIndex) indexer() trace.Indexer {
	if l == nil || l.ix == nil {
		return nil
	}
	return l.ix
}

// eval queues an eval's directory once its summary.json is written.
func (l *liveIndex) eval(dir string) {
	if l != nil && l.ix != nil {
		l.ix.Eval(dir)
	}
}

func (l *liveIndex) close() {
	if l == nil || l.ix == nil {
		return
	}
	l.ix.Close(indexCloseWait)
	l.s.Close()
	l.ix = nil
}

func newIndexCmd() *cobra.Command {
	var f indexFlags
	var rebuild bool
	cmd := &cobra.Command{
		Use:   "index [DIR...]",
		Short: "Add the runs and evals under DIR to the index that ls queries (default ./agentbox-runs and ./agentbox-evals)",
		Long: `Index adds to the index of runs (an SQLite file, by default
$XDG_DATA_HOME/agentbox/index.db; --index or $` + store.EnvPath + ` choose another) the traces
and evals under each DIR that it does not hold yet, or holds as they were:
a trace is read again when its run.json changed (size or time). Rows of
traces that are gone are removed. Each DIR becomes a root: ls answers for
it, and for what is below it, from the index.

run, eval, replay and serve index as they write, so this is needed only
for traces written before the index existed, with --no-index, elsewhere,
or while the index could not be written. The traces are the source of
truth: --rebuild empties the index (or, when its file is damaged, removes
it) and indexes again every directory it knew, and each DIR.`,
		Example: `  agentbox index
  agentbox index /data/agentbox-evals
  agentbox index --rebuild`,
		RunE: func(cmd *cobra.Command, args []string) error {
			stderr := cmd.ErrOrStderr()
			p, err := f.where()
			if err != nil {
				return failErr(err)
			}
			if p == "" {
				return usageErrorf("index: the index is off (--no-index, or %s=off)", store.EnvPath)
			}
			named := len(args) > 0
			dirs := args
			if !named {
				for _, d := range []string{runsDir, evalsDir} {
					if _, err := os.Stat(d); err == nil {
						dirs = append(dirs, d)
					}
				}
			}
			for _, d := range args {
				if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
					if err == nil {
						err = fmt.Errorf("%s is not a directory", d)
					}
					return usageErrorf("index: %v", err)
				}
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			var s *store.Store
			var others []string
			if rebuild {
				var roots []string
				s, roots, others, err = store.Rebuild(ctx, p)
				if err != nil {
					return failErr(err)
				}
				for _, k := range roots {
					if _, err := os.Stat(k); err == nil {
						dirs = append(dirs, k)
					} else if !errors.Is(err, fs.ErrNotExist) {
						fmt.Fprintf(stderr, "agentbox: %s\n", termsafe.Line(err.Error()))
					}
				}
			} else if s, err = store.Open(p); err != nil {
				return failErr(err)
			}
			defer s.Close()
			dirs = uniqueDirs(dirs)
			st, err := s.Index(ctx, dirs, rebuild, func(w string) {
				fmt.Fprintf(stderr, "agentbox: %s\n", termsafe.Line(w))
			})
			if err != nil {
				return failErr(fmt.Errorf("index: %w", err))
			}
			for _, k := range others { // runs and evals indexed outside the roots
				switch {
				case exists(filepath.Join(k, eval.SummaryFile)):
					err = s.IndexEval(ctx, k)
					st.Evals++
				case exists(filepath.Join(k, trace.RunFile)):
					err = s.IndexTrace(ctx, k)
					st.Runs++
				default:
					continue
				}
				if errors.Is(err, store.ErrDamaged) {
					return failErr(fmt.Errorf("index: %w", err))
				} else if err != nil {
					fmt.Fprintf(stderr, "agentbox: %s\n", termsafe.Line(err.Error()))
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "indexed %d runs and %d evals (%d unchanged, %d removed) in %s\n",
				st.Runs, st.Evals, st.Unchanged, st.Removed, termsafe.Line(p))
			return nil
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().Lookup("no-index").Hidden = true
	cmd.Flags().BoolVar(&rebuild, "rebuild", false, "recreate the index from the traces")
	return cmd
}

// reindex reads one trace into the index again whole (a crashed trace
// that a resume finalised: its row said running). Failing, it warns;
// `agentbox index` catches up.
func reindex(ctx context.Context, stderr io.Writer, f indexFlags, dir string) {
	p, err := f.where()
	if err != nil || p == "" {
		return
	}
	if _, err := os.Stat(p); err != nil {
		return // no index yet
	}
	s, err := store.Open(p)
	if err == nil {
		err = s.IndexTrace(ctx, dir)
		s.Close()
	}
	if err != nil {
		fmt.Fprintf(stderr, "agentbox: warning: the index still shows %s as running (`agentbox index` catches up): %s\n", termsafe.Line(dir), termsafe.Line(err.Error()))
	}
}
