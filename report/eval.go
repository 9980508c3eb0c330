package report

import (
	"bytes"
	"context"
	_ "embed" // the eval page's CSS
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"time"

	"github.com/codegirl-games/agentbox/internal/atomicfile"
	"github.com/codegirl-games/agentbox/internal/plural"
	"github.com/codegirl-games/agentbox/trace"
)

// An eval's page: one table per task and one row per episode, each linked
// to its run's own report (written next to its trace). The page is plain
// HTML with no script at all; its Content-Security-Policy allows its one
// inline style by hash and nothing else, and it links only to the
// episodes' reports, by relative paths checked as every path read from a
// trace is (trace.CheckFile: inside the eval's directory, no symbolic
// links).

//go:embed assets/eval.css
var evalCSS string

var (
	evalStyle = "\n" + evalCSS
	// EvalCSP is the eval page's policy: its own style, no script, no
	// fetch of any kind.
	EvalCSP = "default-src 'none'; style-src " + sourceHash(evalStyle) + "; base-uri 'none'; form-action 'none'"
)

// Eval is what the page of an eval shows (the CLI fills it from the
// eval's summary.json, which is input like a trace).
type Eval struct {
	Suite      string
	RunID      string
	Started    time.Time
	DurationMS float64
	Parallel   int
	ExitCode   int
	Tasks      []EvalTask
	Totals     EvalTask
	Episodes   []EvalEpisode
}

// EvalTask is one task's (or the totals') line.
type EvalTask struct {
	Name                      string
	Episodes, Passed          int
	PassRate                  float64
	MeanSteps, MeanDurationMS float64
	NotPassed                 string // "1 failed (check_failed ×1)", or ""
}

// EvalEpisode is one episode's line. Trace is its trace directory,
// slash-separated and relative to the eval's directory.
type EvalEpisode struct {
	Task, Category, Outcome, Reason, Message, Trace string
	N, Steps                                        int
	DurationMS                                      float64
	// Grade and Score are the private grader's outcome class and score
	// (docs/tasks.md); empty and nil for an episode without a grade.
	Grade string
	Score *float64
}

// EvalStats describes a written eval page.
type EvalStats struct {
	Path     string
	Bytes    int
	Reports  int // episodes' reports written
	Duration time.Duration
	// Refused says which episode traces were not read, and why.
	Refused []string
}

// WriteEval writes the page of the eval in dir to out (normally
// dir/report.html), and the report of each episode's run next to its
// trace (with opts), so the page can link to it.
func WriteEval(ctx context.Context, dir string, ev Eval, out string, opts Options) (EvalStats, error) {
	t0 := time.Now()
	st := EvalStats{Path: out}
	type row struct {
		EvalEpisode
		Link, Note, Duration string
	}
	rows := make([]row, 0, len(ev.Episodes))
	for _, ep := range ev.Episodes {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		r := row{EvalEpisode: ep, Duration: seconds(ep.DurationMS)}
		r.Message = clip(ep.Message, 600)
		switch link, note, err := writeEpisode(ctx, dir, ep.Trace, filepath.Dir(out), opts); {
		case err != nil:
			return st, err
		case link != "":
			r.Link = link
			st.Reports++
		default:
			r.Note = note
			if note != noTrace {
				st.Refused = append(st.Refused, ep.Trace+": "+note)
			}
		}
		rows = append(rows, r)
	}
	tasks := append(append([]EvalTask(nil), ev.Tasks...), ev.Totals)
	var b bytes.Buffer
	err := evalPage.Execute(&b, map[string]any{
		"CSP": EvalCSP, "Style": template.CSS(evalStyle), "Ev": ev, "Tasks": tasks, "Rows": rows, "Refused": st.Refused,
		"Passed":  fmt.Sprintf("%d of %s passed", ev.Totals.Passed, plural.S(ev.Totals.Episodes, "episode")),
		"Started": ev.Started.Format("2006-01-02 15:04:05 MST"), "Duration": seconds(ev.DurationMS),
		"Generated": time.Now().UTC().Format(time.RFC3339),
	})
	if err != nil {
		return st, fmt.Errorf("report: eval page: %w", err)
	}
	if err := atomicfile.WriteFile(out, b.Bytes(), 0o644); err != nil {
		return st, fmt.Errorf("report: write %s: %w", out, err)
	}
	st.Bytes, st.Duration = b.Len(), time.Since(t0)
	return st, nil
}

// noTrace is the note of an episode that left no trace (it never ran).
const noTrace = "no trace"

// writeEpisode writes the report of the episode whose trace is rel (inside
// dir) and returns its URL as seen from pageDir; without a link, note says
// why (no trace, a path that is refused, a trace that cannot be read).
// Only a failure to write a report is an error.
func writeEpisode(ctx context.Context, dir, rel, pageDir string, opts Options) (link, note string, _ error) {
	if rel == "" {
		return "", noTrace, nil
	}
	// The summary is input: its path must lead to a plain run.json inside
	// the eval's directory, through no link.
	switch err := trace.CheckFile(dir, path.Join(rel, trace.RunFile)); {
	case errors.Is(err, fs.ErrNotExist):
		return "", noTrace, nil
	case err != nil:
		return "", "not read: " + err.Error(), nil
	}
	tdir := filepath.Join(dir, filepath.FromSlash(rel))
	tr, err := trace.Open(tdir)
	if err != nil {
		return "", "not read: " + err.Error(), nil
	}
	if _, err := Write(ctx, tr, filepath.Join(tdir, FileName), opts); err != nil {
		return "", "", err
	}
	return relURL(pageDir, dir, path.Join(rel, FileName)), "", nil
}

func seconds(ms float64) string {
	return strconv.FormatFloat(ms/1000, 'f', 2, 64) + " s"
}

var evalPage = template.Must(template.New("eval").Funcs(template.FuncMap{
	"pct":   func(f float64) string { return strconv.FormatFloat(100*f, 'f', 0, 64) + "%" },
	"one":   func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"secs":  seconds,
	"score": func(f *float64) string { return strconv.FormatFloat(*f, 'f', 2, 64) },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="{{.CSP}}">
<meta name="referrer" content="no-referrer">
<meta name="generator" content="agentbox view">
<title>{{.Ev.Suite}} · {{.Passed}} · agentbox eval</title>
<style>{{.Style}}</style>
</head>
<body>
<header>
<h1>eval {{.Ev.Suite}}: {{.Passed}}</h1>
<div class="facts">
<span>eval <b class="mono">{{.Ev.RunID}}</b></span>
<span>started <b>{{.Started}}</b></span>
<span>took <b>{{.Duration}}</b></span>
<span>parallel <b>{{.Ev.Parallel}}</b></span>
<span>exit code <b>{{.Ev.ExitCode}}</b></span>
</div>
</header>
{{if .Refused}}<div class="banner">Some episodes' traces were not read (a path in summary.json that leaves the eval's directory, a symbolic link, a trace that cannot be read):<ul>{{range .Refused}}<li>{{.}}</li>{{end}}</ul></div>
{{end}}<h2>Tasks</h2>
<table id="tasks">
<thead><tr><th>task</th><th>passed</th><th>pass rate</th><th>mean steps</th><th>mean time</th><th>not passed, by kind</th></tr></thead>
<tbody>
{{range $i, $t := .Tasks}}<tr{{if eq $t.Name "total"}} class="total"{{end}}><td>{{$t.Name}}</td><td class="num">{{$t.Passed}}/{{$t.Episodes}}</td><td class="num">{{pct $t.PassRate}}</td><td class="num">{{one $t.MeanSteps}}</td><td class="num">{{secs $t.MeanDurationMS}}</td><td>{{if $t.NotPassed}}{{$t.NotPassed}}{{else}}<span class="none">-</span>{{end}}</td></tr>
{{end}}</tbody>
</table>
<h2>Episodes</h2>
<table id="episodes">
<thead><tr><th>task</th><th>episode</th><th>result</th><th>outcome</th><th>grade</th><th>time</th><th>steps</th><th>message</th><th>run</th></tr></thead>
<tbody>
{{range .Rows}}<tr class="episode"><td>{{.Task}}</td><td class="num">{{.N}}</td><td><span class="cat {{.Category}}">{{.Category}}</span></td><td>{{.Outcome}}{{if .Reason}} <span class="mono">({{.Reason}})</span>{{end}}</td><td>{{if .Grade}}{{.Grade}}{{if .Score}} <span class="mono">{{score .Score}}</span>{{end}}{{else}}<span class="none">-</span>{{end}}</td><td class="num">{{.Duration}}</td><td class="num">{{.Steps}}</td><td class="msg">{{.Message}}</td><td>{{if .Link}}<a class="run" href="{{.Link}}">report</a>{{else}}<span class="none">{{.Note}}</span>{{end}}</td></tr>
{{end}}</tbody>
</table>
<p class="none mono">written by agentbox view at {{.Generated}}</p>
</body>
</html>
`))
