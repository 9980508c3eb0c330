package dashboard

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/eval"
	"github.com/codegirl-games/agentbox/replay"
	"github.com/codegirl-games/agentbox/store"
	"github.com/codegirl-games/agentbox/trace"
)

// spec is a synthetic run.
type spec struct {
	app, agent, task string
	outcome          trace.Outcome
	started          time.Time
	unfinished       bool
	options          map[string]string
}

// writeTrace writes a trace of three steps with the real trace.Writer.
func writeTrace(tb testing.TB, dir string, sp spec) {
	tb.Helper()
	w, err := trace.Create(dir, trace.Run{ID: filepath.Base(dir), Task: sp.task, Started: sp.started,
		App: trace.AppInfo{Target: sp.app}, Agent: trace.AgentInfo{Name: sp.agent, Options: sp.options}}, trace.Options{Encoders: 1})
	if err != nil {
		tb.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		a := action.Action{Kind: action.Wait}
		w.Record(trace.Record{Type: trace.TypeStep, Step: i, Actor: trace.ActorScript, Action: &a})
		w.Record(trace.Record{Type: trace.TypeResult, Step: i, Result: &action.Result{OK: true}, DurationMS: 1})
	}
	if sp.unfinished {
		return
	}
	if err := w.Finish(func(r *trace.Run) { r.Outcome, r.Reason = sp.outcome, trace.ReasonDone }); err != nil {
		tb.Fatal(err)
	}
}

var day0 = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// fixture is a store over a root holding runs, an eval of two days'
// episodes, a replay and a run still being written; and a run outside
// the root.
type fixture struct {
	root, outside string
	st            *store.Store
	srv           *Server
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	base := t.TempDir()
	f := &fixture{root: filepath.Join(base, "runs"), outside: filepath.Join(base, "elsewhere")}
	runs := []struct {
		name string
		sp   spec
	}{
		{"calc-ok", spec{app: "xcalc", agent: "demo", task: "add two numbers", outcome: trace.Success, started: day0}},
		{"calc-bad", spec{app: "xcalc", agent: "openai", task: "divide by zero", outcome: trace.Failure, started: day0.Add(time.Hour)}},
		{"mover-ok", spec{app: "examples/mover", agent: "demo", task: "move right", outcome: trace.Success, started: day0.AddDate(0, 0, 2)}},
		{"mover-live", spec{app: "examples/mover", agent: "demo", task: "still going", started: day0.AddDate(0, 0, 3), unfinished: true}},
		{"replay-1", spec{app: "xcalc", agent: "replay", task: "add two numbers", outcome: trace.Success, started: day0.AddDate(0, 0, 4),
			options: map[string]string{"source": "calc-ok", "dir": "calc-ok"}}},
	}
	for _, r := range runs {
		writeTrace(t, filepath.Join(f.root, r.name), r.sp)
	}
	os.WriteFile(filepath.Join(f.root, "replay-1", replay.SummaryFile), []byte(`{"verdict":"diverged","message":"step 2: 4.1% of the screen differs","source":{"dir":"calc-ok","id":"calc-ok"}}`), 0o644)
	// An eval: suite "sheets", two days, task a passes both, b once.
	for i, d := range []time.Time{day0, day0.AddDate(0, 0, 1)} {
		dir := filepath.Join(f.root, "eval-"+string(rune('1'+i)))
		var eps []eval.Episode
		for _, task := range []string{"a", "b"} {
			tdir := filepath.Join(dir, task, "001")
			writeTrace(t, tdir, spec{app: "sheets-app", agent: "demo", task: "task " + task, outcome: trace.Success, started: d})
			cat := eval.Passed
			if task == "b" && i == 0 {
				cat = eval.Failed
			}
			eps = append(eps, eval.Episode{Task: task, N: 1, Category: cat, Outcome: trace.Success, Trace: task + "/001"})
		}
		sum := eval.Summary{Format: eval.SummaryFormat, Version: eval.SummaryVersion, Suite: "sheets", RunID: filepath.Base(dir),
			Started: d, Ended: d.Add(time.Minute), DurationMS: 60000, Episodes: eps}
		for _, e := range eps {
			sum.Totals.Episodes++
			if e.Category == eval.Passed {
				sum.Totals.Passed++
			}
		}
		data, _ := json.Marshal(sum)
		if err := os.WriteFile(filepath.Join(dir, eval.SummaryFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeTrace(t, filepath.Join(f.outside, "secret"), spec{app: "xcalc", agent: "demo", task: "outside the roots", outcome: trace.Success, started: day0})
	st, err := store.Open(filepath.Join(base, "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Index(context.Background(), []string{f.root, f.outside}, false, func(w string) { t.Errorf("index: %s", w) }); err != nil {
		t.Fatal(err)
	}
	f.st = st
	f.srv, err = New(Options{Store: st, Roots: []string{f.root}, Now: func() time.Time { return day0.AddDate(0, 0, 5) }})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// get asks the handler with the token's cookie (unless hdr says other).
func (f *fixture) get(t *testing.T, target string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, target, nil)
	r.Host = "127.0.0.1:8472"
	r.AddCookie(&http.Cookie{Name: "agentbox_dashboard", Value: f.srv.Token()})
	for k, v := range hdr {
		if k == "Host" {
			r.Host = v
			continue
		}
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(w, r)
	return w
}

func (f *fixture) row(t *testing.T, name string) string {
	t.Helper()
	es, err := f.st.Query(context.Background(), store.Filter{Under: filepath.Join(f.root, name), Episodes: true})
	if err != nil || len(es) != 1 {
		// outside the root
		es, err = f.st.Query(context.Background(), store.Filter{Under: filepath.Join(f.outside, name), Episodes: true})
		if err != nil || len(es) != 1 {
			t.Fatalf("no run %s: %v %v", name, es, err)
		}
	}
	return fmtInt(es[0].Row)
}

func fmtInt(n int64) string { return strconv.FormatInt(n, 10) }

func TestAuth(t *testing.T) {
	f := newFixture(t)
	do := func(target string, cookie string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		r.Host = "localhost:8472"
		if cookie != "" {
			r.AddCookie(&http.Cookie{Name: "agentbox_dashboard", Value: cookie})
		}
		w := httptest.NewRecorder()
		f.srv.Handler().ServeHTTP(w, r)
		return w
	}
	if w := do("/", ""); w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "open the address agentbox dashboard printed") {
		t.Errorf("no cookie: %d %q", w.Code, w.Body)
	}
	if w := do("/", "0123"); w.Code != http.StatusUnauthorized {
		t.Errorf("a wrong cookie: %d", w.Code)
	}
	if w := do("/?token=nope", ""); w.Code != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d", w.Code)
	}
	w := do("/rates?token="+f.srv.Token()+"&app=sheets", "")
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/rates?app=sheets" {
		t.Fatalf("the token: %d to %q, want 303 to the page without it", w.Code, w.Header().Get("Location"))
	}
	c := w.Result().Cookies()
	if len(c) != 1 || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode || c[0].Value != f.srv.Token() {
		t.Errorf("cookie %+v, want HttpOnly SameSite=Strict with the token", c)
	}
	if w := do("/", f.srv.Token()); w.Code != http.StatusOK {
		t.Errorf("with the cookie: %d", w.Code)
	}
	// Every answer carries the policy: no script.
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
		t.Errorf("CSP %q", csp)
	}
}

func TestHostAndOriginRefused(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"rebound name", map[string]string{"Host": "evil.example:8472"}, http.StatusMisdirectedRequest},
		{"rebound name without port", map[string]string{"Host": "attacker.test"}, http.StatusMisdirectedRequest},
		{"another origin", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"another port", map[string]string{"Origin": "http://127.0.0.1:9999"}, http.StatusForbidden},
		{"cross-site fetch", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"same origin", map[string]string{"Origin": "http://127.0.0.1:8472", "Sec-Fetch-Site": "same-origin"}, http.StatusOK},
		{"localhost", map[string]string{"Host": "localhost:8472"}, http.StatusOK},
		{"[::1]", map[string]string{"Host": "[::1]:8472"}, http.StatusOK},
	} {
		for _, target := range []string{"/", "/export"} {
			w := f.get(t, target, c.hdr)
			if w.Code != c.want {
				t.Errorf("%s %s: %d, want %d (%s)", c.name, target, w.Code, c.want, w.Body)
			}
			if w.Header().Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("%s: a CORS header", c.name)
			}
		}
	}
}

func TestListenLoopbackOnly(t *testing.T) {
	f := newFixture(t)
	if err := f.srv.Listen("0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Errorf("listen on 0.0.0.0: %v", err)
	}
}

func TestPathsConfined(t *testing.T) {
	f := newFixture(t)
	run := f.row(t, "calc-ok")
	// A link inside the trace that points out of it.
	if err := os.Symlink("/etc/passwd", filepath.Join(f.root, "calc-ok", "link.txt")); err != nil {
		t.Fatal(err)
	}
	// A trace directory inside the root that is a link to one outside.
	if err := os.Symlink(filepath.Join(f.outside, "secret"), filepath.Join(f.root, "linked")); err != nil {
		t.Fatal(err)
	}
	if err := f.st.IndexTrace(context.Background(), filepath.Join(f.root, "linked")); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{
		"/run/" + run + "/report/../../../etc/passwd",
		"/run/" + run + "/report/..%2f..%2f..%2fetc%2fpasswd",
		"/run/" + run + "/report/%2e%2e/%2e%2e/index.db",
		"/run/" + run + "/report//etc/passwd",
		"/run/" + run + "/report/link.txt",
		"/run/" + run + "/report/nothing.png",
		"/run/" + f.row(t, "secret"),                      // indexed, but outside the roots
		"/run/" + f.row(t, "secret") + "/report/",         // its report
		"/export?run=" + f.row(t, "secret"),               // its export
		"/run/" + f.row(t, "linked") + "/report/run.json", // below the root only by a link
	} {
		w := f.get(t, target, nil)
		if w.Code == http.StatusOK || strings.Contains(w.Body.String(), "root:") || strings.Contains(w.Body.String(), "outside the roots\"") {
			t.Errorf("%s: %d %.200q, want it refused", target, w.Code, w.Body)
		}
	}
	// What is inside is served.
	if w := f.get(t, "/run/"+run+"/report/run.json", nil); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"add two numbers"`) {
		t.Errorf("run.json: %d", w.Code)
	}
	w := f.get(t, "/run/"+run+"/report/", nil)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "<!DOCTYPE html>") {
		t.Fatalf("report: %d %.300s", w.Code, w.Body)
	}
	if csp := w.Header().Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'none'; img-src 'self' data:") {
		t.Errorf("the report's CSP %q, want the report's own", csp)
	}
}

// runsListed counts the rows of the runs table.
func runsListed(body string) int {
	_, runs, _ := strings.Cut(body, `<table class="runs">`)
	runs, _, _ = strings.Cut(runs, "</table>")
	return strings.Count(runs, `<td class="task"`)
}

func TestFilters(t *testing.T) {
	f := newFixture(t)
	// The root holds 5 runs and 4 episodes.
	for _, c := range []struct {
		query string
		runs  int
		has   string
	}{
		{"", 9, "sheets"},
		{"app=calc", 3, ""},
		{"app=CALC&agent=openai", 1, "divide by zero"},
		{"outcome=failure", 1, "divide by zero"},
		{"outcome=incomplete", 1, "still going"},
		{"task=numbers", 2, ""},
		{"since=2026-11-22&until=2026-11-24", 2, ""},
		{"since=2026-11-22T00:00", 3, ""},
		{"until=2026-11-20T12:30:00Z", 3, ""},
		{"eval=" + filepath.Join(f.root, "eval-1"), 2, ""},
		{"eval=eval-2", 2, ""},
		{"task=nothing-like-it", 0, "No run matches."},
	} {
		w := f.get(t, "/?"+c.query, nil)
		if w.Code != http.StatusOK {
			t.Errorf("%s: %d %s", c.query, w.Code, w.Body)
			continue
		}
		if n := runsListed(w.Body.String()); n != c.runs {
			t.Errorf("%s: %d runs listed, want %d", c.query, n, c.runs)
		}
		if c.has != "" && !strings.Contains(w.Body.String(), c.has) {
			t.Errorf("%s: the page lacks %q", c.query, c.has)
		}
	}
	// Pages of 2.
	f.srv.o.PageSize = 2
	w := f.get(t, "/?page=5", nil)
	if n := runsListed(w.Body.String()); n != 1 || !strings.Contains(w.Body.String(), "9–9 of 9") {
		t.Errorf("page 5 of 2 each: %d runs", n)
	}
}

func TestBadInput(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		target string
		code   int
		names  string
	}{
		{"/?outcome=won", 400, `outcome="won"`},
		{"/?since=last+tuesday", 400, `since="last tuesday"`},
		{"/?until=2026-13-45", 400, `until="2026-13-45"`},
		{"/?page=0", 400, `page="0"`},
		{"/rates?since=soon", 400, `since="soon"`},
		{"/export?outcome=maybe", 400, `outcome="maybe"`},
		{"/export?run=x", 400, `run="x"`},
		{"/run/999999", 404, "no run 999999"},
		{"/run/abc", 404, `no run "abc"`},
		{"/run/999999/report/", 404, "no run 999999"},
		{"/eval/424242", 404, "no eval 424242"},
		{"/nowhere", 404, ""},
	} {
		w := f.get(t, c.target, nil)
		if w.Code != c.code || !strings.Contains(w.Body.String(), c.names) {
			t.Errorf("%s: %d %q, want %d naming %s", c.target, w.Code, w.Body, c.code, c.names)
		}
	}
}

func TestEmptyStore(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "index.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	root := t.TempDir()
	srv, err := New(Options{Store: st, Roots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{srv: srv, st: st}
	w := f.get(t, "/", nil)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "agentbox index "+root) || !strings.Contains(w.Body.String(), "is empty") {
		t.Errorf("empty store: %d %s", w.Code, w.Body)
	}
}

func TestRunningReplaysRates(t *testing.T) {
	f := newFixture(t)
	body := f.get(t, "/", nil).Body.String()
	if !strings.Contains(body, "Running now (1)") || !strings.Contains(body, "running · trace last written") {
		t.Errorf("the running run is not shown as running:\n%s", body)
	}
	w := f.get(t, "/replays", nil)
	if !strings.Contains(w.Body.String(), `<span class="badge diverged">diverged</span>`) || !strings.Contains(w.Body.String(), "4.1% of the screen differs") {
		t.Errorf("replays: %s", w.Body)
	}
	// The source run lists its replay.
	if b := f.get(t, "/run/"+f.row(t, "calc-ok"), nil).Body.String(); !strings.Contains(b, "Replays of this run") || !strings.Contains(b, "diverged") {
		t.Errorf("the run's page does not list its replay:\n%s", b)
	}
	// The eval links to its episodes.
	es, _ := f.st.Query(context.Background(), store.Filter{Under: filepath.Join(f.root, "eval-1")})
	var evalRow string
	for _, e := range es {
		if e.Kind == store.KindEval {
			evalRow = fmtInt(e.Row)
		}
	}
	if w := f.get(t, "/eval/"+evalRow, nil); w.Code != http.StatusSeeOther || !strings.Contains(w.Header().Get("Location"), "eval=") {
		t.Errorf("eval: %d %q", w.Code, w.Header().Get("Location"))
	}
	w = f.get(t, "/rates", nil)
	b := w.Body.String()
	for _, want := range []string{"<h2>sheets</h2>", "<svg", "<polyline", "2026-11-20</td><td><b>all tasks</b></td><td class=\"num\">1/2</td><td class=\"num\">50%", "2026-11-21</td><td><b>all tasks</b></td><td class=\"num\">2/2",
		"2026-11-20</td><td>b</td><td class=\"num\">0/1"} {
		if !strings.Contains(b, want) {
			t.Errorf("rates lack %q:\n%s", want, b)
		}
	}
	if strings.Contains(b, "style=") {
		t.Error("an inline style attribute: the page's policy blocks it")
	}
}

func TestExport(t *testing.T) {
	f := newFixture(t)
	os.Symlink("/etc/passwd", filepath.Join(f.root, "calc-ok", "link.txt"))
	w := f.get(t, "/export?app=calc&task=add", nil)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/gzip" {
		t.Fatalf("export: %d %s", w.Code, w.Body)
	}
	gz, err := gzip.NewReader(w.Body)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		_, name, _ := strings.Cut(h.Name, "/")
		files[name] = string(b)
	}
	csv := files[SummaryCSV]
	if lines := strings.Split(strings.TrimSpace(csv), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "kind,path,id") {
		t.Errorf("summary.csv:\n%s", csv)
	}
	for _, want := range []string{"runs/calc-ok/run.json", "runs/calc-ok/steps.jsonl", "runs/replay-1/replay.json"} {
		if _, ok := files[want]; !ok {
			t.Errorf("the export lacks %s (has %v)", want, keys(files))
		}
	}
	for name := range files {
		if strings.Contains(name, "link.txt") || strings.Contains(name, "secret") || strings.Contains(name, "mover") {
			t.Errorf("the export holds %s", name)
		}
	}
	if strings.Contains(csv, "divide") {
		t.Error("the export holds a run not selected")
	}
}

// TestExportOneRun: a run's page exports that run alone.
func TestExportOneRun(t *testing.T) {
	f := newFixture(t)
	w := f.get(t, "/export?run="+f.row(t, "calc-bad"), nil)
	if w.Code != http.StatusOK {
		t.Fatalf("export: %d %s", w.Code, w.Body)
	}
	gz, err := gzip.NewReader(w.Body)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		_, name, _ := strings.Cut(h.Name, "/")
		names = append(names, name)
	}
	for _, n := range names {
		if n != SummaryCSV && !strings.HasPrefix(n, "runs/calc-bad/") {
			t.Errorf("exporting calc-bad holds %s", n)
		}
	}
	if len(names) < 3 {
		t.Errorf("the export holds %v", names)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestCSVCell(t *testing.T) {
	for in, want := range map[string]string{"=cmd()": "'=cmd()", "+1": "'+1", "@x": "'@x", "plain": "plain", "": ""} {
		if got := cell(in); got != want {
			t.Errorf("cell(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRunningLinksAndCrashed: a running run that serves a live page links
// to its read-only address (trace.LiveFile), on the list and on its page;
// a run whose agentbox died (its writer's lock free) is listed as crashed
// and resumable, with no link; an address that is not a loopback http
// one is no link.
func TestRunningLinksAndCrashed(t *testing.T) {
	f := newFixture(t)
	live := filepath.Join(f.root, "mover-live")
	const addr = "http://127.0.0.1:41234/v/1?view=readonlytoken"
	if err := trace.WriteLive(live, addr); err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(f.root, "mover-crashed")
	os.MkdirAll(crashed, 0o755)
	for _, name := range []string{trace.RunFile, trace.StepsFile, trace.ActionsFile} {
		data, err := os.ReadFile(filepath.Join(live, name))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(crashed, name), data, 0o644)
	}
	if _, err := f.st.Index(context.Background(), []string{f.root}, false, func(w string) { t.Errorf("index: %s", w) }); err != nil {
		t.Fatal(err)
	}
	body := f.get(t, "/", nil).Body.String()
	link := `<a class="live" href="http://127.0.0.1:41234/v/1?view=readonlytoken" rel="noreferrer" target="_blank">live page</a>`
	if !strings.Contains(body, "Running now (2)") || !strings.Contains(body, link) || !strings.Contains(body, "crashed (resumable: agentbox resume)") {
		t.Errorf("the running list lacks the live link or the crashed run:\n%s", body)
	}
	if strings.Count(body, `class="live"`) != 1 {
		t.Errorf("want one live link (the crashed run has none):\n%s", body)
	}
	if b := f.get(t, "/run/"+f.row(t, "mover-live"), nil).Body.String(); !strings.Contains(b, link) {
		t.Errorf("the running run's page does not link to its live page:\n%s", b)
	}
	for _, bad := range []string{"javascript:alert(1)", "http://example.com/v/1", "https://127.0.0.1:1/"} {
		if err := trace.WriteLive(live, bad); err == nil {
			t.Errorf("WriteLive took %q", bad)
		}
		os.WriteFile(filepath.Join(live, trace.LiveFile), []byte(bad), 0o600)
		if b := f.get(t, "/", nil).Body.String(); strings.Contains(b, `class="live"`) {
			t.Errorf("a recorded %q is linked", bad)
		}
	}
}
