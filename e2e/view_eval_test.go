package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/eval"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// synthEval lays out an eval's directory as agentbox eval leaves it: a
// summary.json and a synthetic trace per episode that ran; plus, as input
// may hold, an episode whose path leaves the directory and one that never
// ran.
func synthEval(t *testing.T, dir string) eval.Summary {
	t.Helper()
	started := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	sum := eval.Summary{Format: eval.SummaryFormat, Version: eval.SummaryVersion, Suite: "nightly <b>", RunID: "20261129-120000-nightly-abcdef",
		Parallel: 2, Started: started, Ended: started.Add(9 * time.Second), DurationMS: 9000,
		Totals: eval.TaskSummary{Name: "total", Episodes: 5, Passed: 2, Failed: 1, Skipped: 2, Reasons: map[string]int{"check_failed": 1},
			PassRate: 0.4, MeanSteps: 5.3, MeanDurationMS: 2866},
		Tasks: []eval.TaskSummary{
			{Name: "mover-script", Episodes: 3, Passed: 2, Failed: 1, Reasons: map[string]int{"check_failed": 1}, PassRate: 2.0 / 3, MeanSteps: 5.3, MeanDurationMS: 2866},
			{Name: "mover-demo", Episodes: 2, Skipped: 2},
		},
		Episodes: []eval.Episode{
			{Task: "mover-script", N: 1, Category: eval.Passed, Outcome: trace.Success, Steps: 6, DurationMS: 3100, Trace: "mover-script/001"},
			{Task: "mover-script", N: 2, Category: eval.Failed, Outcome: trace.Failure, Reason: trace.ReasonCheckFailed, Message: "play.yaml:9: expect moved failed <script>alert(1)</script>", Steps: 4, DurationMS: 2500, Trace: "mover-script/002"},
			{Task: "mover-script", N: 3, Category: eval.Passed, Outcome: trace.Success, Steps: 6, DurationMS: 3000, Trace: "mover-script/003"},
			{Task: "mover-demo", N: 1, Category: eval.Skipped, Trace: "../outside"},
			{Task: "mover-demo", N: 2, Category: eval.Skipped, Trace: "mover-demo/002"},
		}}
	for _, ep := range sum.Episodes[:3] {
		synthTrace(t, filepath.Join(dir, filepath.FromSlash(ep.Trace)), ep.Steps, 160, 120, true)
	}
	// What "../outside" would reach: a trace beside the eval's directory.
	synthTrace(t, filepath.Join(filepath.Dir(dir), "outside"), 2, 160, 120, true)
	data, _ := json.Marshal(sum)
	if err := os.WriteFile(filepath.Join(dir, eval.SummaryFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return sum
}

// TestViewEvalInChromium: agentbox view EVALDIR writes one page for the
// whole eval — every task, every episode with its result, time and steps
// — linked to each run's report (written next to its trace), under the
// report's rules: its style allowed by hash, no script, nothing fetched,
// and no link that leaves the eval's directory. Opened in headless
// Chromium, its tables are there, the style applies (the CSP let it), and
// following a link opens that run's report.
func TestViewEvalInChromium(t *testing.T) {
	requireChromium(t)
	dir := filepath.Join(t.TempDir(), "eval")
	synthEval(t, dir)
	r := run0(t, "view", dir)
	if r.code != 0 || !strings.Contains(r.stdout, filepath.Join(dir, "report.html")) || !strings.Contains(r.stdout, "5 episodes, 3 run reports") {
		t.Fatalf("view EVALDIR: want exit 0 and where the page is:\n%s", r)
	}
	if !strings.Contains(r.stderr, "../outside") {
		t.Errorf("view does not say it left out the episode whose path leaves the eval:\n%s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "outside", "report.html")); err == nil {
		t.Errorf("view wrote a report outside the eval's directory")
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(page), "<script") {
		t.Errorf("the eval page holds a script (or an unescaped message)")
	}

	b := newBrowser(t, 1300, 800)
	b.do(t, "open", chromedp.Navigate("file://"+filepath.Join(dir, "report.html")))
	b.waitFor(t, `document.readyState === "complete"`)
	if got := jsEval[string](t, b, `document.querySelector("h1").textContent`); got != "eval nightly <b>: 2 of 5 episodes passed" {
		t.Errorf("heading %q", got)
	}
	if n := jsEval[int](t, b, `document.querySelectorAll("#tasks tbody tr").length`); n != 3 {
		t.Errorf("%d task rows, want 2 tasks and the total", n)
	}
	rows := jsEval[[]string](t, b, `Array.from(document.querySelectorAll("#episodes tbody tr")).map(r => Array.from(r.cells).map(c => c.textContent.trim()).join("|"))`)
	want := []string{
		"mover-script|1|passed|success|-|3.10 s|6||report", // "-": no grade
		"mover-script|2|failed|failure (check_failed)|-|2.50 s|4|play.yaml:9: expect moved failed <script>alert(1)</script>|report",
		"mover-script|3|passed|success|-|3.00 s|6||report",
	}
	if len(rows) != 5 {
		t.Fatalf("%d episode rows, want 5: %q", len(rows), rows)
	}
	for i, w := range want {
		if rows[i] != w {
			t.Errorf("episode row %d: %q, want %q", i, rows[i], w)
		}
	}
	if !strings.Contains(rows[3], "not read") || strings.Contains(rows[3], "report") || !strings.HasSuffix(rows[4], "no trace") {
		t.Errorf("the refused and the missing episodes: %q, %q", rows[3], rows[4])
	}
	// The style applies: the page's CSP allowed it by its hash.
	if bg := jsEval[string](t, b, `getComputedStyle(document.querySelector(".cat.passed")).backgroundColor`); bg != "rgb(26, 127, 55)" {
		t.Errorf("a passed badge's background is %q: the style did not apply", bg)
	}
	links := jsEval[[]string](t, b, `Array.from(document.querySelectorAll("a.run")).map(a => a.getAttribute("href"))`)
	if strings.Join(links, " ") != "mover-script/001/report.html mover-script/002/report.html mover-script/003/report.html" {
		t.Errorf("links %q", links)
	}
	b.screenshot(t, filepath.Join(artifacts(t), "report-eval.png"))
	// Follow the link as the browser resolves it.
	b.open(t, jsEval[string](t, b, `document.querySelector('a.run[href="mover-script/002/report.html"]').href`))
	if n := jsEval[int](t, b, `agentboxReport.steps`); n != 5 {
		t.Errorf("the linked run report has %d steps, want 4 and the final screen", n)
	}
	for _, u := range b.requests() {
		if !strings.HasPrefix(u, "file://") && !strings.HasPrefix(u, "data:") {
			t.Errorf("the pages fetched %s: they must need no network", u)
		}
	}
}

// TestViewSettleCapped: a screen taken after a stable settle gave up at
// its cap is flagged in the report: on its step, and counted at the top.
func TestViewSettleCapped(t *testing.T) {
	requireChromium(t)
	dir := filepath.Join(t.TempDir(), "run")
	tw, err := trace.Create(dir, trace.Run{ID: "capped", Settings: &trace.Settings{Settle: "stable:200ms"},
		Env: trace.EnvInfo{Screen: observe.Screen{Width: 160, Height: 120, Depth: 24}}}, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := action.Action{Kind: action.Wait, MS: 10}
	for i := 1; i <= 3; i++ {
		f := synthFrame(i, 160, 120)
		o := &trace.Observation{Screenshot: tw.Screenshot(i, f), FrameHash: trace.FrameHash(f.Hash), Width: 160, Height: 120, Running: true, SettleMS: 210}
		if i == 2 {
			o.SettleMS, o.SettleCapped = 2004, true
		}
		tw.Record(trace.Record{Type: trace.TypeStep, Step: i, TMS: float64(1000 * i), Observation: o, Decision: &trace.Decision{}, Action: &a})
	}
	if err := tw.Finish(func(r *trace.Run) { r.Outcome, r.Reason = trace.Success, trace.ReasonDone }); err != nil {
		t.Fatal(err)
	}
	if r := run0(t, "view", dir); r.code != 0 {
		t.Fatalf("view: %s", r)
	}
	b := newBrowser(t, 1200, 800)
	b.open(t, "file://"+filepath.Join(dir, "report.html"))
	if got := jsEval[string](t, b, `document.querySelector(".facts").textContent`); !strings.Contains(got, "settle stable:200ms · ⚠ 1 screen did not settle within the cap") {
		t.Errorf("the facts say %q", got)
	}
	for i, want := range []string{"settled in 210 ms", "did not settle: it was still changing when the settle gave up after 2.00 s"} {
		b.do(t, "select", chromedp.Evaluate[chromedp.Void]("agentboxReport.select("+itoa(i)+")"))
		if got := jsEval[string](t, b, `document.querySelector(".info").textContent`); !strings.Contains(got, want) {
			t.Errorf("step %d: %q, want %q", i+1, got, want)
		}
	}
}
