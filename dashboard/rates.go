package dashboard

import (
	"fmt"
	"html"
	"html/template"
	"net/http"
	"sort"
	"strings"

	"github.com/codegirl-games/agentbox/store"
)

// palette colours a chart's lines: the suite's in the first, its tasks'
// in the rest (tasks beyond them are in the table only).
var palette = []string{"#0969da", "#1a7f37", "#c62828", "#9a6700", "#8250df", "#bf3989", "#1b7c83", "#57606a"}

type legend struct{ Name, Color string }

type rateRow struct {
	Day              string
	Task             string
	Passed, Episodes int
}

type suiteRates struct {
	Name   string
	Chart  template.HTML
	Legend []legend
	Rows   []rateRow
}

const dayLayout = "2006-01-02"

// series is one line of a chart: its pass rate by day.
type series struct {
	name  string
	color string
	by    map[string]store.Rate
}

// chart draws series over days (sorted) as an inline SVG: the y axis 0 to
// 100 %, one point a day. Attributes only (no style): the page's policy
// allows no inline style but its own.
func chart(days []string, lines []series) template.HTML {
	const w, h, left, right, top, bottom = 900, 220, 40, 30, 10, 40
	pw, ph := float64(w-left-right), float64(h-top-bottom)
	x := func(i int) float64 {
		if len(days) == 1 {
			return left + pw/2
		}
		return left + pw*float64(i)/float64(len(days)-1)
	}
	y := func(p float64) float64 { return top + ph*(1-p) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="100%%" viewBox="0 0 %d %d" role="img" aria-label="pass rate by day">`, w, h)
	for _, p := range []float64{0, .25, .5, .75, 1} {
		fmt.Fprintf(&b, `<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#8884" stroke-width="1"/>`, left, w-right, y(p), y(p))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%d%%</text>`, left-4, y(p)+4, int(p*100))
	}
	step := max(1, len(days)/8)
	for i, d := range days {
		if i%step == 0 || i == len(days)-1 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, x(i), h-bottom+16, html.EscapeString(d[5:]))
		}
	}
	for _, s := range lines {
		var pts []string
		for i, d := range days {
			r, ok := s.by[d]
			if !ok || r.Episodes == 0 {
				continue
			}
			p := float64(r.Passed) / float64(r.Episodes)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(p)))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s %s: %d/%d</title></circle>`,
				x(i), y(p), s.color, html.EscapeString(s.name), d, r.Passed, r.Episodes)
		}
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, s.color, strings.Join(pts, " "))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every text in it escaped above
}

// rates groups the store's pass rates by suite: a chart and a table each.
func rates(suites, tasks []store.Rate) []suiteRates {
	bySuite := map[string]*suiteRates{}
	var order []string
	days := map[string]map[string]bool{}
	lines := map[string][]series{}
	get := func(name string) *suiteRates {
		sr := bySuite[name]
		if sr == nil {
			sr = &suiteRates{Name: name}
			bySuite[name] = sr
			order = append(order, name)
			days[name] = map[string]bool{}
			lines[name] = []series{{name: "all tasks", color: palette[0], by: map[string]store.Rate{}}}
		}
		return sr
	}
	for _, r := range suites {
		sr := get(r.Suite)
		d := r.Day.Format(dayLayout)
		days[r.Suite][d] = true
		lines[r.Suite][0].by[d] = r
		sr.Rows = append(sr.Rows, rateRow{Day: d, Passed: r.Passed, Episodes: r.Episodes})
	}
	taskLine := map[[2]string]int{}
	for _, r := range tasks {
		sr := get(r.Suite)
		d := r.Day.Format(dayLayout)
		days[r.Suite][d] = true
		sr.Rows = append(sr.Rows, rateRow{Day: d, Task: r.Task, Passed: r.Passed, Episodes: r.Episodes})
		k := [2]string{r.Suite, r.Task}
		i, ok := taskLine[k]
		if !ok && len(lines[r.Suite]) < len(palette) {
			i = len(lines[r.Suite])
			taskLine[k] = i
			lines[r.Suite] = append(lines[r.Suite], series{name: r.Task, color: palette[i], by: map[string]store.Rate{}})
			ok = true
		}
		if ok {
			lines[r.Suite][i].by[d] = r
		}
	}
	sort.Strings(order)
	var out []suiteRates
	for _, name := range order {
		sr := bySuite[name]
		var ds []string
		for d := range days[name] {
			ds = append(ds, d)
		}
		sort.Strings(ds)
		sort.SliceStable(sr.Rows, func(i, j int) bool {
			if sr.Rows[i].Day != sr.Rows[j].Day {
				return sr.Rows[i].Day > sr.Rows[j].Day // newest first
			}
			return sr.Rows[i].Task < sr.Rows[j].Task
		})
		sr.Chart = chart(ds, lines[name])
		for _, l := range lines[name] {
			sr.Legend = append(sr.Legend, legend{l.name, l.color})
		}
		out = append(out, *sr)
	}
	return out
}

func (s *Server) handleRates(w http.ResponseWriter, r *http.Request) {
	f, sf, err := parseFilter(r.URL.Query(), s.o.Now())
	if err != nil {
		badRequest(w, err)
		return
	}
	sf.Roots = s.roots
	suites, tasks, err := s.o.Store.PassRates(r.Context(), sf)
	if err != nil {
		serverError(w, err)
		return
	}
	s.render(w, "rates", struct {
		filterPage
		Suites []suiteRates
	}{s.filterPage("Pass rates", "rates", "/rates", f), rates(suites, tasks)})
}
