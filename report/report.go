// Package report turns a trace directory into one self-contained HTML page:
// the outcome and timings at the top, a timeline of every step (screenshot,
// the action drawn on it, the agent's message, the app's output aligned by
// time), keyboard navigation and a filmstrip.
//
// The page needs no network: its CSS, script and data are inline, and
// screenshots are referenced relative to the page (or embedded as data: URIs
// with Options.Embed), so it opens from file:// and from any static server.
// It stays light with thousands of steps: the data is one compact JSON
// object, rows are plain text, and images load only when they come into view.
package report

import (
	"bytes"
	"context"
	_ "embed" // the page's CSS and script
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/trace"
)

// FileName is the report's name inside a trace directory.
const FileName = "report.html"

// ReplayFile is the replay summary a replayed trace carries (written by
// agentbox replay); the report shows it when present.
const ReplayFile = "replay.json"

// Bounds that keep the page small whatever the trace holds.
const (
	maxLinesPerStep = 200       // app output lines shown per step
	maxLineRunes    = 500       // characters per line
	maxMessageRunes = 4000      // the agent's message
	maxMetaBytes    = 4000      // the decision's meta, as JSON
	maxLogBytes     = 64 << 10  // the tail of stdout.log and stderr.log embedded
	maxEmbedBytes   = 256 << 20 // all screenshots together, with Options.Embed
)

//go:embed assets/report.css
var css string

//go:embed assets/report.js
var script string

// Options tunes the page.
type Options struct {
	// Embed inlines the screenshots as data: URIs, so the page is one file
	// that can be mailed or attached to a CI run on its own.
	Embed bool
}

// Stats describes a written report.
type Stats struct {
	Path     string
	Bytes    int
	Steps    int
	Images   int
	Duration time.Duration
}

// Write renders the trace to path (normally DIR/report.html) through a
// temporary file and a rename. Screenshot references are relative to the
// directory of path.
func Write(ctx context.Context, tr *trace.Trace, path string, opts Options) (Stats, error) {
	t0 := time.Now()
	page, n, err := Render(ctx, tr, filepath.Dir(path), opts)
	if err != nil {
		return Stats{}, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".report-*.html")
	if err != nil {
		return Stats{}, fmt.Errorf("report: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(page); err != nil {
		tmp.Close()
		return Stats{}, fmt.Errorf("report: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return Stats{}, fmt.Errorf("report: write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return Stats{}, fmt.Errorf("report: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return Stats{}, fmt.Errorf("report: %w", err)
	}
	return Stats{Path: path, Bytes: len(page), Steps: len(tr.Steps), Images: n, Duration: time.Since(t0)}, nil
}

// Render builds the page; screenshot URLs are relative to baseDir. It
// returns the HTML and the number of distinct screenshots referenced.
func Render(ctx context.Context, tr *trace.Trace, baseDir string, opts Options) ([]byte, int, error) {
	d, err := build(ctx, tr, baseDir, opts)
	if err != nil {
		return nil, 0, err
	}
	data, err := json.Marshal(d) // escapes <, > and &: safe inside <script>
	if err != nil {
		return nil, 0, fmt.Errorf("report: encode: %w", err)
	}
	var b bytes.Buffer
	b.Grow(len(data) + len(css) + len(script) + 2048)
	title := fmt.Sprintf("%s · %s · agentbox", tr.Run.ID, outcomeLabel(tr))
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	// Nothing may be fetched from the network: only the trace's own files
	// and inline data.
	b.WriteString("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n")
	b.WriteString("<meta name=\"generator\" content=\"agentbox view\">\n")
	fmt.Fprintf(&b, "<title>%s</title>\n<style>\n%s</style>\n</head>\n", html.EscapeString(title), css)
	b.WriteString("<body>\n<noscript>This report needs JavaScript to show the steps; the trace files next to it are plain JSON and PNG.</noscript>\n")
	b.WriteString("<script id=\"data\" type=\"application/json\">")
	b.Write(data)
	b.WriteString("</script>\n<script>\n")
	b.WriteString(script)
	b.WriteString("</script>\n</body>\n</html>\n")
	return b.Bytes(), len(d.Images), nil
}

func outcomeLabel(tr *trace.Trace) string {
	if tr.Run.Outcome == "" {
		return "incomplete"
	}
	return string(tr.Run.Outcome)
}

// page is the JSON the script renders.
type page struct {
	Run        runData     `json:"run"`
	Images     []string    `json:"images"`
	Steps      []stepData  `json:"steps"`
	Incomplete []string    `json:"incomplete,omitempty"`
	Logs       []logData   `json:"logs"`
	Replay     *replayData `json:"replay,omitempty"`
	Generated  string      `json:"generated"`
}

type runData struct {
	ID         string             `json:"id"`
	Status     string             `json:"status"`
	Outcome    string             `json:"outcome,omitempty"`
	Reason     string             `json:"reason,omitempty"`
	Message    string             `json:"message,omitempty"`
	ExitCode   int                `json:"exit_code"`
	Task       string             `json:"task,omitempty"`
	Agent      string             `json:"agent"`
	App        string             `json:"app"`
	AppDigest  string             `json:"app_digest,omitempty"`
	Backend    string             `json:"backend,omitempty"`
	Image      string             `json:"image,omitempty"`
	ImageID    string             `json:"image_id,omitempty"`
	Screen     string             `json:"screen"`
	Agentbox   string             `json:"agentbox,omitempty"`
	Settle     string             `json:"settle,omitempty"`
	Started    string             `json:"started,omitempty"`
	DurationMS float64            `json:"duration_ms,omitempty"`
	Steps      int                `json:"steps"`
	Timings    map[string]float64 `json:"timings,omitempty"`
	AppExit    string             `json:"app_exit,omitempty"`
	// Confirm summarises how long input took to be confirmed per step.
	Confirm string `json:"confirm,omitempty"`
}

type stepData struct {
	N     int             `json:"n"`
	Final bool            `json:"final,omitempty"`
	T     float64         `json:"t"`             // when the screen was observed, ms since the run started
	Sent  float64         `json:"sent"`          // when the action was recorded (about to run)
	Lat   float64         `json:"lat,omitempty"` // decision latency
	Img   int             `json:"img"`           // index into Images; -1 when none
	W     int             `json:"w"`
	H     int             `json:"h"`
	Cur   [2]int          `json:"cur"`
	Run   bool            `json:"running"`
	Held  []string        `json:"held,omitempty"` // keys held down when the screen was observed
	A     *action.Action  `json:"a,omitempty"`
	S     string          `json:"s,omitempty"` // the action in words
	Inv   string          `json:"inv,omitempty"`
	Msg   string          `json:"msg,omitempty"`
	Meta  string          `json:"meta,omitempty"`
	R     *resultData     `json:"r,omitempty"`
	Out   []lineData      `json:"out,omitempty"`
	More  int             `json:"more,omitempty"` // lines not shown
	View  *trace.ViewInfo `json:"view,omitempty"`
	Rep   map[string]any  `json:"rep,omitempty"` // replay comparison of this step
	Hash  string          `json:"hash,omitempty"`
	Wins  []string        `json:"wins,omitempty"`
	Focus string          `json:"focus,omitempty"`
}

type resultData struct {
	OK    bool    `json:"ok"`
	Error string  `json:"error,omitempty"`
	MS    float64 `json:"ms,omitempty"`
	CMS   float64 `json:"cms,omitempty"` // of which confirming the input
}

// lineData is one line of app output ("o" stdout, "e" stderr) or an event
// ("v") at T ms since the run started.
type lineData struct {
	K string  `json:"k"`
	T float64 `json:"t"`
	X string  `json:"x"`
}

type logData struct {
	Name      string `json:"name"`
	URL       string `json:"url"`
	Bytes     int64  `json:"bytes"`
	Tail      string `json:"tail"`
	Truncated bool   `json:"truncated,omitempty"`
	Dropped   int64  `json:"dropped,omitempty"`
}

// replayData is the part of replay.json the page shows.
type replayData struct {
	Verdict string `json:"verdict"`
	Message string `json:"message"`
	Source  string `json:"source,omitempty"`
	Step    int    `json:"step,omitempty"`
	Diff    string `json:"diff,omitempty"`
	Compare string `json:"compare,omitempty"`

	steps map[int]map[string]any // comparisons by step
}

func build(ctx context.Context, tr *trace.Trace, baseDir string, opts Options) (*page, error) {
	run := tr.Run
	p := &page{Generated: time.Now().UTC().Format(time.RFC3339)}
	p.Run = runData{
		ID: run.ID, Status: run.Status, Outcome: string(run.Outcome), Reason: run.Reason,
		Message: run.Message, ExitCode: run.ExitCode, Task: run.Task,
		Agent:     describeAgent(run.Agent),
		App:       describeApp(run.App),
		AppDigest: run.App.Digest,
		Backend:   run.Env.Backend, Image: run.Env.Image, ImageID: run.Env.ImageID,
		Screen:   fmt.Sprintf("%d×%d×%d", run.Env.Screen.Width, run.Env.Screen.Height, run.Env.Screen.Depth),
		Agentbox: run.Agentbox, Steps: len(tr.Steps), Timings: run.Timings,
		DurationMS: run.DurationMS,
	}
	if run.Settings != nil {
		p.Run.Settle = run.Settings.Settle
	}
	if !run.Started.IsZero() {
		p.Run.Started = run.Started.Format(time.RFC3339)
	}
	if run.AppExit != nil {
		switch {
		case run.AppExit.Signal != "":
			p.Run.AppExit = "signal " + run.AppExit.Signal
		default:
			p.Run.AppExit = fmt.Sprintf("code %d", run.AppExit.Code)
		}
		if run.AppExit.OOM {
			p.Run.AppExit += " (OOM)"
		}
	}
	if tr.Incomplete {
		if run.Status != trace.StatusComplete {
			p.Incomplete = append(p.Incomplete, "the run was never finalised: agentbox was killed, or the run is still going; what is shown is what was on disk")
		}
		if tr.TornTail {
			p.Incomplete = append(p.Incomplete, "the last line of steps.jsonl was cut off mid-write and is not shown")
		}
	}
	if len(tr.Missing) > 0 {
		p.Incomplete = append(p.Incomplete, fmt.Sprintf("%d screenshot(s) referenced by steps are not on disk (first: %s)", len(tr.Missing), tr.Missing[0]))
	}

	// Screenshots: one URL per distinct file.
	imgIndex := map[string]int{}
	missing := map[string]bool{}
	for _, m := range tr.Missing {
		missing[m] = true
	}
	var embedded int
	imageOf := func(shot string) (int, error) {
		if shot == "" || missing[shot] {
			return -1, nil
		}
		if i, ok := imgIndex[shot]; ok {
			return i, nil
		}
		var u string
		if opts.Embed {
			data, err := os.ReadFile(filepath.Join(tr.Dir, filepath.FromSlash(shot)))
			if err != nil {
				return -1, nil // removed since Open: shown as missing
			}
			embedded += len(data)
			if embedded > maxEmbedBytes {
				return -1, fmt.Errorf("report: screenshots exceed %d MiB; write the report without embedding them", maxEmbedBytes>>20)
			}
			u = "data:image/png;base64," + base64.StdEncoding.EncodeToString(data)
		} else {
			u = relURL(baseDir, tr.Dir, shot)
		}
		imgIndex[shot] = len(p.Images)
		p.Images = append(p.Images, u)
		return imgIndex[shot], nil
	}

	// Every observation in time order: the steps, then the final one.
	obs := make([]*trace.Record, 0, len(tr.Steps)+1)
	for i := range tr.Steps {
		obs = append(obs, &tr.Steps[i].Record)
	}
	if tr.Final != nil {
		obs = append(obs, tr.Final)
	}
	p.Steps = make([]stepData, 0, len(obs))
	held := map[string]bool{}
	for i, r := range obs {
		if i%256 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		s := stepData{N: r.Step, Final: r.Type == trace.TypeFinal, T: r.TMS, Sent: r.TMS, Img: -1}
		if r.Decision != nil {
			s.Lat = r.Decision.LatencyMS
			s.T = r.TMS - r.Decision.LatencyMS
			s.Msg = clip(r.Decision.Message, maxMessageRunes)
			if len(r.Decision.Meta) > 0 {
				if b, err := json.Marshal(r.Decision.Meta); err == nil {
					s.Meta = clipBytes(string(b), maxMetaBytes)
				}
			}
		}
		if o := r.Observation; o != nil {
			idx, err := imageOf(o.Screenshot)
			if err != nil {
				return nil, err
			}
			s.Img, s.W, s.H = idx, o.Width, o.Height
			s.Cur = [2]int{o.Cursor.X, o.Cursor.Y}
			s.Run = o.Running
			s.View = o.View
			s.Hash = o.FrameHash
			for _, w := range o.Windows {
				s.Wins = append(s.Wins, w.Title)
				if w.Focused {
					s.Focus = w.Title
				}
			}
		}
		for k := range held {
			s.Held = append(s.Held, k)
		}
		sort.Strings(s.Held)
		if r.Action != nil {
			a := *r.Action
			s.A = &a
			s.S = a.String()
			s.Inv = r.Invalid
			if r.Invalid == "" {
				switch a.Kind {
				case action.KeyDown:
					held[a.Key] = true
				case action.KeyUp:
					delete(held, a.Key)
				}
			}
		}
		if i < len(tr.Steps) {
			if res := tr.Steps[i].Result; res != nil && res.Result != nil {
				s.R = &resultData{OK: res.Result.OK, Error: res.Result.Error, MS: res.DurationMS,
					CMS: float64(res.Result.ConfirmUS) / 1000}
			}
		}
		p.Steps = append(p.Steps, s)
	}
	p.Run.Confirm = confirmSummary(p.Steps)
	alignOutput(tr, p.Steps)
	if p.Replay = readReplay(tr.Dir, baseDir); p.Replay != nil {
		for i := range p.Steps {
			if c, ok := p.Replay.steps[p.Steps[i].N]; ok {
				p.Steps[i].Rep = c
			}
		}
	}

	for _, lg := range []struct {
		name    string
		bytes   int64
		dropped int64
	}{{trace.StdoutFile, run.Logs.StdoutBytes, run.Logs.StdoutDropped}, {trace.StderrFile, run.Logs.StderrBytes, run.Logs.StderrDropped}} {
		ld := logData{Name: lg.name, URL: relURL(baseDir, tr.Dir, lg.name), Bytes: lg.bytes, Dropped: lg.dropped}
		ld.Tail, ld.Truncated, ld.Bytes = readTail(filepath.Join(tr.Dir, lg.name), maxLogBytes)
		p.Logs = append(p.Logs, ld)
	}
	return p, nil
}

// confirmSummary describes the input confirmation times of the steps: the
// median and the slowest, so a run on a busy machine shows it at a glance.
func confirmSummary(steps []stepData) string {
	var ms []float64
	slowest, at := 0.0, 0
	for _, s := range steps {
		if s.R == nil || s.R.CMS <= 0 {
			continue
		}
		ms = append(ms, s.R.CMS)
		if s.R.CMS > slowest {
			slowest, at = s.R.CMS, s.N
		}
	}
	if len(ms) == 0 {
		return ""
	}
	sort.Float64s(ms)
	return fmt.Sprintf("median %s, slowest %s (step %d)", fmtMS(ms[len(ms)/2]), fmtMS(slowest), at)
}

func fmtMS(ms float64) string {
	if ms < 10 {
		return strconv.FormatFloat(ms, 'f', 2, 64) + " ms"
	}
	return strconv.FormatFloat(ms, 'f', 0, 64) + " ms"
}

// alignOutput puts every output line and event under the step during which
// it happened: from the step's observation up to the next one. Lines before
// the first observation go to the first step.
func alignOutput(tr *trace.Trace, steps []stepData) {
	if len(steps) == 0 {
		return
	}
	var lines []lineData
	for _, r := range tr.Records {
		switch {
		case r.Observation != nil:
			for _, l := range r.Observation.Output {
				k := "o"
				if l.Stream == action.Stderr {
					k = "e"
				}
				lines = append(lines, lineData{K: k, T: float64(l.T.Microseconds()) / 1000, X: clip(l.Text, maxLineRunes)})
			}
		case r.Type == trace.TypeEvent:
			lines = append(lines, lineData{K: "v", T: r.TMS, X: describeEvent(r)})
		}
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].T < lines[j].T })
	j := 0
	for _, l := range lines {
		for j+1 < len(steps) && steps[j+1].T <= l.T {
			j++
		}
		s := &steps[j]
		if len(s.Out) >= maxLinesPerStep {
			s.More++
			continue
		}
		s.Out = append(s.Out, l)
	}
}

func describeEvent(r trace.Record) string {
	switch r.Event {
	case "window_mapped", "window_unmapped", "window_title":
		return fmt.Sprintf("%s %q %vx%v at %v,%v", strings.ReplaceAll(r.Event, "_", " "), r.Data["title"], r.Data["width"], r.Data["height"], r.Data["x"], r.Data["y"])
	case "app_exited":
		if sig, _ := r.Data["signal"].(string); sig != "" {
			return "app exited: signal " + sig
		}
		return fmt.Sprintf("app exited: code %v", r.Data["code"])
	}
	if len(r.Data) == 0 {
		return r.Event
	}
	b, _ := json.Marshal(r.Data)
	return r.Event + " " + clipBytes(string(b), 300)
}

func describeAgent(a trace.AgentInfo) string {
	s := a.Name
	if len(a.Options) > 0 {
		keys := make([]string, 0, len(a.Options))
		for k := range a.Options {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var kv []string
		for _, k := range keys {
			kv = append(kv, k+"="+a.Options[k])
		}
		s += " (" + strings.Join(kv, ", ") + ")"
	}
	return s
}

func describeApp(a trace.AppInfo) string {
	s := a.Target
	if s == "" {
		s = a.Command
	}
	if len(a.Args) > 0 {
		s += " -- " + strings.Join(a.Args, " ")
	}
	return s
}

// relURL is the URL of a file inside the trace as seen from baseDir.
func relURL(baseDir, traceDir, rel string) string {
	p := filepath.Join(traceDir, filepath.FromSlash(rel))
	if r, err := filepath.Rel(absOr(baseDir), absOr(p)); err == nil {
		p = r
	}
	parts := strings.Split(filepath.ToSlash(p), "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return path.Join(parts...)
}

func absOr(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// readTail returns the last max bytes of a file (cut at a line start) and
// its size.
func readTail(p string, max int64) (string, bool, int64) {
	f, err := os.Open(p)
	if err != nil {
		return "", false, 0
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", false, 0
	}
	size := st.Size()
	off := max64(0, size-max)
	buf := make([]byte, size-off)
	n, _ := f.ReadAt(buf, off)
	buf = buf[:n]
	if off > 0 {
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			buf = buf[i+1:]
		}
	}
	return strings.ToValidUTF8(string(buf), "\uFFFD"), off > 0, size
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

func readReplay(dir, baseDir string) *replayData {
	data, err := os.ReadFile(filepath.Join(dir, ReplayFile))
	if err != nil {
		return nil
	}
	var r struct {
		Comparisons []struct {
			Step     int     `json:"step"`
			Final    bool    `json:"final"`
			Match    bool    `json:"match"`
			Pixels   int     `json:"pixels"`
			Compared int     `json:"compared"`
			Fraction float64 `json:"fraction"`
			Note     string  `json:"note"`
		} `json:"comparisons"`
		Verdict string `json:"verdict"`
		Message string `json:"message"`
		Source  struct {
			Dir string `json:"dir"`
			ID  string `json:"id"`
		} `json:"source"`
		Divergence *struct {
			Step    int    `json:"step"`
			Diff    string `json:"diff"`
			Compare string `json:"compare"`
		} `json:"divergence"`
	}
	if json.Unmarshal(data, &r) != nil || r.Verdict == "" {
		return nil
	}
	rd := &replayData{Verdict: r.Verdict, Message: clip(r.Message, maxMessageRunes), Source: r.Source.ID, steps: map[int]map[string]any{}}
	for _, c := range r.Comparisons {
		m := map[string]any{"match": c.Match, "note": c.Note}
		if c.Note == "" {
			m["pixels"], m["compared"], m["fraction"] = c.Pixels, c.Compared, c.Fraction
		}
		rd.steps[c.Step] = m
	}
	if r.Divergence != nil {
		rd.Step = r.Divergence.Step
		if r.Divergence.Diff != "" {
			rd.Diff = relURL(baseDir, dir, r.Divergence.Diff)
		}
		if r.Divergence.Compare != "" {
			rd.Compare = relURL(baseDir, dir, r.Divergence.Compare)
		}
	}
	return rd
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + " …[cut]"
}

func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + " …[cut]"
}
