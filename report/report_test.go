package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// write makes a small trace with the real writer.
func write(t *testing.T, n int, msg string, out []observe.LogLine) *trace.Trace {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	tw, err := trace.Create(dir, trace.Run{ID: "r1", Task: "task </script><b>"}, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		pix := make([]byte, 8*8*4)
		for p := range pix {
			pix[p] = byte(i)
		}
		f := &observe.Frame{Width: 8, Height: 8, Pix: pix, Hash: uint64(i)}
		a := action.Action{Kind: action.KeyDown, Key: "Right"}
		if i%2 == 0 {
			a = action.Action{Kind: action.KeyUp, Key: "Right"}
		}
		var lines []observe.LogLine
		if i == 1 {
			lines = out
		}
		tw.Record(trace.Record{Type: trace.TypeStep, Step: i, TMS: float64(100 * i),
			Observation: &trace.Observation{Screenshot: tw.Screenshot(i, f), FrameHash: trace.FrameHash(f.Hash), Width: 8, Height: 8, Running: true, Output: lines},
			Decision:    &trace.Decision{LatencyMS: 1, Message: msg}, Action: &a})
	}
	if err := tw.Finish(func(r *trace.Run) { r.Outcome = trace.Success }); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func pageData(t *testing.T, html []byte) page {
	t.Helper()
	m := regexp.MustCompile(`(?s)<script id="data" type="application/json">(.*?)</script>`).FindSubmatch(html)
	if m == nil {
		t.Fatal("no data in the page")
	}
	var p page
	if err := json.Unmarshal(m[1], &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRenderIsSafeAndSelfContained(t *testing.T) {
	tr := write(t, 3, "</script><script>alert(1)</script>", nil)
	html, imgs, err := Render(t.Context(), tr, tr.Dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if imgs != 3 {
		t.Errorf("%d images, want 3", imgs)
	}
	s := string(html)
	if strings.Count(s, "</script>") != 2 { // the data and the script, nothing injected
		t.Errorf("the agent's message closed a script element")
	}
	// The only URL is SVG's namespace, which is a name, not a fetch.
	for _, bad := range []string{"http://", "https://", "//cdn", "@import"} {
		if strings.Contains(strings.ReplaceAll(s, `"http://www.w3.org/2000/svg"`, ""), bad) {
			t.Errorf("the page refers to the network: %q", bad)
		}
	}
	p := pageData(t, html)
	if p.Images[0] != "screenshots/000001.png" || p.Steps[0].Msg != "</script><script>alert(1)</script>" {
		t.Errorf("images %q, message %q", p.Images, p.Steps[0].Msg)
	}
	// Held keys: down at step 1, up at step 2.
	if len(p.Steps[1].Held) != 1 || len(p.Steps[2].Held) != 0 {
		t.Errorf("held: %v %v", p.Steps[1].Held, p.Steps[2].Held)
	}
}

func TestRenderEmbedAndRelative(t *testing.T) {
	tr := write(t, 2, "", nil)
	html, _, err := Render(t.Context(), tr, tr.Dir, Options{Embed: true})
	if err != nil {
		t.Fatal(err)
	}
	if p := pageData(t, html); !strings.HasPrefix(p.Images[0], "data:image/png;base64,") {
		t.Errorf("embedded image %q", p.Images[0][:40])
	}
	// A report written elsewhere reaches the screenshots relatively.
	html, _, err = Render(t.Context(), tr, filepath.Join(tr.Dir, "..", "elsewhere"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p := pageData(t, html); p.Images[0] != "../run/screenshots/000001.png" {
		t.Errorf("relative image %q", p.Images[0])
	}
}

func TestAlignOutput(t *testing.T) {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	tr := write(t, 3, "", []observe.LogLine{
		{Stream: observe.Stdout, Text: "before", T: ms(50)},     // before step 1 → step 1
		{Stream: observe.Stdout, Text: "during 1", T: ms(150)},  // step 1 observed at 99
		{Stream: observe.Stderr, Text: "during 2", T: ms(250)},  // step 2 observed at 199
		{Stream: observe.Stdout, Text: "during 3", T: ms(1000)}, // after the last
	})
	p := pageData(t, mustRender(t, tr))
	got := [][]string{}
	for _, s := range p.Steps {
		var xs []string
		for _, l := range s.Out {
			xs = append(xs, l.K+":"+l.X)
		}
		got = append(got, xs)
	}
	want := fmt.Sprint([][]string{{"o:before", "o:during 1"}, {"e:during 2"}, {"o:during 3"}})
	if fmt.Sprint(got) != want {
		t.Errorf("aligned %v, want %v", got, want)
	}
}

func mustRender(t *testing.T, tr *trace.Trace) []byte {
	t.Helper()
	html, _, err := Render(t.Context(), tr, tr.Dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return html
}

func TestBounded(t *testing.T) {
	long := strings.Repeat("x", 5000)
	var lines []observe.LogLine
	for i := 0; i < 1000; i++ {
		lines = append(lines, observe.LogLine{Stream: observe.Stdout, Text: long, T: time.Millisecond})
	}
	tr := write(t, 1, long, lines)
	html := mustRender(t, tr)
	if len(html) > 600_000 {
		t.Errorf("page is %d bytes for one step with huge output", len(html))
	}
	p := pageData(t, html)
	if p.Steps[0].More != 1000-maxLinesPerStep || len(p.Steps[0].Out) != maxLinesPerStep {
		t.Errorf("lines kept %d, counted %d", len(p.Steps[0].Out), p.Steps[0].More)
	}
}

func TestWrite(t *testing.T) {
	tr := write(t, 2, "", nil)
	st, err := Write(t.Context(), tr, filepath.Join(tr.Dir, FileName), Options{})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(st.Path)
	if err != nil || int(fi.Size()) != st.Bytes || fi.Mode().Perm() != 0o644 {
		t.Errorf("stats %+v, file %v %v", st, fi, err)
	}
}

// TestStepSummaryAndTeardownExit: a step's summary counts lines of output
// and events apart, in the singular when there is one; an app stopped by
// agentbox's teardown is not shown as the app's own exit.
func TestStepSummaryAndTeardownExit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	tw, err := trace.Create(dir, trace.Run{ID: "r1"}, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &observe.Frame{Width: 8, Height: 8, Pix: make([]byte, 8*8*4), Hash: 1}
	out := []observe.LogLine{{Stream: observe.Stdout, Text: "a", T: 10 * time.Millisecond}, {Stream: observe.Stderr, Text: "b", T: 20 * time.Millisecond}}
	a := action.Action{Kind: action.Wait, MS: 10}
	tw.Record(trace.Record{Type: trace.TypeStep, Step: 1, TMS: 5, Observation: &trace.Observation{Screenshot: tw.Screenshot(1, f), Width: 8, Height: 8, Running: true, Output: out},
		Decision: &trace.Decision{}, Action: &a})
	tw.Record(trace.Record{Type: trace.TypeEvent, TMS: 30, Event: "window_mapped", Data: map[string]any{"title": "w"}})
	tw.Record(trace.Record{Type: trace.TypeStep, Step: 2, TMS: 100, Observation: &trace.Observation{Screenshot: tw.Screenshot(2, f), Width: 8, Height: 8, Running: true,
		Output: []observe.LogLine{{Stream: observe.Stdout, Text: "c", T: 110 * time.Millisecond}}}, Decision: &trace.Decision{}, Action: &a})
	tw.Record(trace.Record{Type: trace.TypeEvent, TMS: 120, Event: "app_exited", Data: map[string]any{"code": -1, "signal": "SIGTERM", "stopped": observe.StoppedAtEnd}})
	tw.Record(trace.Record{Type: trace.TypeEvent, TMS: 130, Event: "window_unmapped", Data: map[string]any{"title": "w"}})
	if err := tw.Finish(func(r *trace.Run) {
		r.Outcome = trace.Success
		r.AppExit = &observe.Exit{Code: -1, Signal: "SIGTERM", Stopped: observe.StoppedAtEnd}
	}); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := pageData(t, mustRender(t, tr))
	if got, want := p.Steps[0].Sum, "2 lines of output, 1 event"; got != want {
		t.Errorf("step 1 summary %q, want %q", got, want)
	}
	if got, want := p.Steps[1].Sum, "1 line of output, 2 events"; got != want {
		t.Errorf("step 2 summary %q, want %q", got, want)
	}
	if got, want := p.Run.AppExit, "stopped by agentbox at the end of the run (killed by signal SIGTERM)"; got != want {
		t.Errorf("app exit %q, want %q", got, want)
	}
	found := false
	for _, l := range p.Steps[1].Out {
		found = found || l.X == "app stopped by agentbox at the end of the run (killed by signal SIGTERM)"
	}
	if !found {
		t.Errorf("the exit event reads %+v", p.Steps[1].Out)
	}
}

// TestTreeBesideScreenshot: a step's accessibility tree is on the page
// as lines (names from the app as data, never markup), with its cut, its
// marks and the agent's marked screenshot; a tree file that is a link out
// of the trace is refused, not read.
func TestTreeBesideScreenshot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	tw, err := trace.Create(dir, trace.Run{ID: "r1"}, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &observe.Frame{Width: 8, Height: 8, Pix: make([]byte, 8*8*4), Hash: 1}
	tree := &observe.Tree{Apps: 1, Cut: []string{"nodes: 2 elements were read; 5 more were not (max_nodes)"}, Elements: []observe.Element{
		{ID: "1.2/root", Parent: -1, Role: "application", Name: "zenity"},
		{ID: "1.2/10", Parent: 0, Depth: 1, Role: "push button", Name: "</script><img src=x>", Bounds: &action.Rect{1, 2, 5, 6}, States: []string{"focused"}},
	}}
	file, err := tw.Tree(1, tree)
	if err != nil {
		t.Fatal(err)
	}
	marks := []observe.Mark{{N: 1, ID: "1.2/10", Role: "push button", Name: "OK", Bounds: action.Rect{1, 2, 5, 6}}}
	marked := tw.Marked(1, observe.DrawMarks(f, marks))
	a := action.Action{Kind: action.Click, Mark: 1, X: action.Int(3), Y: action.Int(4)}
	tw.Record(trace.Record{Type: trace.TypeStep, Step: 1, TMS: 100,
		Observation: &trace.Observation{Screenshot: tw.Screenshot(1, f), Width: 8, Height: 8, Running: true,
			Tree: &trace.TreeInfo{File: file, Elements: 2, Apps: 1, ElapsedMS: 4.5, Cut: tree.Cut}, Marks: marks, MarkedScreenshot: marked},
		Decision: &trace.Decision{LatencyMS: 1}, Action: &a})
	tw.Record(trace.Record{Type: trace.TypeStep, Step: 2, TMS: 200,
		Observation: &trace.Observation{Screenshot: tw.Screenshot(2, f), Width: 8, Height: 8, Running: true,
			Tree: &trace.TreeInfo{File: "../../etc/passwd", Elements: 1}},
		Decision: &trace.Decision{LatencyMS: 1}, Action: &action.Action{Kind: action.Done}})
	if err := tw.Finish(func(r *trace.Run) { r.Outcome = trace.Success }); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	html, _, err := Render(t.Context(), tr, tr.Dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(html), "</script>") != 2 {
		t.Errorf("a name from the app closed a script element")
	}
	p := pageData(t, html)
	td := p.Steps[0].Tree
	if td == nil || td.N != 2 || len(td.Lines) != 2 || !strings.Contains(td.Lines[1], `push button "</script><img src=x>" [1 2 5 6] (focused) · 1.2/10`) ||
		len(td.Cut) != 1 || td.URL != file || td.Marked < 0 || p.Images[td.Marked] != marked || len(td.Marks) != 1 {
		t.Fatalf("tree data %+v (images %v)", td, p.Images)
	}
	if td2 := p.Steps[1].Tree; td2 == nil || len(td2.Lines) != 0 || len(p.Refused) == 0 {
		t.Errorf("a tree path out of the trace: %+v, refused %v", td2, p.Refused)
	}
}

// TestHumanStepsAndTakeover: a person's steps say who chose them, the
// takeover and hand-back read as events in the output beside the steps,
// and the agent's step after the hand-back says what the person did.
func TestHumanStepsAndTakeover(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	tw, err := trace.Create(dir, trace.Run{ID: "r1"}, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &observe.Frame{Width: 8, Height: 8, Pix: make([]byte, 8*8*4), Hash: 1}
	step := func(n int, tms float64, actor string, a action.Action, iv *observe.Intervention) {
		tw.Record(trace.Record{Type: trace.TypeStep, Step: n, TMS: tms, Actor: actor,
			Observation: &trace.Observation{Screenshot: tw.Screenshot(n, f), Width: 8, Height: 8, Running: true, Intervention: iv},
			Decision:    &trace.Decision{}, Action: &a})
	}
	step(1, 10, trace.ActorAgent, action.Action{Kind: action.Wait, MS: 10}, nil)
	tw.Record(trace.Record{Type: trace.TypeEvent, TMS: 20, Event: trace.EventTakeover, Data: map[string]any{"by": "viewer 1"}})
	step(2, 30, trace.ActorHuman, action.Action{Kind: action.Type, Text: "hé"}, nil)
	tw.Record(trace.Record{Type: trace.TypeEvent, TMS: 40, Event: trace.EventHandBack, Data: map[string]any{"by": "viewer 1", "reason": "handed back", "steps": 1, "duration_ms": 20}})
	tw.Record(trace.Record{Type: trace.TypeEvent, TMS: 41, Event: trace.EventNotApplied, Data: map[string]any{"actor": "agent", "action": action.Action{Kind: action.Key, Keys: "Return"}}})
	step(3, 50, trace.ActorAgent, action.Action{Kind: action.Done}, &observe.Intervention{By: "viewer 1", Actions: []action.Action{{Kind: action.Type, Text: "hé"}}, DurationMS: 20})
	if err := tw.Finish(func(r *trace.Run) { r.Outcome = trace.Success }); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := pageData(t, mustRender(t, tr))
	if p.Steps[0].Who != "" || p.Steps[1].Who != trace.ActorHuman || p.Steps[2].Who != "" {
		t.Errorf("who: %q %q %q", p.Steps[0].Who, p.Steps[1].Who, p.Steps[2].Who)
	}
	if !strings.Contains(p.Steps[2].IV, `viewer 1 took control for 0s and performed 1 action: type "hé"`) {
		t.Errorf("step 3 says %q", p.Steps[2].IV)
	}
	var lines []string
	for _, s := range p.Steps {
		for _, l := range s.Out {
			lines = append(lines, l.X)
		}
	}
	got := strings.Join(lines, "|")
	for _, want := range []string{"viewer 1 took control", "viewer 1 handed control back (handed back) after 1 step in 20 ms",
		`the agent's action {"action":"key","keys":"Return"} was not performed`} {
		if !strings.Contains(got, want) {
			t.Errorf("events %q lack %q", got, want)
		}
	}
}

// TestForkedFrom: a fork's page names its parent and the step.
func TestForkedFrom(t *testing.T) {
	tr := write(t, 2, "", nil)
	tr.Run.ForkedFrom = &trace.ForkOrigin{Run: "parent-run", Env: "env-1", Step: 50}
	html, _, err := Render(t.Context(), tr, tr.Dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pageData(t, html).Run.ForkedFrom; got != "run parent-run (environment env-1), at step 50: steps 1–50 replay it" {
		t.Fatalf("forked_from: %q", got)
	}
}
