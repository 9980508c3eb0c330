package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// ---- helpers shared by the view, replay and export tests ----

// requireChromium finds Debian's chromium (or another Chrome) or skips
// locally / fails under CI.
func requireChromium(t testing.TB) string {
	t.Helper()
	var path string
	testenv.Require(t, testenv.Probe("a headless Chromium (apt-get install chromium)", func(context.Context) error {
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(name); err == nil {
				path = p
				return nil
			}
		}
		return errors.New("none of chromium, chromium-browser, google-chrome is in PATH")
	}))
	return path
}

// artifacts is testenv.Artifacts.
func artifacts(t *testing.T) string { return testenv.Artifacts(t) }

// browser starts a fresh headless Chromium with its own profile and returns
// a tab. Every request the page makes is collected (to prove the report
// needs no network).
type browser struct {
	ctx   context.Context
	close func() // ends the browser before the test does
	mu    sync.Mutex
	urls  []string
}

func newBrowser(t testing.TB, w, h int) *browser {
	t.Helper()
	bin := requireChromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.UserDataDir(t.TempDir()),
		// Chromium keeps its singleton's socket in a directory of its own
		// under TMPDIR, which a killed browser (every test's end) leaves:
		// one of the test's, removed with it.
		chromedp.Env("TMPDIR=" + t.TempDir()),
		chromedp.WindowSize(w, h),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelT := chromedp.NewContext(actx)
	// A bound on the whole browser session, not a speed requirement: with
	// both cores saturated Chromium's frames come slowly, and scrolling a
	// 2000-step report through took past 2 minutes once (CI-like run with
	// a load average of 50).
	ctx, cancelD := context.WithTimeout(ctx, 6*time.Minute)
	stop := func() { cancelD(); cancelT(); cancelA() }
	t.Cleanup(stop)
	b := &browser{ctx: ctx, close: stop}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok && e.Request != nil {
			b.mu.Lock()
			b.urls = append(b.urls, e.Request.URL)
			b.mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *browser) requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.urls...)
}

func (b *browser) do(t testing.TB, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		t.Fatalf("chromium: %s: %v", what, err)
	}
}

func jsEval[T any](t testing.TB, b *browser, js string) T {
	t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("chromium: %s: %v", js, err)
	}
	return v
}

// open loads a page and waits until the report has rendered.
func (b *browser) open(t *testing.T, url string) time.Duration {
	t.Helper()
	t0 := time.Now()
	b.do(t, "open "+url, chromedp.Navigate(url))
	b.waitFor(t, `document.body && document.body.dataset.ready === "1"`)
	return time.Since(t0)
}

func (b *browser) waitFor(t testing.TB, js string) {
	t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("chromium: waiting for %s: %v", js, err)
	}
}

func (b *browser) key(t *testing.T, k string) {
	t.Helper()
	b.do(t, "key", chromedp.KeyEvent(k))
}

func (b *browser) screenshot(t *testing.T, path string) {
	t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("chromium: screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("report screenshot (CI artifact): %s", path)
}

// Loaded reports whether the selected step's screenshot has loaded.
const selectedLoaded = `(() => { const i = document.getElementById("shot"); return !!i && i.complete && i.naturalWidth > 0; })()`

// run0 runs the agentbox binary with arbitrary arguments (no --out added).
func run0(t *testing.T, args ...string) result {
	t.Helper()
	return runIn(t, "", args...)
}

// runIn runs the agentbox binary in a working directory.
func runIn(t *testing.T, wd string, args ...string) result {
	t.Helper()
	bin := testenv.Build(t, "./cmd/agentbox")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = wd
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := result{stdout: so.String(), stderr: se.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("agentbox %v: %v", args, err)
	}
	return r
}

// synthAction cycles through the drawable actions.
func synthAction(i int) action.Action {
	switch i % 8 {
	case 0:
		return action.Action{Kind: action.Click, X: action.Int(40 + i%200), Y: action.Int(60)}
	case 1:
		return action.Action{Kind: action.Drag, Path: action.Path{{X: 20, Y: 20}, {X: 120, Y: 90}, {X: 200, Y: 40}}}
	case 2:
		return action.Action{Kind: action.Scroll, X: action.Int(160), Y: action.Int(120), DY: action.Int(3)}
	case 3:
		return action.Action{Kind: action.Type, Text: fmt.Sprintf("hello %d ✓", i)}
	case 4:
		return action.Action{Kind: action.KeyDown, Key: "Right"}
	case 5:
		return action.Action{Kind: action.Wait, MS: 30}
	case 6:
		return action.Action{Kind: action.KeyUp, Key: "Right"}
	}
	return action.Action{Kind: action.Key, Keys: "ctrl+s"}
}

// synthFrame draws a distinct w×h frame for step i.
func synthFrame(i, w, h int) *observe.Frame {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	bg := color.RGBA{uint8(30 + i%40), uint8(30 + (i/40)%40), 60, 255}
	for p := 0; p < len(img.Pix); p += 4 {
		img.Pix[p], img.Pix[p+1], img.Pix[p+2], img.Pix[p+3] = bg.R, bg.G, bg.B, 255
	}
	x0 := (i * 7) % (w - 40)
	for y := h/2 - 20; y < h/2+20; y++ {
		for x := x0; x < x0+40; x++ {
			img.SetRGBA(x, y, color.RGBA{0, 255, 0, 255})
		}
	}
	return &observe.Frame{Width: w, Height: h, Pix: img.Pix, Hash: uint64(i)<<8 | 0x5a}
}

// synthTrace writes a trace of n steps with the real trace writer: distinct
// frames, every kind of drawable action, output lines and events. With
// complete false the run is left unfinished, as a killed agentbox leaves it.
func synthTrace(t testing.TB, dir string, n, w, h int, complete bool) {
	t.Helper()
	tw, err := trace.Create(dir, trace.Run{
		ID: fmt.Sprintf("synthetic-%d", n), Task: "synthetic trace", Agentbox: "test",
		Agent:    trace.AgentInfo{Name: "synthetic"},
		App:      trace.AppInfo{Target: "/nonexistent/synthetic-app", Command: "synthetic"},
		Env:      trace.EnvInfo{Backend: "docker", Image: "agentbox/runtime:bookworm", WM: true, Screen: observe.Screen{Width: w, Height: h, Depth: 24}},
		Settings: &trace.Settings{Settle: "none", MaxSteps: n + 1},
		Started:  time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC),
	}, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tms := 1000.0
	tw.Record(trace.Record{Type: trace.TypeEvent, TMS: 990, Event: "window_mapped", Data: map[string]any{"title": "synthetic", "x": 0, "y": 0, "width": w, "height": h}})
	win := []observe.Window{{ID: 1, Title: "synthetic", Width: w, Height: h, Focused: true}}
	for i := 1; i <= n; i++ {
		f := synthFrame(i, w, h)
		shot := tw.Screenshot(i, f)
		a := synthAction(i)
		out := []observe.LogLine{{Stream: observe.Stdout, Text: fmt.Sprintf("app: tick %d", i), T: time.Duration((tms - 5) * float64(time.Millisecond))}}
		if i%50 == 0 {
			out = append(out, observe.LogLine{Stream: observe.Stderr, Text: fmt.Sprintf("app: warning at %d", i), T: time.Duration((tms - 2) * float64(time.Millisecond))})
		}
		if err := tw.Record(trace.Record{Type: trace.TypeStep, Step: i, TMS: tms,
			Observation: &trace.Observation{Screenshot: shot, FrameHash: trace.FrameHash(f.Hash), Width: w, Height: h,
				Cursor: action.Point{X: w / 2, Y: h / 2}, Windows: win, Running: true, Output: out},
			Decision: &trace.Decision{LatencyMS: 0.5, Message: fmt.Sprintf("step %d: doing %s", i, a)},
			Action:   &a}); err != nil {
			t.Fatal(err)
		}
		tw.Record(trace.Record{Type: trace.TypeResult, Step: i, TMS: tms + 3, Result: &action.Result{OK: true}, DurationMS: 3})
		tms += 40
	}
	if !complete {
		// No Finish: run.json keeps saying "running". Wait for the PNGs
		// the way a finished run would, without finalising.
		deadline := time.Now().Add(30 * time.Second)
		for {
			ents, _ := os.ReadDir(filepath.Join(dir, trace.ScreenshotsDir))
			if len(ents) >= n || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		return
	}
	f := synthFrame(n, w, h)
	tw.Record(trace.Record{Type: trace.TypeFinal, Step: n + 1, TMS: tms,
		Observation: &trace.Observation{Screenshot: tw.Screenshot(n+1, f), FrameHash: trace.FrameHash(f.Hash), Width: w, Height: h, Windows: win, Running: true}})
	if err := tw.Finish(func(r *trace.Run) {
		r.Outcome, r.Reason, r.Message = trace.Success, trace.ReasonDone, fmt.Sprintf("all %d synthetic steps done", n)
		r.Ended = r.Started.Add(time.Duration(tms) * time.Millisecond)
		r.Timings = map[string]float64{"create": 600, "launch": 300, "loop": tms - 900, "teardown": 100}
	}); err != nil {
		t.Fatal(err)
	}
}

// recordMover records a run of the mover demo with the demo agent.
func recordMover(t *testing.T, appDir string) string {
	t.Helper()
	r := agentbox(t, "run", appDir, "--agent", "demo", "--task", "Move the character right.")
	if r.code != 0 {
		t.Fatalf("recording the mover run: want exit 0:\n%s", r)
	}
	return r.dir
}

// ---- view ----

// TestViewMoverInChromium opens the report of a real mover run in real
// headless Chromium: every step is there, the images load, the keyboard
// moves the selection, and nothing is fetched from the network.
func TestViewMoverInChromium(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	requireChromium(t)
	// Run from a folder holding examples/mover, as a user of this
	// repository does, so the report (and docs/report.png) names it so.
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "examples"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(moverApp(t, ""), filepath.Join(root, "examples", "mover")); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "trace")
	if r := runIn(t, root, "run", "examples/mover", "--agent", "demo", "--task", "Move the character right.", "--out", dir); r.code != 0 {
		t.Fatalf("run: %s", r)
	}
	tr := openTrace(t, dir)

	r := run0(t, "view", dir)
	if r.code != 0 {
		t.Fatalf("view: %s", r)
	}
	if !strings.Contains(r.stdout, filepath.Join(dir, "report.html")) {
		t.Errorf("view does not say where the report is:\n%s", r.stdout)
	}
	b := newBrowser(t, 1400, 900)
	took := b.open(t, "file://"+filepath.Join(dir, "report.html"))
	t.Logf("report of %d steps ready in Chromium after %v", len(tr.Steps), took)

	want := len(tr.Steps) + 1 // and the final screen
	if n := jsEval[int](t, b, `document.querySelectorAll("#steps .row").length`); n != want {
		t.Errorf("%d rows, want %d (every step and the final screen)", n, want)
	}
	if n := jsEval[int](t, b, `document.querySelectorAll("#film .thumb").length`); n != want {
		t.Errorf("%d thumbnails, want %d", n, want)
	}
	labels := jsEval[[]string](t, b, `Array.from(document.querySelectorAll("#steps .row .n")).map(e => e.textContent)`)
	for i, s := range tr.Steps {
		if i >= len(labels) || labels[i] != fmt.Sprintf("#%d", s.Step) {
			t.Errorf("row %d is %q, want #%d", i, labels, s.Step)
			break
		}
	}
	if got := jsEval[string](t, b, `document.querySelector(".badge").textContent`); got != "success" {
		t.Errorf("outcome badge %q, want success", got)
	}
	// The teardown's stop is not the app's exit; lines and events are
	// counted apart.
	if got := jsEval[string](t, b, `document.querySelector(".facts").textContent`); !strings.Contains(got, "app exit stopped by agentbox at the end of the run (") {
		t.Errorf("the facts say %q", got)
	}
	if got := jsEval[string](t, b, `Array.from(document.querySelectorAll("#steps .row .m")).map(e => e.textContent).join("|")`); strings.Contains(got, "line(s)") || !strings.Contains(got, "event") {
		t.Errorf("row summaries %q", got)
	}
	b.waitFor(t, selectedLoaded)
	if w := jsEval[int](t, b, `document.getElementById("shot").naturalWidth`); w != 640 {
		t.Errorf("screenshot is %d px wide, want 640", w)
	}
	// Every thumbnail is in view here, so every one loads.
	b.waitFor(t, `Array.from(document.querySelectorAll("#film img")).every(i => i.complete && i.naturalWidth > 0)`)

	// Keyboard navigation.
	for _, k := range []struct {
		key  string
		want string
	}{{kb.ArrowRight, "1"}, {kb.ArrowRight, "2"}, {kb.ArrowLeft, "1"}, {kb.End, fmt.Sprint(want - 1)}, {kb.Home, "0"}, {kb.ArrowRight, "1"}, {kb.ArrowRight, "2"}} {
		b.key(t, k.key)
		if got := jsEval[string](t, b, `document.body.dataset.selected`); got != k.want {
			t.Fatalf("after %q the selection is %s, want %s", k.key, got, k.want)
		}
	}
	if got := jsEval[string](t, b, `document.querySelector("#steps .row.sel .n").textContent`); got != "#3" {
		t.Errorf("selected row %q, want #3", got)
	}
	b.waitFor(t, selectedLoaded)
	if got := jsEval[string](t, b, `document.querySelector("#shot-box .caption").textContent`); !strings.Contains(got, "key_up Right") {
		t.Errorf("the action drawn on step 3 says %q, want key_up Right", got)
	}
	if got := jsEval[string](t, b, `document.querySelector("#shot-box .held").textContent`); got != "held: Right" {
		t.Errorf("held keys at step 3: %q", got)
	}
	// The app's output is aligned by time: "key Right down" is printed
	// after step 1 sent key_down, so it shows under step 1 (whose interval
	// runs to the next screen) or later, after the time key_down was sent,
	// and the page shows it when that step is selected.
	at := jsEval[int](t, b, `JSON.parse(document.getElementById("data").textContent).steps.findIndex(s => (s.out || []).some(l => l.x.includes("mover: key Right down")))`)
	after := jsEval[bool](t, b, `(() => { const d = JSON.parse(document.getElementById("data").textContent);
		const l = d.steps.flatMap(s => s.out || []).find(l => l.x.includes("mover: key Right down"));
		return !!l && l.t >= d.steps[0].sent; })()`)
	if at < 0 || !after {
		t.Errorf("the key-down line is under step index %d (after the key_down was sent: %v)", at, after)
	} else {
		b.do(t, "select", chromedp.Evaluate[chromedp.Void](fmt.Sprintf("agentboxReport.select(%d)", at)))
		if got := jsEval[string](t, b, `document.querySelector(".out").textContent`); !strings.Contains(got, "mover: key Right down") {
			t.Errorf("step index %d shows output %q, without the key-down line", at, got)
		}
		b.do(t, "select", chromedp.Evaluate[chromedp.Void]("agentboxReport.select(2)"))
	}
	b.waitFor(t, selectedLoaded)
	b.screenshot(t, filepath.Join(artifacts(t), "report-mover.png"))

	for _, u := range b.requests() {
		if !strings.HasPrefix(u, "file://") && !strings.HasPrefix(u, "data:") {
			t.Errorf("the report fetched %s: it must need no network", u)
		}
	}
}

// TestViewLargeTrace generates a 2,000-step trace and checks that the report
// stays small, opens quickly in Chromium, loads images lazily, and that the
// keyboard reaches the last step.
func TestViewLargeTrace(t *testing.T) {
	requireChromium(t)
	const n = 2000
	dir := filepath.Join(t.TempDir(), "big")
	t0 := time.Now()
	synthTrace(t, dir, n, 320, 240, true)
	t.Logf("synthetic trace of %d steps written in %v", n, time.Since(t0).Round(time.Millisecond))

	r := run0(t, "view", dir)
	if r.code != 0 {
		t.Fatalf("view: %s", r)
	}
	t.Logf("agentbox view: %s", strings.TrimSpace(r.stdout))
	fi, err := os.Stat(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	const maxBytes = 1536 << 10 // 768 bytes a step
	if fi.Size() > maxBytes {
		t.Errorf("report.html is %d bytes for %d steps, want ≤ %d", fi.Size(), n, maxBytes)
	}

	b := newBrowser(t, 1400, 900)
	took := b.open(t, "file://"+filepath.Join(dir, "report.html"))
	t.Logf("Chromium: %d-step report ready after %v (%d KiB)", n, took.Round(time.Millisecond), fi.Size()>>10)
	if got := jsEval[int](t, b, `agentboxReport.steps`); got != n+1 {
		t.Errorf("the page has %d steps, want %d", got, n+1)
	}
	// Light: rows are built as they come near the view.
	built := jsEval[int](t, b, `document.querySelectorAll("#steps .row").length`)
	t.Logf("%d of %d rows built after opening", built, n+1)
	if built == 0 || built > 400 {
		t.Errorf("%d rows built at once; want the ones near the view", built)
	}
	// Every step is there: scrolling the list through shows each one, in
	// order.
	all, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`(async () => {
		const list = document.getElementById("steps");
		for (let y = 0; y <= list.scrollHeight; y += list.clientHeight) {
			list.scrollTop = y;
			await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
		}
		return Array.from(list.querySelectorAll(".row .n")).map(e => e.textContent);
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != n+1 || all[0] != "#1" || all[n-1] != fmt.Sprintf("#%d", n) || all[n] != "final" {
		t.Errorf("scrolling through the list shows %d rows (first %v), want #1…#%d and final", len(all), all[:min(3, len(all))], n)
	}
	b.do(t, "scroll back", chromedp.Evaluate[chromedp.Void](`document.getElementById("steps").scrollTop = 0`))
	b.waitFor(t, selectedLoaded)
	// Lazy: only thumbnails near the filmstrip's view have a source.
	loaded := jsEval[int](t, b, `document.querySelectorAll("#film img[src]").length`)
	t.Logf("%d of %d thumbnails have a source after opening", loaded, n+1)
	if loaded == 0 || loaded > 100 {
		t.Errorf("%d thumbnails loaded at once; want a few (lazy loading)", loaded)
	}
	t.Logf("the page's script (parse %d steps, build what is in view, first layout) took %.0f ms", n+1, jsEval[float64](t, b, `agentboxReport.buildMS`))
	for i := 0; i < 20; i++ {
		b.key(t, kb.ArrowRight)
	}
	if got := jsEval[string](t, b, `document.body.dataset.selected`); got != "20" {
		t.Errorf("after 20 × → the selection is %s", got)
	}
	if got := jsEval[string](t, b, `location.hash`); got != "#step-21" {
		t.Errorf("after 20 × → the address is %q", got)
	}
	// Stepping through the page: select, render, scroll both lists, each
	// forced to lay out.
	perStep := jsEval[float64](t, b, `(() => { const t = performance.now();
		for (let i = 21; i < 221; i++) { agentboxReport.select(i); document.body.offsetHeight; }
		return (performance.now() - t) / 200; })()`)
	t.Logf("one step of navigation takes %.2f ms in the page (200 steps measured)", perStep)
	b.key(t, kb.End)
	if got := jsEval[string](t, b, `document.body.dataset.selected`); got != fmt.Sprint(n) {
		t.Errorf("End selects %s, want %d", got, n)
	}
	b.waitFor(t, selectedLoaded)
	b.waitFor(t, `(() => { const i = document.querySelector("#film .thumb.sel img"); return !!i && i.complete && i.naturalWidth > 0; })()`)
	if got := jsEval[string](t, b, `document.querySelector("#steps .row.sel .n").textContent`); got != "final" {
		t.Errorf("last row %q, want final", got)
	}
	// (The address is not checked here: after the 200 select() calls
	// above, Chromium throttles history updates.)
	b.key(t, kb.Home)
	if got := jsEval[string](t, b, `document.body.dataset.selected`); got != "0" {
		t.Errorf("Home selects %s, want 0 (the first step)", got)
	}
	b.screenshot(t, filepath.Join(artifacts(t), "report-2000-steps.png"))
}

// TestViewIncomplete shows a trace whose writer died: it is viewable, and
// the page says so prominently.
func TestViewIncomplete(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "killed")
	synthTrace(t, dir, 12, 160, 120, false)
	// A torn last line, as a kill mid-write leaves.
	f, err := os.OpenFile(filepath.Join(dir, trace.StepsFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"type":"step","step":13,"t_ms":`)
	f.Close()
	r := run0(t, "view", dir)
	if r.code != 0 || !strings.Contains(r.stderr, "incomplete") {
		t.Fatalf("view of an incomplete trace: want exit 0 and a word about it:\n%s", r)
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), `"incomplete":["the run was never finalised`) || !strings.Contains(string(page), "cut off mid-write") {
		t.Errorf("report does not say the trace is incomplete")
	}
	if _, err := exec.LookPath("chromium"); err != nil {
		return // the banner's text is checked above; Chromium tests are elsewhere
	}
	b := newBrowser(t, 1200, 800)
	b.open(t, "file://"+filepath.Join(dir, "report.html"))
	text := jsEval[string](t, b, `document.getElementById("incomplete").innerText`)
	if !strings.Contains(text, "Incomplete trace") {
		t.Errorf("banner: %q", text)
	}
	if got := jsEval[string](t, b, `document.querySelector(".badge").textContent`); got != "incomplete" {
		t.Errorf("badge %q, want incomplete", got)
	}
	if n := jsEval[int](t, b, `document.querySelectorAll("#steps .row").length`); n != 12 {
		t.Errorf("%d rows, want the 12 recorded steps", n)
	}
}

// TestViewServe serves a report on 127.0.0.1 and loads it, with its images,
// over HTTP in Chromium (what it refuses to serve: TestSecurityTraceServe).
func TestViewServe(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "served")
	synthTrace(t, dir, 5, 160, 120, true)
	bin := testenv.Build(t, "./cmd/agentbox")
	cmd := exec.Command(bin, "view", dir, "--serve", "--addr", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt) // the server we started, by its pid
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	sc := bufio.NewScanner(out)
	urlRe := regexp.MustCompile(`http://127\.0\.0\.1:\d+/report\.html`)
	var url string
	for sc.Scan() {
		if m := urlRe.FindString(sc.Text()); m != "" {
			url = m
			break
		}
	}
	if url == "" {
		t.Fatal("view --serve printed no URL")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	for _, c := range []struct {
		path string
		ct   string
	}{{"/report.html", "text/html"}, {"/screenshots/000001.png", "image/png"}, {"/stdout.log", "text/plain"}} {
		resp, err := http.Get(strings.TrimSuffix(url, "/report.html") + c.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.ct) {
			t.Errorf("GET %s: %d %s", c.path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	if _, err := exec.LookPath("chromium"); err != nil {
		return
	}
	b := newBrowser(t, 1200, 800)
	b.open(t, url)
	b.waitFor(t, selectedLoaded)
	b.waitFor(t, `Array.from(document.querySelectorAll("#film img")).every(i => i.complete && i.naturalWidth > 0)`)
}

// TestViewBadInput: anything that is not a trace of a known format is a
// usage error that names it (in-process).
func TestViewBadInput(t *testing.T) {
	tmp := t.TempDir()
	notTrace := filepath.Join(tmp, "empty")
	os.Mkdir(notTrace, 0o755)
	file := filepath.Join(tmp, "file.txt")
	os.WriteFile(file, []byte("hi"), 0o644)
	newer := filepath.Join(tmp, "newer")
	synthTrace(t, newer, 2, 64, 64, true)
	rewriteRun(t, newer, func(m map[string]any) { m["version"] = 99 })
	alien := filepath.Join(tmp, "alien")
	synthTrace(t, alien, 2, 64, 64, true)
	rewriteRun(t, alien, func(m map[string]any) { m["format"] = "something-else" })

	for _, verb := range [][]string{{"view"}, {"replay"}, {"export", "--video", filepath.Join(tmp, "x.gif")}} {
		for _, c := range []struct {
			name, dir, want string
		}{
			{"missing", filepath.Join(tmp, "nope"), "nope is not a trace directory"},
			{"file", file, "file.txt is not a trace directory"},
			{"no run.json", notTrace, "empty is not a trace directory"},
			{"newer format", newer, "version 99 is newer than this agentbox reads (1)"},
			{"other format", alien, `format "something-else" is not "agentbox-trace"`},
		} {
			t.Run(verb[0]+"/"+c.name, func(t *testing.T) {
				args := append([]string{verb[0], c.dir}, verb[1:]...)
				r := cliMain(t, args...)
				if r.code != 2 || !strings.Contains(r.stderr, c.want) {
					t.Errorf("want exit 2 and %q:\n%s", c.want, r)
				}
			})
		}
	}
}

func rewriteRun(t *testing.T, dir string, f func(map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, trace.RunFile)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	data, _ = json.Marshal(m)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
