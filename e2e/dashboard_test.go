package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/eval"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
)

// dashRun writes a small trace (a few steps, one screenshot each) for the
// dashboard's tests.
func dashRun(t *testing.T, dir, app, agent, task string, outcome trace.Outcome, started time.Time, finish bool, opts map[string]string) {
	t.Helper()
	tw, err := trace.Create(dir, trace.Run{ID: filepath.Base(dir), Task: task, Started: started,
		App: trace.AppInfo{Target: app}, Agent: trace.AgentInfo{Name: agent, Options: opts}}, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		f := synthFrame(i, 160, 120)
		shot := tw.Screenshot(i, f)
		a := synthAction(i)
		tw.Record(trace.Record{Type: trace.TypeStep, Step: i, TMS: float64(i * 100),
			Observation: &trace.Observation{Screenshot: shot, FrameHash: trace.FrameHash(f.Hash), Width: 160, Height: 120}, Action: &a})
		tw.Record(trace.Record{Type: trace.TypeResult, Step: i, TMS: float64(i*100 + 5), Result: &action.Result{OK: true}, DurationMS: 5})
	}
	if !finish {
		deadline := time.Now().Add(30 * time.Second)
		for {
			ents, _ := os.ReadDir(filepath.Join(dir, trace.ScreenshotsDir))
			if len(ents) >= 3 || time.Now().After(deadline) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// A run of tens of seconds, not of the days since its synthetic start.
	took := time.Duration(20+len(task)%7*9+int(started.Unix()/3600%13)) * time.Second
	if err := tw.Finish(func(r *trace.Run) {
		r.Outcome, r.Reason = outcome, trace.ReasonDone
		r.Ended, r.DurationMS = started.Add(took), float64(took.Milliseconds())
	}); err != nil {
		t.Fatal(err)
	}
}

// dashFixture fills root with what the dashboard shows: runs of three
// apps over a week, a run still being written, a replay with its verdict,
// and a suite's evals over five days.
func dashFixture(t *testing.T, root string) {
	t.Helper()
	day := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	runs := filepath.Join(root, "agentbox-runs")
	tasks := []string{"Move the character right.", "Add 2 and 3.", "Make cell B2 bold.", "Open the file and save it as PDF."}
	apps := []string{"examples/mover", "xcalc", "libreoffice-calc", "mousepad"}
	agents := []string{"demo", "script add.yaml", "anthropic", "openai"}
	outcomes := []trace.Outcome{trace.Success, trace.Success, trace.Failure, trace.Success, trace.Error, trace.Interrupted}
	for i := range 14 {
		name := fmt.Sprintf("%s-%02d", strings.ReplaceAll(apps[i%4], "/", "-"), i)
		dashRun(t, filepath.Join(runs, name), apps[i%4], strings.Fields(agents[i%4])[0], tasks[i%4], outcomes[i%len(outcomes)], day.Add(time.Duration(i)*11*time.Hour), true, nil)
	}
	dashRun(t, filepath.Join(runs, "mover-live"), "examples/mover", "anthropic", "Collect every star.", "", day.AddDate(0, 0, 7), false, nil)
	src := filepath.Join(runs, "xcalc-01")
	rep := filepath.Join(runs, "replay-xcalc-01")
	dashRun(t, rep, "xcalc", "replay", tasks[1], trace.Success, day.AddDate(0, 0, 6), true, map[string]string{"source": "xcalc-01", "dir": src})
	os.WriteFile(filepath.Join(rep, "replay.json"), []byte(`{"verdict":"same","message":"every screen matched within tolerance","source":{"dir":"`+src+`","id":"xcalc-01"}}`), 0o644)
	evals := filepath.Join(root, "agentbox-evals")
	suiteTasks := []string{"bold-cell", "sum-column", "rename-sheet"}
	for d := range 5 {
		dir := filepath.Join(evals, fmt.Sprintf("2026112%d-office", 3+d))
		started := day.AddDate(0, 0, d)
		var eps []eval.Episode
		sum := eval.Summary{Format: eval.SummaryFormat, Version: eval.SummaryVersion, Suite: "office", RunID: filepath.Base(dir),
			Started: started, Ended: started.Add(4 * time.Minute), DurationMS: 240000}
		for ti, task := range suiteTasks {
			for n := 1; n <= 2; n++ {
				rel := fmt.Sprintf("%s/%03d", task, n)
				pass := (d+ti+n)%4 != 0 || d >= 3
				oc, cat := trace.Success, eval.Passed
				if !pass {
					oc, cat = trace.Failure, eval.Failed
				}
				dashRun(t, filepath.Join(dir, rel), "libreoffice-calc", "anthropic", task, oc, started, true, nil)
				eps = append(eps, eval.Episode{Task: task, N: n, Category: cat, Outcome: oc, Trace: rel})
				sum.Totals.Episodes++
				if pass {
					sum.Totals.Passed++
				} else {
					sum.Totals.Failed++
				}
			}
		}
		sum.Episodes = eps
		data, _ := json.Marshal(sum)
		if err := os.WriteFile(filepath.Join(dir, eval.SummaryFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDashboardInChromium indexes a fixture with the real binary, serves
// it with agentbox dashboard, and drives the pages in headless Chromium:
// the token is exchanged for a cookie, the runs, evals, running run, pass
// rates (chart and table), a run's report and the replays render, a bad
// filter is refused, and nothing is fetched from anywhere but the
// dashboard. The first page is shot to artifacts/dashboard.png (docs
// keeps it as docs/dashboard.png: make docs-dashboard).
func TestDashboardInChromium(t *testing.T) {
	requireChromium(t)
	root := t.TempDir()
	dashFixture(t, root)
	index := filepath.Join(root, "index.db")
	runs, evals := filepath.Join(root, "agentbox-runs"), filepath.Join(root, "agentbox-evals")
	if r := run0(t, "index", "--index", index, runs, evals); r.code != 0 {
		t.Fatalf("index: %s", r)
	}
	bin := testenv.Build(t, "./cmd/agentbox")
	cmd := exec.Command(bin, "dashboard", "--index", index, runs, evals)
	se, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt) // the dashboard we started, by its pid
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	sc := bufio.NewScanner(se)
	urlRe := regexp.MustCompile(`http://127\.0\.0\.1:\d+/\?token=[0-9a-f]+`)
	var url string
	for sc.Scan() {
		if m := urlRe.FindString(sc.Text()); m != "" {
			url = m
			break
		}
	}
	if url == "" {
		t.Fatal("dashboard printed no URL")
	}
	go io.Copy(io.Discard, se)
	base := strings.SplitN(url, "/?", 2)[0]

	b := newBrowser(t, 1400, 1000)
	b.do(t, "open", chromedp.Navigate(url))
	b.waitFor(t, `document.body && document.body.dataset.page === "runs"`)
	if loc := jsEval[string](t, b, `location.href`); strings.Contains(loc, "token") {
		t.Errorf("the token stays in the address: %s", loc)
	}
	if n := jsEval[int](t, b, `document.querySelectorAll("table.runs tbody tr").length`); n != 14+1+1+30 {
		t.Errorf("%d runs listed, want 46 (14 runs, a running one, a replay, 30 episodes)", n)
	}
	if n := jsEval[int](t, b, `document.querySelectorAll("table.evals tbody tr").length`); n != 5 {
		t.Errorf("%d evals listed, want 5", n)
	}
	if got := jsEval[string](t, b, `document.querySelector("h2.running").textContent`); got != "Running now (1)" {
		t.Errorf("running heading %q", got)
	}
	b.screenshot(t, filepath.Join(artifacts(t), "dashboard.png"))

	// A filter, as the form sends it (a GET of the same page).
	b.do(t, "filter", chromedp.Navigate(base+"/?outcome=failure&app=&agent="))
	b.waitFor(t, `document.body && document.body.dataset.page === "runs"`)
	if got := jsEval[string](t, b, `document.querySelector("select[name=outcome]").value`); got != "failure" {
		t.Errorf("the form shows outcome %q after filtering", got)
	}
	if got := jsEval[[]string](t, b, `Array.from(document.querySelectorAll("table.runs .badge")).map(e => e.textContent)`); len(got) == 0 || strings.Trim(strings.Join(got, ""), "failure") != "" {
		t.Errorf("after filtering on failure the runs are %v", got)
	}

	// Pass rates: a chart and a table per suite.
	b.do(t, "rates", chromedp.Navigate(base+"/rates"))
	b.waitFor(t, `document.body && document.body.dataset.page === "rates"`)
	if n := jsEval[int](t, b, `document.querySelectorAll(".chart svg polyline").length`); n != 4 {
		t.Errorf("%d lines in the chart, want 4 (the suite and its three tasks)", n)
	}
	b.screenshot(t, filepath.Join(artifacts(t), "dashboard-rates.png"))

	// A run's report, from its trace, with its screenshots.
	b.do(t, "run", chromedp.Navigate(base+"/"))
	b.waitFor(t, `document.body && document.body.dataset.page === "runs"`)
	href := jsEval[string](t, b, `document.querySelector("table.runs tbody tr:last-child a").getAttribute("href")`)
	b.do(t, "open run", chromedp.Navigate(base+href))
	b.waitFor(t, `document.querySelector("dl.facts") !== null`)
	b.open(t, base+href+"/report/")
	b.waitFor(t, selectedLoaded)

	// Replays and their verdicts.
	b.do(t, "replays", chromedp.Navigate(base+"/replays"))
	b.waitFor(t, `document.body && document.body.dataset.page === "replays"`)
	if got := jsEval[string](t, b, `document.querySelector("table.replays .badge").textContent`); got != "same" {
		t.Errorf("the replay's verdict %q, want same", got)
	}

	// A bad filter is refused, naming it.
	b.do(t, "bad filter", chromedp.Navigate(base+"/?since=last+week"))
	if got := jsEval[string](t, b, `document.body.textContent`); !strings.Contains(got, `since="last week"`) {
		t.Errorf("a bad date says %q", got)
	}

	for _, u := range b.requests() {
		if !strings.HasPrefix(u, base+"/") && !strings.HasPrefix(u, "data:") {
			t.Errorf("the dashboard fetched %s: it must need no network", u)
		}
	}
}
