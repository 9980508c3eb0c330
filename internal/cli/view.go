package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/internal/termsafe"
	htmlreport "github.com/codegirl-games/agentbox/report"
	"github.com/codegirl-games/agentbox/trace"
)

type viewFlags struct {
	out   string
	embed bool
	serve bool
	addr  string
}

func newViewCmd() *cobra.Command {
	var f viewFlags
	cmd := &cobra.Command{
		Use:   "view RUN",
		Short: "Write a self-contained HTML report of a run (and serve it with --serve)",
		Long: `View writes RUN/report.html: one page that needs no network (it opens from
file://) with the outcome and timings at the top, every step with its
screenshot, the action drawn on it, the agent's message and the app's output
aligned by time, a filmstrip, and keyboard navigation (←/→, Home/End).

RUN is a trace directory. An incomplete trace (agentbox was killed) is shown
with a banner that says so.

With --serve the trace directory is served on 127.0.0.1 until Ctrl-C.`,
		Example: `  agentbox view agentbox-runs/20261129-202055-mover-ae0987
  agentbox view RUN --embed --out /tmp/run.html   # one file with the screenshots inside
  agentbox view RUN --serve --addr 127.0.0.1:8080`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runView(cmd, f, args[0])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.out, "out", "", "where to write the report (default RUN/report.html)")
	fl.BoolVar(&f.embed, "embed", false, "put the screenshots inside the HTML (one file to attach or mail)")
	fl.BoolVar(&f.serve, "serve", false, "serve the trace and its report on 127.0.0.1 until interrupted")
	fl.StringVar(&f.addr, "addr", "127.0.0.1:0", "address for --serve (loopback only; port 0 picks a free one)")
	return cmd
}

// openTrace reads a trace directory for view, replay and export: anything
// that is not a readable trace of a format this agentbox knows is bad input.
func openTrace(dir string) (*trace.Trace, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, usageErrorf("%s is not a trace directory: %v", dir, err)
	}
	if !st.IsDir() {
		return nil, usageErrorf("%s is not a trace directory (it is a file; give the directory holding %s)", dir, trace.RunFile)
	}
	tr, err := trace.Open(dir)
	if err != nil {
		return nil, usageErrorf("%v", strings.TrimPrefix(err.Error(), "trace: "))
	}
	return tr, nil
}

func runView(cmd *cobra.Command, f viewFlags, dir string) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if f.serve && f.out != "" && !f.embed {
		// A report outside the trace cannot reach the screenshots over HTTP.
		return usageErrorf("--serve serves the trace directory: drop --out, or add --embed")
	}
	var ln net.Listener
	if f.serve {
		host, _, err := net.SplitHostPort(f.addr)
		if err != nil {
			return usageErrorf("--addr %q: %v", f.addr, err)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return usageErrorf("--addr %q: the report is served on loopback only (e.g. 127.0.0.1:8080)", f.addr)
		}
		// Bind before the work, so a taken port is an early, clear error.
		if ln, err = net.Listen("tcp", f.addr); err != nil {
			return failErr(fmt.Errorf("serve: %w", err))
		}
		defer ln.Close()
	}
	tr, err := openTrace(dir)
	if err != nil {
		return err
	}
	out := f.out
	if out == "" {
		out = filepath.Join(dir, htmlreport.FileName)
	} else if st, err := os.Stat(out); err == nil && st.IsDir() {
		out = filepath.Join(out, htmlreport.FileName)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	stats, err := htmlreport.Write(ctx, tr, out, htmlreport.Options{Embed: f.embed})
	if err != nil {
		return failErr(err)
	}
	if tr.Incomplete {
		fmt.Fprintf(stderr, "agentbox: %s is an incomplete trace (the run did not finish); the report says so\n", termsafe.Line(dir))
	}
	fmt.Fprintf(stdout, "report: %s (%d steps, %d screenshots, %s in %v)\n", termsafe.Line(stats.Path), len(tr.Steps), stats.Images, humanBytes(int64(stats.Bytes)), stats.Duration.Round(time.Millisecond))
	if !f.serve {
		return nil
	}
	root := dir
	page := htmlreport.FileName
	if f.out != "" {
		root, page = filepath.Dir(out), filepath.Base(out)
	}
	mux := http.NewServeMux()
	files := http.FileServer(http.Dir(root))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			http.Redirect(w, r, "/"+page, http.StatusFound)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "serving %s on http://%s/%s (Ctrl-C to stop)\n", termsafe.Line(root), ln.Addr(), termsafe.Line(page))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return failErr(fmt.Errorf("serve: %w", err))
		}
	case <-ctx.Done():
		sctx, c := context.WithTimeout(context.Background(), 2*time.Second)
		_ = srv.Shutdown(sctx)
		c()
	}
	return nil
}

func humanBytes(n int64) string {
	switch {
	case n >= 10<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
