package e2e

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/client"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/internal/xevents"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/serve/api"
	"github.com/codegirl-games/agentbox/trace"
)

// liveRun is agentbox run --live started in the background: the page's
// address, and the process's end.
type liveRun struct {
	url  string
	cmd  *exec.Cmd
	mu   sync.Mutex
	errb strings.Builder
	done chan error
}

func (r *liveRun) stderr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errb.String()
}

// startLive starts agentbox with args (run … --live) and waits for the
// live page's address on its stderr.
func startLive(t testing.TB, args ...string) *liveRun {
	t.Helper()
	bin := testenv.Build(t, "./cmd/agentbox")
	cmd := exec.Command(bin, args...)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	cmd.Stdout = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &liveRun{cmd: cmd, done: make(chan error, 1)}
	go func() {
		err := cmd.Wait()
		pw.Close()
		r.done <- err
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = cmd.Process.Signal(os.Interrupt) // the run we started, by its pid
			select {
			case <-r.done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
			}
		}
	})
	found := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`agentbox: live page: (http://127\.0\.0\.1:\d+/\?token=[0-9a-f]+)`)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			r.mu.Lock()
			r.errb.WriteString(sc.Text() + "\n")
			r.mu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case r.url = <-found:
	case err := <-r.done:
		t.Fatalf("agentbox ended before printing the live page's address (%v):\n%s", err, r.stderr())
	case <-time.After(2 * time.Minute):
		t.Fatalf("no live page address:\n%s", r.stderr())
	}
	return r
}

// wait waits for the run to end and returns its exit code.
func (r *liveRun) wait(t testing.TB) int {
	t.Helper()
	select {
	case err := <-r.done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(3 * time.Minute):
		t.Fatalf("the run did not end:\n%s", r.stderr())
	}
	return -1
}

// openLive opens the live page and waits for its first frame.
func openLive(t testing.TB, b *browser, url string) {
	t.Helper()
	b.do(t, "open "+url, chromedp.Navigate(url))
	b.waitFor(t, `document.body && document.body.dataset.ready === "1"`)
	b.waitFor(t, `Number(document.body.dataset.frames || 0) > 0`)
}

// screenPoint is where screen pixel (x, y) is on the page.
func screenPoint(t *testing.T, b *browser, x, y int) (float64, float64) {
	t.Helper()
	p := jsEval[[]float64](t, b, fmt.Sprintf(`(() => { const c = document.getElementById("screen"), r = c.getBoundingClientRect();
		return [r.left + (%d + 0.5) * r.width / c.width, r.top + (%d + 0.5) * r.height / c.height]; })()`, x, y))
	return p[0], p[1]
}

// clickButton clicks the page's button with the mouse (through the
// DevTools input domain, as chromedp's selector queries slow down on a
// page whose step list grows all the time).
func clickButton(t *testing.T, b *browser, id string) {
	t.Helper()
	b.waitFor(t, fmt.Sprintf(`!document.getElementById(%q).hidden`, id))
	p := jsEval[[]float64](t, b, fmt.Sprintf(`(() => { const r = document.getElementById(%q).getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()`, id))
	b.do(t, "click "+id, chromedp.MouseClickXY(p[0], p[1]))
}

// joinTyped joins each run of consecutive type actions into one: the live
// page sends typed text after a pause in the typing, so the same keys can
// come as one type action or, on a busy machine, as two.
func joinTyped(acts []action.Action) []action.Action {
	var out []action.Action
	for _, a := range acts {
		if n := len(out); n > 0 && a.Kind == action.Type && out[n-1].Kind == action.Type {
			out[n-1].Text += a.Text
			continue
		}
		out = append(out, a)
	}
	return out
}

// acted waits until the page has had n of its actions answered, and
// fails on any that was not performed.
func acted(t *testing.T, b *browser, n int) {
	t.Helper()
	b.waitFor(t, fmt.Sprintf(`agentboxLive.stats.acted.length >= %d`, n))
	if bad := jsEval[string](t, b, `JSON.stringify(agentboxLive.stats.acted.filter(a => !a.ok))`); bad != "[]" {
		t.Fatalf("actions the page sent failed: %s", bad)
	}
}

// TestLiveTakeoverInChromium: xev runs under a script that waits for a
// person to press Return in it. Headless Chromium opens the live page,
// sees frames arrive, takes control, clicks into xev and types text with
// a non-ASCII letter and Return; xev reports exactly those events; the
// person hands back and the script finishes. The trace says who did
// what, with the takeover and the hand-back; a screenshot of the page
// during the takeover is kept (CI artifact; docs/live.png).
func TestLiveTakeoverInChromium(t *testing.T) {
	testenv.Require(t, testenv.Docker(), testenv.Image(testenv.TestImage), testenv.Slow("a live run driven from Chromium"))
	requireChromium(t)
	dir := filepath.Join(t.TempDir(), "trace")
	play := filepath.Join(t.TempDir(), "wait-for-a-person.yaml")
	if err := os.WriteFile(play, []byte(`task: Wait for a person to type into xev and press Return.
steps:
  - wait_for: window
    title: Event Tester
  - wait_for: log
    contains: "keysym 0xff0d, Return"
    timeout_ms: 240000
  - expect: running
`), 0o644); err != nil {
		t.Fatal(err)
	}
	run := startLive(t, "run", "xev", "--image", testenv.TestImage, "--script", play, "--live", "--out", dir, "--timeout", "5m",
		"--", "-geometry", "560x400+20+20")
	b := newBrowser(t, 1400, 860)
	openLive(t, b, run.url)
	if got := jsEval[string](t, b, `location.pathname + location.search`); got != "/v/1" {
		t.Errorf("the page's address is %q: the token should be gone from it", got)
	}
	b.waitFor(t, `document.body.dataset.state === "running"`)
	// xev's window is up when the script's first wait is over: its steps
	// poll from then on.
	b.waitFor(t, `document.querySelectorAll("#steps li").length >= 2`)

	clickButton(t, b, "take")
	b.waitFor(t, `document.body.dataset.control === "1" && document.body.dataset.state === "paused"`)

	// Click into xev, type, press Return.
	const cx, cy = 300, 300
	x, y := screenPoint(t, b, cx, cy)
	b.do(t, "click", chromedp.MouseClickXY(x, y))
	acted(t, b, 1)
	b.do(t, "type", chromedp.KeyEvent("héllo"))
	acted(t, b, 2)
	// Tab and Enter: chromedp sends each key's text as a separate event
	// after its keydown, which the page must not type a second time.
	b.do(t, "Tab", chromedp.KeyEvent(kb.Tab))
	acted(t, b, 3)
	b.do(t, "Return", chromedp.KeyEvent(kb.Enter))
	acted(t, b, 4)
	b.waitFor(t, `document.getElementById("out").textContent.includes("keysym 0xff0d, Return")`)
	shot := filepath.Join(artifacts(t), "live-takeover.png")
	b.screenshot(t, shot)
	if os.Getenv("AGENTBOX_UPDATE_DOCS") != "" {
		data, err := os.ReadFile(shot)
		if err == nil {
			err = os.WriteFile(filepath.Join(testenv.RepoRoot(), "docs", "live.png"), data, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	clickButton(t, b, "back")
	if code := run.wait(t); code != 0 {
		t.Fatalf("the run ended with exit %d, want 0 (the script saw Return and finished):\n%s", code, run.stderr())
	}
	b.waitFor(t, `document.body.dataset.closed === "1"`)
	if got := jsEval[string](t, b, `document.getElementById("state").textContent`); got != "success" {
		t.Errorf("the page's state after the run: %q", got)
	}

	tr := openTrace(t, dir)
	if tr.Run.Outcome != trace.Success {
		t.Fatalf("outcome %s: %s", tr.Run.Outcome, tr.Run.Message)
	}
	var human []action.Action
	var takeAt, backAt float64
	for _, r := range tr.Records {
		switch {
		case r.Type == trace.TypeEvent && r.Event == trace.EventTakeover:
			takeAt = r.TMS
		case r.Type == trace.TypeEvent && r.Event == trace.EventHandBack:
			backAt = r.TMS
		case r.Type == trace.TypeStep && r.Actor == trace.ActorHuman:
			human = append(human, *r.Action)
			if r.TMS < takeAt || takeAt == 0 {
				t.Errorf("human step %d at %.0f ms, before the takeover at %.0f", r.Step, r.TMS, takeAt)
			}
		case r.Type == trace.TypeStep && r.Actor != trace.ActorScript:
			t.Errorf("step %d has actor %q", r.Step, r.Actor)
		case r.Type == trace.TypeStep && takeAt > 0 && backAt == 0 && len(human) > 0:
			t.Errorf("script step %d while the person had control", r.Step)
		}
	}
	want := []string{"click 300,300", `type "héllo"`, "key Tab", "key Return"}
	var gotActs []string
	for _, a := range joinTyped(human) {
		gotActs = append(gotActs, a.String())
	}
	if strings.Join(gotActs, "|") != strings.Join(want, "|") || backAt <= takeAt {
		t.Fatalf("the person's steps are %q (takeover at %.0f, hand-back at %.0f), want %q", gotActs, takeAt, backAt, want)
	}

	// What xev received: exactly the person's click and keys.
	out, err := os.ReadFile(filepath.Join(dir, trace.StdoutFile))
	if err != nil {
		t.Fatal(err)
	}
	evs := xevents.Filter(xevents.Parse(string(out)), "ButtonPress", "ButtonRelease", "KeyPress", "KeyRelease")
	var seen []string
	for _, e := range evs {
		switch e.Type {
		case "ButtonPress", "ButtonRelease":
			seen = append(seen, fmt.Sprintf("%s %d at %d,%d", e.Type, e.Button, e.RootX, e.RootY))
		default:
			seen = append(seen, e.Type+" "+e.KeysymName)
		}
	}
	wantEvs := []string{"ButtonPress 1 at 300,300", "ButtonRelease 1 at 300,300"}
	for _, k := range []string{"h", "eacute", "l", "l", "o", "Tab", "Return"} {
		wantEvs = append(wantEvs, "KeyPress "+k, "KeyRelease "+k)
	}
	if strings.Join(seen, "|") != strings.Join(wantEvs, "|") {
		t.Errorf("xev saw:\n  %s\nwant:\n  %s", strings.Join(seen, "\n  "), strings.Join(wantEvs, "\n  "))
	}
}

// TestLiveTakeoverWhileFrozen: an exec agent thinks for two seconds at
// every step under --freeze-while-thinking (Docker pauses the container,
// X server and all). A person takes control at the live page: the app is
// thawed for them, their click and Return reach xev, and they hand back.
// The agent's decision made meanwhile is not applied; its next
// observation carries the intervention, and it finishes on it.
func TestLiveTakeoverWhileFrozen(t *testing.T) {
	testenv.Require(t, testenv.Docker(), testenv.Image(testenv.TestImage), testenv.Programs("python3"), testenv.Slow("a frozen run taken over from Chromium"))
	requireChromium(t)
	dir := t.TempDir()
	appDir := filepath.Join(dir, "xev")
	if err := os.Mkdir(appDir, 0o755); err != nil {
		t.Fatal(err)
	}
	agentPy := filepath.Join(dir, "agent.py")
	for p, data := range map[string]string{
		filepath.Join(appDir, "agentbox.json"): `{"command":"xev","args":["-geometry","600x400+0+0"],"window_title":"Event Tester"}`,
		agentPy: `import json, sys, time
for line in sys.stdin:
    m = json.loads(line)
    if m.get("type") != "observation":
        continue
    if m.get("intervention"):
        a = {"action": "done", "success": True, "message": "a person acted"}
    else:
        time.sleep(2)  # thinking, while the app is frozen
        a = {"action": "wait", "ms": 100}
    print(json.dumps(a), flush=True)
`,
	} {
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "trace")
	run := startLive(t, "run", appDir, "--image", testenv.TestImage, "--agent", "exec", "--freeze-while-thinking", "--live", "--out", out, "--timeout", "5m",
		"--", "python3", agentPy)
	b := newBrowser(t, 1400, 860)
	openLive(t, b, run.url)
	b.waitFor(t, `document.body.dataset.state === "running"`)
	clickButton(t, b, "take")
	b.waitFor(t, `document.body.dataset.control === "1" && document.body.dataset.state === "paused"`)
	x, y := screenPoint(t, b, 300, 200)
	b.do(t, "click", chromedp.MouseClickXY(x, y))
	acted(t, b, 1)
	b.do(t, "Return", chromedp.KeyEvent(kb.Enter))
	acted(t, b, 2)
	b.waitFor(t, `document.getElementById("out").textContent.includes("keysym 0xff0d, Return")`)
	clickButton(t, b, "back")
	if code := run.wait(t); code != 0 {
		t.Fatalf("the run ended with exit %d, want 0 (the agent finishes on the intervention):\n%s", code, run.stderr())
	}
	tr := openTrace(t, out)
	if tr.Run.Outcome != trace.Success || tr.Run.Message != "a person acted" {
		t.Fatalf("outcome %s: %q", tr.Run.Outcome, tr.Run.Message)
	}
	var human []string
	var told *observe.Intervention
	for _, st := range tr.Steps {
		if st.Actor == trace.ActorHuman {
			human = append(human, st.Action.String())
		}
		if st.Observation != nil && st.Observation.Intervention != nil {
			told = st.Observation.Intervention
		}
	}
	if strings.Join(human, "|") != "click 300,200|key Return" || told == nil {
		t.Fatalf("the person's steps %q; the agent told of them: %+v", human, told)
	}
	data, err := os.ReadFile(filepath.Join(out, trace.StdoutFile))
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, e := range xevents.Filter(xevents.Parse(string(data)), "ButtonPress", "ButtonRelease", "KeyPress", "KeyRelease") {
		seen = append(seen, e.Type+" "+e.KeysymName)
	}
	if want := "ButtonPress |ButtonRelease |KeyPress Return|KeyRelease Return"; strings.Join(seen, "|") != want {
		t.Errorf("xev saw %q, want %q", strings.Join(seen, "|"), want)
	}
}

// TestLiveDemonstrationReplays: a run with no agent is a person's
// demonstration: from the live page they type a command into xterm and
// finish; agentbox replay plays the recording back and it matches.
func TestLiveDemonstrationReplays(t *testing.T) {
	testenv.Require(t, testenv.Docker(), testenv.Image(testenv.RuntimeImage), testenv.Slow("a person's demonstration and its replay"))
	requireChromium(t)
	dir := filepath.Join(t.TempDir(), "demo")
	run := startLive(t, "run", "xterm", "--agent", "human", "--live", "--out", dir, "--timeout", "5m",
		"--", "-geometry", "80x20+0+0", "-bg", "white", "-fg", "black", "+bc")
	b := newBrowser(t, 1400, 860)
	openLive(t, b, run.url)
	b.waitFor(t, `document.body.dataset.state === "paused"`)
	if got := jsEval[string](t, b, `document.getElementById("who").textContent`); !strings.Contains(got, "no agent") {
		t.Errorf("the page says %q", got)
	}
	clickButton(t, b, "take")
	b.waitFor(t, `document.body.dataset.control === "1"`)
	if jsEval[bool](t, b, `document.getElementById("back").hidden === false`) {
		t.Error("a run without an agent offers to hand control back")
	}
	x, y := screenPoint(t, b, 200, 100)
	b.do(t, "click", chromedp.MouseClickXY(x, y))
	acted(t, b, 1)
	b.do(t, "type", chromedp.KeyEvent("echo agentbox-démo"))
	acted(t, b, 2)
	framesBefore := jsEval[int](t, b, `agentboxLive.stats.frames`)
	b.do(t, "Return", chromedp.KeyEvent(kb.Enter))
	acted(t, b, 3)
	// The person finishes when the command's output is on the screen: a
	// new frame after the Return, and then the screen still for a second
	// (the replay looks at the recorded moment, so this is what it sees).
	b.waitFor(t, fmt.Sprintf(`agentboxLive.stats.frames > %d && Date.now() - agentboxLive.stats.painted > 1000`, framesBefore))
	clickButton(t, b, "finish")
	if code := run.wait(t); code != 0 {
		t.Fatalf("the demonstration ended with exit %d:\n%s", code, run.stderr())
	}
	tr := openTrace(t, dir)
	var acts []action.Action
	ret := -1 // the Return's step
	for i, st := range tr.Steps {
		if st.Actor != trace.ActorHuman {
			t.Errorf("step %d: actor %q", st.Step, st.Actor)
		}
		if st.Action != nil {
			acts = append(acts, *st.Action)
			if st.Action.Kind == action.Key && st.Action.Keys == "Return" {
				ret = i
			}
		}
	}
	var got []string
	for _, a := range joinTyped(acts) {
		got = append(got, a.String())
	}
	// The page sends what was typed as one type action after a pause of
	// 120 ms; on a busy machine the browser's key events can come further
	// apart, and the text then arrives as two type actions (joinTyped).
	want := []string{"click 200,100", `type "echo agentbox-démo"`, "key Return", "done"}
	if tr.Run.Agent.Name != "human" || strings.Join(got, "|") != strings.Join(want, "|") || ret < 0 {
		t.Fatalf("agent %q, steps %q, want %q", tr.Run.Agent.Name, got, want)
	}
	if tr.Final == nil || tr.Final.Observation.FrameHash == tr.Steps[ret].Observation.FrameHash {
		t.Fatalf("the command's output never showed on the screen")
	}
	// The replay plays the person's steps as it plays an agent's.
	r := run0(t, "replay", dir, "--out", filepath.Join(t.TempDir(), "replayed"))
	if r.code != 0 || !strings.Contains(r.stdout, "match") {
		t.Fatalf("replay of the demonstration:\n%s", r)
	}
}

// TestLiveEvalGrid: agentbox eval --live serves a grid of the suite's
// episodes. Two xev episodes wait for a person to press Return; headless
// Chromium sees both cards running with their thumbnails, opens each
// card's own view, takes control, clicks and presses Return, and hands
// back; each episode then finishes and the eval passes, every trace
// naming the person's steps.
func TestLiveEvalGrid(t *testing.T) {
	testenv.Require(t, testenv.Docker(), testenv.Image(testenv.TestImage), testenv.Slow("an eval watched and driven from Chromium"))
	requireChromium(t)
	dir := t.TempDir()
	appDir := filepath.Join(dir, "xev")
	if err := os.Mkdir(appDir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		filepath.Join(appDir, "agentbox.json"): `{"command":"xev","args":["-geometry","600x400+0+0"],"window_title":"Event Tester"}`,
		filepath.Join(dir, "wait.yaml"): `task: Wait for a person to press Return in xev.
steps:
  - wait_for: window
    title: Event Tester
  - wait_for: log
    contains: "keysym 0xff0d, Return"
    timeout_ms: 240000
  - expect: running
`,
		filepath.Join(dir, "suite.yaml"): "name: live\ntasks:\n  - name: xev\n    target: xev\n    script: wait.yaml\n    image: " + testenv.TestImage + "\n    episodes: 2\n    timeout: 5m\n",
	}
	for p, data := range files {
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "out")
	run := startLive(t, "eval", filepath.Join(dir, "suite.yaml"), "--parallel", "2", "--live", "--out", out)
	b := newBrowser(t, 1400, 860)
	b.do(t, "open "+run.url, chromedp.Navigate(run.url))
	b.waitFor(t, `document.body && document.body.dataset.ready === "1" && document.body.dataset.page === "grid"`)
	b.waitFor(t, `(() => { const c = document.querySelectorAll("#grid a.card");
		return c.length === 2 && [...c].every(e => e.dataset.state === "running" && e.dataset.thumb === "1"); })()`)
	b.screenshot(t, filepath.Join(artifacts(t), "live-grid.png"))
	hrefs := jsEval[[]string](t, b, `[...document.querySelectorAll("#grid a.card")].map(a => a.href)`)
	for i, href := range hrefs {
		// A browser each (one lives two minutes at most); the printed
		// address gives it the cookie.
		if i > 0 {
			b.close()
			b = newBrowser(t, 1400, 860)
			b.do(t, "open "+run.url, chromedp.Navigate(run.url))
			b.waitFor(t, `document.body && document.body.dataset.ready === "1"`)
		}
		openLive(t, b, href)
		b.waitFor(t, `document.body.dataset.state === "running"`)
		clickButton(t, b, "take")
		b.waitFor(t, `document.body.dataset.control === "1" && document.body.dataset.state === "paused"`)
		x, y := screenPoint(t, b, 300, 200)
		b.do(t, "click", chromedp.MouseClickXY(x, y))
		acted(t, b, 1)
		b.do(t, "Return", chromedp.KeyEvent(kb.Enter))
		acted(t, b, 2)
		clickButton(t, b, "back")
		b.waitFor(t, `document.body.dataset.state === "ended"`)
		if got := jsEval[string](t, b, `document.getElementById("state").textContent`); got != "success" {
			t.Errorf("episode %d (%s) ended %q", i+1, href, got)
		}
	}
	if code := run.wait(t); code != 0 {
		t.Fatalf("the eval ended with exit %d, want 0:\n%s", code, run.stderr())
	}
	var traces []string
	if err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == trace.StepsFile {
			traces = append(traces, filepath.Dir(p))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(traces) != 2 {
		t.Fatalf("traces %v, want 2", traces)
	}
	for _, d := range traces {
		var acts []string
		for _, st := range openTrace(t, d).Steps {
			if st.Actor == trace.ActorHuman {
				acts = append(acts, st.Action.String())
			}
		}
		if strings.Join(acts, "|") != "click 300,200|key Return" {
			t.Errorf("%s: the person's steps are %q", d, acts)
		}
	}
}

// TestLiveServe: agentbox serve --live shows each environment's episode;
// while a client of the API drives the mover, a person takes control in
// Chromium, holds Right, and hands back; the client then finishes. The
// episode's trace has the client's steps (remote) and the person's
// (human) between the takeover and the hand-back.
func TestLiveServe(t *testing.T) {
	testenv.Require(t, testenv.Docker(), testenv.Image(testenv.RuntimeImage), testenv.Slow("serve watched and driven from Chromium"))
	requireChromium(t)
	s := startServe(t, "--backend", "docker", "--app", "mover="+moverApp(t, ""), "--out", t.TempDir(), "--live")
	m := regexp.MustCompile(`agentbox: live page: (http://127\.0\.0\.1:\d+/\?token=[0-9a-f]+)`).FindStringSubmatch(s.log())
	if m == nil {
		t.Fatalf("no live page address:\n%s", s.log())
	}
	c, err := client.New(s.url, s.token)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	env, err := c.Create(ctx, api.CreateRequest{App: "mover", Task: "Move the character right."})
	if err != nil {
		t.Fatalf("%v\n%s", err, s.log())
	}
	_, info, err := env.Reset(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, _, _, err := env.Step(ctx, action.Action{Kind: action.Wait, MS: 100}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, 1400, 860)
	b.do(t, "open the grid", chromedp.Navigate(m[1]))
	b.waitFor(t, `document.body && document.body.dataset.page === "grid" && document.querySelectorAll("#grid a.card[data-state=running]").length === 1`)
	openLive(t, b, jsEval[string](t, b, `document.querySelector("#grid a.card").href`))
	b.waitFor(t, `document.body.dataset.state === "running"`)
	clickButton(t, b, "take")
	b.waitFor(t, `document.body.dataset.control === "1" && document.body.dataset.state === "paused"`)
	x, y := screenPoint(t, b, 320, 240)
	b.do(t, "click", chromedp.MouseClickXY(x, y))
	acted(t, b, 1)
	// Held: the page sends key_down and key_up.
	b.do(t, "hold Right", chromedp.KeyEvent(kb.ArrowRight))
	acted(t, b, 3)
	clickButton(t, b, "back")
	b.waitFor(t, `document.body.dataset.state === "running"`)
	// The client's decision was made on a screen from before the takeover:
	// not performed; it looks again and decides again.
	_, _, terminated, _, inf, err := env.Step(ctx, action.Action{Kind: action.Done, Message: "moved"})
	if err != nil || terminated || inf.Result == nil || inf.Result.OK || !strings.Contains(inf.Result.Error, "a person took control") {
		t.Fatalf("the client's first step after the takeover: %v, terminated %v, %+v", err, terminated, inf.Result)
	}
	if _, _, terminated, _, _, err := env.Step(ctx, action.Action{Kind: action.Done, Message: "moved"}); err != nil || !terminated {
		t.Fatalf("done: %v, terminated %v", err, terminated)
	}
	b.waitFor(t, `document.body.dataset.state === "ended"`)
	if code := s.stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0:\n%s", code, s.log())
	}
	tr := openTrace(t, info.Trace)
	var got []string
	for _, r := range tr.Records {
		switch {
		case r.Type == trace.TypeEvent && (r.Event == trace.EventTakeover || r.Event == trace.EventHandBack || r.Event == trace.EventNotApplied):
			got = append(got, r.Event)
		case r.Type == trace.TypeStep:
			got = append(got, r.Actor+" "+r.Action.String())
		}
	}
	want := []string{"remote wait 100ms", trace.EventTakeover, "human click 320,240", "human key_down Right", "human key_up Right", trace.EventHandBack, trace.EventNotApplied, "remote done"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the episode's trace:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// BenchmarkLive measures the live page (figures, not a pass/fail test):
//
//	go test -run '^$' -bench BenchmarkLive -benchtime 1x ./e2e/
//
// latency/BACKEND: the mover moves back and forth at 640×480 under a
// script while headless Chromium watches; for every frame of motion, the
// time from the screen change in the sandbox to the new frame painted in
// the page (requestAnimationFrame after drawing it), on the host's clock.
// The change happened between the start of the look that still saw the
// old screen and the end of the look that saw the new one, so each frame
// gives an upper bound (from the earlier) and a lower bound (from the
// later). cpu: the same run unwatched and watched, in turn, three times
// each, with the local backend (agentbox and the whole sandbox are one
// process tree: its rusage); Chromium's own CPU is not counted.
func BenchmarkLive(b *testing.B) {
	testenv.Require(b, testenv.Docker(), testenv.Image(testenv.RuntimeImage), testenv.Slow("figures of the live page"))
	requireChromium(b)
	mover := moverAppTB(b, "")
	play := filepath.Join(b.TempDir(), "back-and-forth.yaml")
	var steps strings.Builder
	steps.WriteString("task: Move back and forth.\nscreen: 640x480\nsteps:\n  - wait_for: log\n    contains: \"mover: ready\"\n")
	for range 4 {
		for _, k := range []string{"Right", "Left"} {
			fmt.Fprintf(&steps, "  - action: key_down\n    key: %s\n  - action: wait\n    ms: 1500\n  - action: key_up\n    key: %s\n", k, k)
		}
	}
	if err := os.WriteFile(play, []byte(steps.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, backend := range []string{"docker", "local"} {
		b.Run("latency/"+backend, func(b *testing.B) {
			if backend == "local" {
				testenv.Require(b, testenv.Programs("bwrap", "Xvfb", "openbox"))
			}
			for b.Loop() {
				run := startLive(b, "run", mover, "--script", play, "--live", "--backend", backend, "--out", filepath.Join(b.TempDir(), "watched"))
				br := newBrowser(b, 1400, 860)
				openLive(b, br, run.url)
				if code := run.wait(b); code != 0 {
					b.Fatalf("exit %d:\n%s", code, run.stderr())
				}
				type sample struct {
					Full         bool
					Bytes        int
					Enc, Look    float64
					Upper, Lower float64
				}
				raw := jsEval[[]sample](b, br, `agentboxLive.stats.lat`)
				var upper, lower, enc, look, bytes []float64
				for _, s := range raw {
					if s.Full {
						continue // the first frame: no change to time
					}
					upper, lower, enc, look, bytes = append(upper, s.Upper), append(lower, s.Lower), append(enc, s.Enc), append(look, s.Look), append(bytes, float64(s.Bytes))
				}
				if len(upper) < 20 {
					b.Fatalf("only %d frames of motion arrived", len(upper))
				}
				b.ReportMetric(pct(lower, 50), "lower-p50-ms")
				b.ReportMetric(pct(upper, 50), "upper-p50-ms")
				b.ReportMetric(pct(upper, 90), "upper-p90-ms")
				b.ReportMetric(float64(len(upper)), "frames")
				b.Logf("%s, 640x480, %d frames of motion: screen change → painted in Chromium between p50 %.1f ms and p50 %.1f ms (upper p90 %.1f ms); a look p50 %.2f ms, encoding p50 %.2f ms; %.0f bytes a frame (p50)",
					backend, len(upper), pct(lower, 50), pct(upper, 50), pct(upper, 90), pct(look, 50), pct(enc, 50), pct(bytes, 50))
			}
		})
	}
	b.Run("cpu/local", func(b *testing.B) {
		testenv.Require(b, testenv.Programs("bwrap", "Xvfb", "openbox"))
		for b.Loop() {
			var plain, watched, wall []float64
			for range 3 {
				cpu, _ := cpuOf(b, nil, "run", mover, "--script", play, "--backend", "local", "--out", filepath.Join(b.TempDir(), "plain"))
				plain = append(plain, cpu)
				br := newBrowser(b, 1400, 860) // each its own: a browser lives 2 minutes at most
				cpu, w := cpuOf(b, br, "run", mover, "--script", play, "--backend", "local", "--live", "--out", filepath.Join(b.TempDir(), "watched"))
				watched, wall = append(watched, cpu), append(wall, w)
				br.close()
			}
			extra := 100 * (pct(watched, 50)/pct(plain, 50) - 1)
			core := 100 * (pct(watched, 50) - pct(plain, 50)) / pct(wall, 50)
			b.ReportMetric(pct(plain, 50), "unwatched-cpu-s")
			b.ReportMetric(pct(watched, 50), "watched-cpu-s")
			b.ReportMetric(extra, "extra-cpu-%")
			b.ReportMetric(core, "extra-core-%")
			b.Logf("CPU of agentbox and its sandbox for a run of the mover in motion (local backend, %.1f s): unwatched %.2f s (median of %.2f), watched %.2f s (median of %.2f): %+.1f %%, %.1f %% of a core",
				pct(wall, 50), pct(plain, 50), plain, pct(watched, 50), watched, extra, core)
		}
	})
}

// cpuOf runs agentbox to the end, watched by b when b is set, and returns
// the CPU seconds it and everything it waited for used, and its wall time.
func cpuOf(t testing.TB, b *browser, args ...string) (cpu, wall float64) {
	t.Helper()
	t0 := time.Now()
	run := startLiveOrPlain(t, b != nil, args...)
	if b != nil {
		openLive(t, b, run.url)
	}
	if code := run.wait(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, run.stderr())
	}
	st := run.cmd.ProcessState
	return (st.UserTime() + st.SystemTime()).Seconds(), time.Since(t0).Seconds()
}

// startLiveOrPlain starts agentbox; a run without --live has no address
// to wait for.
func startLiveOrPlain(t testing.TB, live bool, args ...string) *liveRun {
	if live {
		return startLive(t, args...)
	}
	bin := testenv.Build(t, "./cmd/agentbox")
	cmd := exec.Command(bin, args...)
	r := &liveRun{cmd: cmd, done: make(chan error, 1)}
	cmd.Stderr = &lockedWriter{r: r}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- cmd.Wait() }()
	return r
}

type lockedWriter struct{ r *liveRun }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	return w.r.errb.Write(p)
}

// pct is the p-th percentile (nearest rank).
func pct(v []float64, p int) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(0, min(i, len(s)-1))]
}
