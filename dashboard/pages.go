package dashboard

import (
	"bytes"
	_ "embed" // the pages' style
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/codegirl-games/agentbox/internal/webguard"
	"github.com/codegirl-games/agentbox/report"
	"github.com/codegirl-games/agentbox/store"
	"github.com/codegirl-games/agentbox/trace"
)

//go:embed assets/dashboard.css
var css string

// The pages' one inline style exactly as written, and the policy that
// allows it and nothing else: no script at all, images only from the
// dashboard itself, forms only to itself.
var (
	inlineStyle = "\n" + css
	// CSP is the dashboard pages' Content-Security-Policy (a run's report
	// is sent with the report's own, report.CSP).
	CSP = "default-src 'none'; style-src " + webguard.SourceHash(inlineStyle) +
		"; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.Local().Format("2006-01-02 15:04")
	},
	"dur": func(ms float64) string {
		return (time.Duration(ms) * time.Millisecond).Round(100 * time.Millisecond).String()
	},
	"pct": func(p, n int) string {
		if n == 0 {
			return "—"
		}
		return strconv.FormatFloat(100*float64(p)/float64(n), 'f', 0, 64) + "%"
	},
	"outcome": func(e store.Entry) string {
		if e.Kind == store.KindRun && e.Status != trace.StatusComplete {
			return "incomplete"
		}
		return e.Outcome
	},
}

var pages = template.Must(template.New("").Funcs(funcs).Parse(`
{{define "head"}}<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{{.Title}} · agentbox dashboard</title>
<style>` + inlineStyle + `</style></head>
<body data-page="{{.Nav}}">
<header><h1>agentbox dashboard</h1>
<a href="/"{{if eq .Nav "runs"}} class="on"{{end}}>Runs and evals</a>
<a href="/rates"{{if eq .Nav "rates"}} class="on"{{end}}>Pass rates</a>
<a href="/replays"{{if eq .Nav "replays"}} class="on"{{end}}>Replays</a>
</header><main>{{end}}
{{define "foot"}}</main></body></html>{{end}}

{{define "filter"}}<form class="filter" method="get" action="{{.Action}}">
<label>app / suite<input name="app" value="{{.F.App}}"></label>
<label>agent<input name="agent" value="{{.F.Agent}}"></label>
<label>outcome<select name="outcome"><option value="">any</option>{{range .Outcomes}}<option{{if eq . $.F.Outcome}} selected{{end}}>{{.}}</option>{{end}}</select></label>
<label>task contains<input name="task" value="{{.F.Task}}"></label>
<label>eval<input name="eval" value="{{.F.Eval}}" placeholder="directory or ID"></label>
<label>since<input name="since" value="{{.F.Since}}" placeholder="2026-11-29, 7d"></label>
<label>until<input name="until" value="{{.F.Until}}" placeholder="2026-12-01"></label>
<button type="submit">Filter</button>{{if .Filtered}} <a href="{{.Action}}">clear</a>{{end}}
</form>{{end}}

{{define "runrows"}}<table class="runs"><thead><tr><th>started</th><th>outcome</th><th>app</th><th>agent</th><th>task</th><th class="num">steps</th><th class="num">time</th><th>reason</th></tr></thead><tbody>
{{range .}}<tr><td><a href="/run/{{.Row}}">{{when .Started}}</a></td><td><span class="badge {{outcome .}}">{{outcome .}}</span></td><td>{{.App}}</td><td>{{.Agent}}</td><td class="task" title="{{.Task}}">{{.Task}}</td><td class="num">{{.Steps}}</td><td class="num">{{dur .DurationMS}}</td><td class="muted">{{.Reason}}</td></tr>
{{end}}</tbody></table>{{end}}

{{define "empty"}}{{template "head" .}}
<div class="empty"><h2>The index of runs is empty</h2>
<p>The dashboard reads the index of runs ({{.Index}}), and nothing in it is below {{range $i, $r := .Roots}}{{if $i}}, {{end}}<code>{{$r}}</code>{{end}}.</p>
<p>Runs and evals add themselves as they run. To add what is already on disk, index it:</p>
<pre>agentbox index{{range .Roots}} {{.}}{{end}}</pre>
<p>then reload this page.</p></div>
{{template "foot"}}{{end}}

{{define "runs"}}{{template "head" .}}
{{template "filter" .}}
{{if .Running}}<h2 class="running">Running now ({{len .Running}})</h2>
<table><thead><tr><th>started</th><th>app</th><th>agent</th><th>task</th><th class="num">steps so far</th><th>state</th></tr></thead><tbody>
{{range .Running}}<tr><td><a href="/run/{{.Row}}">{{when .Started}}</a></td><td>{{.App}}</td><td>{{.Agent}}</td><td class="task">{{.Task}}</td><td class="num">{{.Steps}}</td><td class="running">{{.State}}{{if .Live}} · <a class="live" href="{{.Live}}" rel="noreferrer" target="_blank">live page</a>{{end}}</td></tr>
{{end}}</tbody></table>
<p class="muted">A run started with --live links to its live page (read-only). A run whose agentbox died is crashed (resumable): agentbox resume continues it.</p>{{end}}
<h2>Runs <span class="muted">({{.From}}–{{.To}} of {{.TotalRuns}})</span></h2>
<div class="actions"><a href="/export?{{.Query}}" download>Export these {{.TotalRuns}} runs (.tar.gz: traces and summary.csv)</a></div>
{{if .Runs}}{{template "runrows" .Runs}}{{else}}<p class="muted">No run matches.</p>{{end}}
<div class="pager">{{if .Prev}}<a href="/?{{.Prev}}">← newer</a>{{end}}{{if .Next}}<a href="/?{{.Next}}">older →</a>{{end}}</div>
{{if .Evals}}<h2>Evals <span class="muted">({{len .Evals}} of {{.TotalEvals}})</span></h2>
<table class="evals"><thead><tr><th>started</th><th>result</th><th>suite</th><th class="num">passed</th><th class="num">pass rate</th><th class="num">time</th><th>directory</th></tr></thead><tbody>
{{range .Evals}}<tr><td><a href="/eval/{{.Row}}">{{when .Started}}</a></td><td><span class="badge {{.Outcome}}">{{.Outcome}}</span></td><td>{{.App}}</td><td class="num">{{.Passed}}/{{.Episodes}}</td><td class="num">{{pct .Passed .Episodes}}</td><td class="num">{{dur .DurationMS}}</td><td class="muted">{{.Path}}</td></tr>
{{end}}</tbody></table>{{end}}
{{template "foot"}}{{end}}

{{define "run"}}{{template "head" .}}
<h2>{{.R.App}} · {{.R.Agent}} <span class="badge {{outcome .R.Entry}}">{{outcome .R.Entry}}</span></h2>
<div class="actions">{{if .HasReport}}<a href="/run/{{.R.Row}}/report/">Report</a>{{end}}<a href="/export?run={{.R.Row}}" download>Export (.tar.gz)</a>{{if .R.EvalRow}}<a href="/eval/{{.R.EvalRow}}">Its eval</a>{{end}}</div>
<dl class="facts">
<dt>task</dt><dd>{{.R.Task}}</dd>
<dt>started</dt><dd>{{when .R.Started}}</dd>
<dt>state</dt><dd>{{if .State}}<span class="running">{{.State}}</span>{{if .Live}} · <a class="live" href="{{.Live}}" rel="noreferrer" target="_blank">live page</a>{{end}}{{else}}{{.R.Status}}{{end}}</dd>
<dt>reason</dt><dd>{{.R.Reason}}</dd>
{{if .R.Message}}<dt>message</dt><dd>{{.R.Message}}</dd>{{end}}
{{if .R.Grade}}<dt>grade</dt><dd>{{.R.Grade}}</dd>{{end}}
<dt>steps</dt><dd>{{.R.Steps}}</dd>
<dt>time</dt><dd>{{dur .R.DurationMS}}</dd>
<dt>backend</dt><dd>{{.R.Backend}}</dd>
<dt>run ID</dt><dd><code>{{.R.ID}}</code></dd>
<dt>trace</dt><dd><code>{{.R.Path}}</code></dd>
{{if .Verdict}}<dt>replay verdict</dt><dd><span class="badge {{.Verdict.Verdict}}">{{.Verdict.Verdict}}</span> {{.Verdict.Message}} (of <code>{{.Verdict.Source}}</code>)</dd>{{end}}
</dl>
{{if .Replays}}<h2>Replays of this run</h2>{{template "replayrows" .Replays}}{{end}}
{{template "foot"}}{{end}}

{{define "replayrows"}}<table class="replays"><thead><tr><th>started</th><th>verdict</th><th>message</th><th>of</th><th class="num">steps</th></tr></thead><tbody>
{{range .}}<tr><td><a href="/run/{{.Row}}">{{when .Started}}</a></td><td><span class="badge {{.Verdict}}">{{.Verdict}}</span></td><td>{{.Message}}</td><td class="muted">{{.Source}}</td><td class="num">{{.Steps}}</td></tr>
{{end}}</tbody></table>{{end}}

{{define "replays"}}{{template "head" .}}
<h2>Replays <span class="muted">({{len .Replays}} of {{.Total}})</span></h2>
{{if .Replays}}{{template "replayrows" .Replays}}{{else}}<p class="muted">No replay is indexed: <code>agentbox replay TRACE</code> writes one (a trace of its own, with replay.json).</p>{{end}}
{{template "foot"}}{{end}}

{{define "rates"}}{{template "head" .}}
{{template "filter" .}}
{{if not .Suites}}<p class="muted">No eval matches: pass rates come from evals (<code>agentbox eval SUITE</code>).</p>{{end}}
{{range .Suites}}<h2>{{.Name}}</h2>
<div class="chart">{{.Chart}}</div>
<div class="legend">{{range .Legend}}<span><svg width="12" height="12" aria-hidden="true"><rect width="12" height="12" fill="{{.Color}}"/></svg> {{.Name}}</span>{{end}}</div>
<table><thead><tr><th>day</th><th>task</th><th class="num">passed</th><th class="num">pass rate</th></tr></thead><tbody>
{{range .Rows}}<tr><td>{{.Day}}</td><td>{{if .Task}}{{.Task}}{{else}}<b>all tasks</b>{{end}}</td><td class="num">{{.Passed}}/{{.Episodes}}</td><td class="num">{{pct .Passed .Episodes}}</td></tr>
{{end}}</tbody></table>
{{end}}
{{template "foot"}}{{end}}
`))

func (s *Server) render(w http.ResponseWriter, name string, data any) {
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, name, data); err != nil {
		serverError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

type page struct {
	Title, Nav string
}

type filterPage struct {
	page
	Action   string
	F        form
	Filtered bool
	Outcomes []string
}

func (s *Server) filterPage(title, nav, action string, f form) filterPage {
	return filterPage{page: page{title, nav}, Action: action, F: f, Filtered: f.any(), Outcomes: Outcomes}
}

// running is a run not finalised: still being written (with its live
// page's address when it serves one) or whose agentbox died.
type running struct {
	store.Entry
	State string
	Live  string
}

// runState says what is known of a run that is not complete, from its
// trace's lock (trace.CheckLiveness): running, and how long since its
// trace was last written, with the read-only address of its live page
// when the run serves one (trace.LiveFile); or crashed (resumable) when
// its agentbox died, or being resumed.
func (s *Server) runState(e store.Entry) (state, live string) {
	if e.Status == trace.StatusComplete {
		return "", ""
	}
	switch lv, err := trace.CheckLiveness(e.Path); {
	case err != nil:
		return "unknown: " + err.Error(), ""
	case lv == trace.Crashed:
		return "crashed (resumable: agentbox resume)", ""
	case lv == trace.Resuming:
		return "being resumed", ""
	case lv == trace.Finished:
		return "finished (the index is behind: agentbox index)", ""
	}
	live, _ = trace.ReadLive(e.Path) // a bad address is no link
	last := time.Time{}
	for _, f := range []string{trace.StepsFile, trace.RunFile} {
		if fi, err := os.Stat(filepath.Join(e.Path, f)); err == nil && fi.ModTime().After(last) {
			last = fi.ModTime()
		}
	}
	if last.IsZero() {
		return "running", live
	}
	return "running · trace last written " + s.o.Now().Sub(last).Round(time.Second).String() + " ago", live
}

const maxRunning = 50

func (s *Server) handleRuns(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	f, sf, err := parseFilter(r.URL.Query(), s.o.Now())
	if err != nil {
		badRequest(w, err)
		return
	}
	sf.Roots = s.roots
	total, evals, err := s.o.Store.Totals(ctx, sf)
	if err != nil {
		serverError(w, err)
		return
	}
	if total == 0 && evals == 0 && !f.any() {
		s.empty(w)
		return
	}
	sf.Limit, sf.Offset = s.o.PageSize, (f.Page-1)*s.o.PageSize
	entries, err := s.o.Store.Query(ctx, sf)
	if err != nil {
		serverError(w, err)
		return
	}
	d := struct {
		filterPage
		Runs, Evals           []store.Entry
		Running               []running
		TotalRuns, TotalEvals int
		From, To              int
		Query, Prev, Next     string
	}{filterPage: s.filterPage("Runs and evals", "runs", "/", f), TotalRuns: total, TotalEvals: evals, Query: f.query(0)}
	for _, e := range entries {
		if e.Kind == store.KindEval {
			d.Evals = append(d.Evals, e)
		} else {
			d.Runs = append(d.Runs, e)
		}
	}
	if len(d.Runs) > 0 {
		d.From, d.To = sf.Offset+1, sf.Offset+len(d.Runs)
	}
	if f.Page > 1 {
		d.Prev = f.query(f.Page - 1)
	}
	if d.To < total {
		d.Next = f.query(f.Page + 1)
	}
	if f.Page == 1 {
		rf := sf
		rf.Outcome, rf.Limit, rf.Offset = "incomplete", maxRunning, 0
		rs, err := s.o.Store.Query(ctx, rf)
		if err != nil {
			serverError(w, err)
			return
		}
		for _, e := range rs {
			if e.Kind == store.KindRun {
				st, lv := s.runState(e)
				d.Running = append(d.Running, running{e, st, lv})
			}
		}
	}
	s.render(w, "runs", d)
}

func (s *Server) empty(w http.ResponseWriter) {
	s.render(w, "empty", struct {
		page
		Index string
		Roots []string
	}{page{"empty", "runs"}, s.o.Store.Path(), s.roots})
}

// row reads a {row} path value; ok false has answered 404.
func row(w http.ResponseWriter, r *http.Request, what string) (int64, bool) {
	v := r.PathValue("row")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		notFound(w, fmt.Sprintf("no %s %q in the index", what, v))
		return 0, false
	}
	return n, true
}

// lookupRun reads a run by its row, within the roots; ok false has
// answered.
func (s *Server) lookupRun(w http.ResponseWriter, r *http.Request) (store.RunDetail, bool) {
	n, ok := row(w, r, "run")
	if !ok {
		return store.RunDetail{}, false
	}
	d, err := s.o.Store.Run(r.Context(), n)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !s.inRoots(d.Path)) {
		notFound(w, fmt.Sprintf("no run %d in the index below the dashboard's roots", n))
		return d, false
	}
	if err != nil {
		serverError(w, err)
		return d, false
	}
	return d, true
}

func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	d, ok := s.lookupRun(w, r)
	if !ok {
		return
	}
	data := struct {
		page
		R         store.RunDetail
		State     string
		Live      string
		HasReport bool
		Verdict   *replayRow
		Replays   []replayRow
	}{page: page{"run " + d.ID, "runs"}, R: d}
	data.State, data.Live = s.runState(d.Entry)
	data.HasReport = trace.CheckFile(d.Path, trace.RunFile) == nil
	if d.AgentName == "replay" {
		v := s.replayOf(d.Entry)
		data.Verdict = &v
	}
	if d.ID != "" {
		reps, err := s.o.Store.Query(r.Context(), store.Filter{Roots: s.roots, Episodes: true, ReplaysOnly: true, Agent: "replay of " + d.ID, Limit: 50})
		if err != nil {
			serverError(w, err)
			return
		}
		for _, e := range reps {
			data.Replays = append(data.Replays, s.replayOf(e))
		}
	}
	s.render(w, "run", data)
}

// handleReport serves a run's report, rendered from its trace, and the
// trace's files it links to (each through trace.OpenFile: inside the
// trace directory, no links, regular files only).
func (s *Server) handleReport(w http.ResponseWriter, r *http.Request) {
	d, ok := s.lookupRun(w, r)
	if !ok {
		return
	}
	file := r.PathValue("file")
	if file == "" {
		tr, err := trace.Open(d.Path)
		if err != nil {
			notFound(w, fmt.Sprintf("run %d: %v", d.Row, err))
			return
		}
		page, _, err := report.Render(r.Context(), tr, d.Path, report.Options{})
		if err != nil {
			serverError(w, err)
			return
		}
		w.Header().Set("Content-Security-Policy", report.CSP+"; frame-ancestors 'none'")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(page)
		return
	}
	if !filepath.IsLocal(filepath.FromSlash(file)) {
		notFound(w, fmt.Sprintf("run %d has no file %q (outside its trace)", d.Row, file))
		return
	}
	f, err := trace.OpenFile(d.Path, filepath.FromSlash(file))
	if err != nil {
		notFound(w, fmt.Sprintf("run %d has no file %q", d.Row, file))
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		serverError(w, err)
		return
	}
	http.ServeContent(w, r, fi.Name(), fi.ModTime(), f)
}

func (s *Server) handleEval(w http.ResponseWriter, r *http.Request) {
	n, ok := row(w, r, "eval")
	if !ok {
		return
	}
	e, err := s.o.Store.Eval(r.Context(), n)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !s.inRoots(e.Path)) {
		notFound(w, fmt.Sprintf("no eval %d in the index below the dashboard's roots", n))
		return
	}
	if err != nil {
		serverError(w, err)
		return
	}
	http.Redirect(w, r, "/?"+form{Eval: e.Path}.query(0), http.StatusSeeOther)
}
