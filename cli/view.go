package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/codegirl-games/agentbox/eval"
	"github.com/codegirl-games/agentbox/internal/plural"
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
		Use:   "view RUN|EVALDIR",
		Short: "Write a self-contained HTML report of a run or of a whole eval (and serve a run's with --serve)",
		Long: `View writes RUN/report.html: one page that needs no network (it opens from
file://) with the outcome and timings at the top, every step with its
screenshot, the action drawn on it, the agent's message and the app's output
aligned by time, a filmstrip, and keyboard navigation (←/→, Home/End).

RUN is a trace directory. An incomplete trace (agentbox was killed) is shown
with a banner that says so.

EVALDIR is an eval's output directory (holding summary.json): view writes
EVALDIR/report.html, one page with every task and every episode (result,
outcome, time, steps, message) linked to the report of its run, which it
writes next to each episode's trace.

With --serve the trace directory is served on 127.0.0.1 until Ctrl-C.`,
		Example: `  agentbox view agentbox-runs/20261129-202055-mover-ae0987
  agentbox view RUN --embed --out /tmp/run.html   # one file with the screenshots inside
  agentbox view RUN --serve --addr 127.0.0.1:8080
  agentbox view agentbox-evals/20261129-202055-mover-1a2b3c   # the whole eval, one page`,
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
	if isEvalDir(dir) {
		if f.serve {
			return usageErrorf("--serve serves one run's report; open %s, or view one episode's trace with --serve", filepath.Join(dir, htmlreport.FileName))
		}
		return runViewEval(cmd, f, dir)
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
	for _, r := range stats.Refused {
		fmt.Fprintf(stderr, "agentbox: %s: not read: %s\n", termsafe.Line(dir), termsafe.Line(r))
	}
	fmt.Fprintf(stdout, "report: %s (%s, %s, %s in %v)\n", termsafe.Line(stats.Path), plural.S(len(tr.Steps), "step"), plural.S(stats.Images, "screenshot"), humanBytes(int64(stats.Bytes)), stats.Duration.Round(time.Millisecond))
	if !f.serve {
		return nil
	}
	page := "/" + filepath.Base(out)
	srv := &http.Server{Handler: reportHandler(ln.Addr(), tr.Dir, page, stats.Page, servedFiles(tr.Dir, filepath.Dir(out), stats.Files)), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "serving %s on http://%s%s (Ctrl-C to stop)\n", termsafe.Line(filepath.Dir(out)), ln.Addr(), termsafe.Line(page))
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

// isEvalDir says dir is an eval's output directory: a summary.json and no
// run.json of its own.
func isEvalDir(dir string) bool {
	if _, err := os.Lstat(filepath.Join(dir, trace.RunFile)); err == nil {
		return false
	}
	_, err := os.Lstat(filepath.Join(dir, eval.SummaryFile))
	return err == nil
}

// runViewEval writes the page of a whole eval, and each episode's report.
func runViewEval(cmd *cobra.Command, f viewFlags, dir string) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	sum, err := eval.ReadSummary(dir)
	if err != nil {
		return usageErrorf("%v", strings.TrimPrefix(err.Error(), "eval: "))
	}
	out := f.out
	if out == "" {
		out = filepath.Join(dir, htmlreport.FileName)
	} else if st, err := os.Stat(out); err == nil && st.IsDir() {
		out = filepath.Join(out, htmlreport.FileName)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	stats, err := htmlreport.WriteEval(ctx, dir, evalPage(sum), out, htmlreport.Options{Embed: f.embed})
	if err != nil {
		return failErr(err)
	}
	for _, r := range stats.Refused {
		fmt.Fprintf(stderr, "agentbox: %s: not linked: %s\n", termsafe.Line(dir), termsafe.Line(r))
	}
	fmt.Fprintf(stdout, "report: %s (%s, %s, %s in %v)\n", termsafe.Line(stats.Path),
		plural.S(len(sum.Episodes), "episode"), plural.Count(stats.Reports, "run report", "run reports"), humanBytes(int64(stats.Bytes)), stats.Duration.Round(time.Millisecond))
	return nil
}

// evalPage is what the eval's page shows, from its summary.
func evalPage(s *eval.Summary) htmlreport.Eval {
	task := func(t eval.TaskSummary) htmlreport.EvalTask {
		return htmlreport.EvalTask{Name: t.Name, Episodes: t.Episodes, Passed: t.Passed, PassRate: t.PassRate,
			MeanSteps: t.MeanSteps, MeanDurationMS: t.MeanDurationMS, NotPassed: t.NotPassed()}
	}
	ev := htmlreport.Eval{Suite: s.Suite, RunID: s.RunID, Started: s.Started, DurationMS: s.DurationMS,
		Parallel: s.Parallel, ExitCode: s.ExitCode(), Totals: task(s.Totals)}
	for _, t := range s.Tasks {
		ev.Tasks = append(ev.Tasks, task(t))
	}
	for _, e := range s.Episodes {
		ev.Episodes = append(ev.Episodes, htmlreport.EvalEpisode{Task: e.Task, N: e.N, Category: e.Category,
			Outcome: string(e.Outcome), Reason: e.Reason, Message: e.Message, Steps: e.Steps, DurationMS: e.DurationMS, Trace: e.Trace,
			Grade: e.Grade, Score: e.Score})
	}
	return ev
}

// servedFiles maps the URL path of each trace file the page links to (as
// the browser asks for it, relative to the page's folder) to its path in
// the trace. Files the page reaches outside its own folder are not served.
func servedFiles(traceDir, pageDir string, files []string) map[string]string {
	m := map[string]string{}
	for _, f := range files {
		rel, err := filepath.Rel(absOr(pageDir), absOr(filepath.Join(traceDir, filepath.FromSlash(f))))
		if err != nil || !filepath.IsLocal(rel) {
			continue
		}
		m["/"+filepath.ToSlash(rel)] = path.Clean(f)
	}
	return m
}

func absOr(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// reportHandler serves the report page (from memory: exactly what was
// written) and the trace files it links to, nothing else: no listings, no
// other file of the trace, and no file through a link (each is opened with
// trace.OpenFile when asked for). Requests must name the server by a
// loopback name or the address it is bound to, so a web page whose name
// was rebound to 127.0.0.1 (DNS rebinding) gets nothing.
func reportHandler(bound net.Addr, traceDir, page string, html []byte, files map[string]string) http.Handler {
	modtime := time.Now()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Cache-Control", "no-cache")
		if !hostAllowed(r.Host, bound) {
			http.Error(w, "agentbox view serves this report to 127.0.0.1, [::1] and localhost only", http.StatusMisdirectedRequest)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		switch r.URL.Path {
		case "/":
			http.Redirect(w, r, page, http.StatusFound)
			return
		case page:
			h.Set("Content-Type", "text/html; charset=utf-8")
			h.Set("Content-Security-Policy", htmlreport.CSP)
			http.ServeContent(w, r, page, modtime, bytes.NewReader(html))
			return
		}
		rel, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		f, err := trace.OpenFile(traceDir, rel)
		if err != nil {
			http.NotFound(w, r) // gone, or refused (a link, not a plain file)
			return
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			http.Error(w, "cannot read the file", http.StatusInternalServerError)
			return
		}
		// A file of the trace is data, never a page: its own type, no
		// sniffing, and sandboxed should a browser open it.
		h.Set("Content-Type", servedType(rel))
		h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
		http.ServeContent(w, r, "", st.ModTime(), f)
	})
}

func servedType(rel string) string {
	switch strings.ToLower(path.Ext(rel)) {
	case ".png":
		return "image/png"
	case ".log", ".txt":
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}

// hostAllowed says whether a request's Host names this server: localhost
// or the address it is bound to, with its port.
func hostAllowed(host string, bound net.Addr) bool {
	ta, ok := bound.(*net.TCPAddr)
	if !ok {
		return false
	}
	name, port, err := net.SplitHostPort(host)
	if err != nil {
		name, port = host, "80"
	}
	if port != strconv.Itoa(ta.Port) {
		return false
	}
	if strings.EqualFold(name, "localhost") {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.Equal(ta.IP)
}

// humanBytes formats a size in binary units: "8 MiB", "1.953 KiB".
func humanBytes(n int64) string {
	return units.CustomSize("%.4g %s", float64(n), 1024, []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"})
}
