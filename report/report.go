// Package report turns a trace directory into one self-contained HTML page:
// the outcome and timings at the top, a timeline of every step (screenshot,
// the action drawn on it, the agent's message, the app's output aligned by
// time), keyboard navigation and a filmstrip.
//
// The page needs no network: its CSS, script and data are inline, and
// screenshots are referenced relative to the page (or embedded as data: URIs
// with Options.Embed), so it opens from file:// and from any static server.
//
// A trace is input: the page is built from files read through
// trace.OpenFile (confined to the trace directory, no symbolic links), links
// only to files of the trace by relative URLs, and its Content-Security-
// Policy runs only its own script and style (by hash: no 'unsafe-inline'),
// so nothing the trace holds can run or fetch anything.
// It stays light with thousands of steps: the data is one compact JSON
// object, rows are plain text, and images load only when they come into view.
package report

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed" // the page's CSS and script
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/atomicfile"
	"github.com/codegirl-games/agentbox/internal/plural"
	"github.com/codegirl-games/agentbox/internal/stagepath"
	"github.com/codegirl-games/agentbox/internal/textcut"
	"github.com/codegirl-games/agentbox/observe"
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
	maxTreeLines    = 400       // accessibility tree lines shown per step
	maxTreeFile     = 16 << 20  // one step's tree file read
	maxTreeBytes    = 32 << 20  // all trees' lines together
)

//go:embed assets/report.css
var css string

//go:embed assets/report.js
var script string

// DrawScript is the script that draws an action on a screenshot
// (agentboxDraw): the report's, and the live page's, so both draw alike.
//
//go:embed assets/draw.js
var DrawScript string

// The page's inline style and script exactly as written into it, and the
// Content-Security-Policy that allows those two and nothing else: no other
// script (no 'unsafe-inline', so no javascript: URL or injected element
// runs), no fetch but the trace's own images and data: images.
var (
	inlineStyle  = "\n" + css
	inlineScript = "\n" + DrawScript + script
	// CSP is the page's policy; view --serve sends it as a header too.
	CSP = "default-src 'none'; img-src 'self' data:; style-src " + sourceHash(inlineStyle) +
		"; script-src " + sourceHash(inlineScript) + "; base-uri 'none'; form-action 'none'"
)

func sourceHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(h[:]) + "'"
}

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
	// Files lists the trace's files the page links to (slash-separated,
	// relative to the trace directory): what a server of the report must
	// serve, and all it needs to.
	Files []string
	// Refused says which files the trace names were not read, and why
	// (outside the trace, a symbolic link, not a regular file).
	Refused []string
	// Page is the HTML written.
	Page []byte
}

// Write renders the trace to path (normally DIR/report.html) through a
// temporary file and a rename. Screenshot references are relative to the
// directory of path.
func Write(ctx context.Context, tr *trace.Trace, path string, opts Options) (Stats, error) {
	t0 := time.Now()
	page, d, err := render(ctx, tr, filepath.Dir(path), opts)
	if err != nil {
		return Stats{}, err
	}
	if err := atomicfile.WriteFile(path, page, 0o644); err != nil {
		return Stats{}, fmt.Errorf("report: write %s: %w", path, err)
	}
	return Stats{Path: path, Bytes: len(page), Steps: len(tr.Steps), Images: len(d.Images), Duration: time.Since(t0),
		Files: d.files, Refused: d.Refused, Page: page}, nil
}

// Render builds the page; screenshot URLs are relative to baseDir. It
// returns the HTML and the number of distinct screenshots referenced.
func Render(ctx context.Context, tr *trace.Trace, baseDir string, opts Options) ([]byte, int, error) {
	page, d, err := render(ctx, tr, baseDir, opts)
	if err != nil {
		return nil, 0, err
	}
	return page, len(d.Images), nil
}

func render(ctx context.Context, tr *trace.Trace, baseDir string, opts Options) ([]byte, *page, error) {
	d, err := build(ctx, tr, baseDir, opts)
	if err != nil {
		return nil, nil, err
	}
	data, err := json.Marshal(d) // escapes <, > and &: safe inside <script>
	if err != nil {
		return nil, nil, fmt.Errorf("report: encode: %w", err)
	}
	var b bytes.Buffer
	b.Grow(len(data) + len(css) + len(script) + 2048)
	title := fmt.Sprintf("%s · %s · agentbox", tr.Run.ID, outcomeLabel(tr))
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	// Nothing may be fetched from the network, and no script runs but the
	// page's own.
	fmt.Fprintf(&b, "<meta http-equiv=\"Content-Security-Policy\" content=\"%s\">\n", CSP)
	b.WriteString("<meta name=\"referrer\" content=\"no-referrer\">\n")
	b.WriteString("<meta name=\"generator\" content=\"agentbox view\">\n")
	fmt.Fprintf(&b, "<title>%s</title>\n<style>%s</style>\n</head>\n", html.EscapeString(title), inlineStyle)
	b.WriteString("<body>\n<noscript>This report needs JavaScript to show the steps; the trace files next to it are plain JSON and PNG.</noscript>\n")
	b.WriteString("<script id=\"data\" type=\"application/json\">")
	b.Write(data)
	b.WriteString("</script>\n<script>")
	b.WriteString(inlineScript)
	b.WriteString("</script>\n</body>\n</html>\n")
	return b.Bytes(), d, nil
}

func outcomeLabel(tr *trace.Trace) string {
	if tr.Run.Outcome == "" {
		return "incomplete"
	}
	return string(tr.Run.Outcome)
}

// page is the JSON the script renders.
type page struct {
	Run        runData    `json:"run"`
	Images     []string   `json:"images"`
	Steps      []stepData `json:"steps"`
	Incomplete []string   `json:"incomplete,omitempty"`
	// Resume says where this run resumed a crashed one, and of a crashed
	// run whether it can be, or was, resumed (agentbox resume).
	Resume  []string    `json:"resume,omitempty"`
	Logs    []logData   `json:"logs"`
	Replay  *replayData `json:"replay,omitempty"`
	Refused []string    `json:"refused,omitempty"`
	// Grade is the private grader's verdict (run.json's grade); the page
	// shows it as data, its details quoting the collected files.
	Grade *trace.Grade `json:"grade,omitempty"`
	// Files are the task's collected files (run.json's files, linked when
	// each is a plain file under the trace's files/); FilesRefused what
	// collection left out and why.
	Files        []fileData          `json:"files,omitempty"`
	FilesRefused []trace.RefusedFile `json:"files_refused,omitempty"`
	Generated    string              `json:"generated"`

	files []string // the trace's files the page links to
}

type runData struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	Outcome   string `json:"outcome,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Message   string `json:"message,omitempty"`
	ExitCode  int    `json:"exit_code"`
	Task      string `json:"task,omitempty"`
	Agent     string `json:"agent"`
	App       string `json:"app"`
	AppDigest string `json:"app_digest,omitempty"`
	Backend   string `json:"backend,omitempty"`
	Image     string `json:"image,omitempty"`
	ImageID   string `json:"image_id,omitempty"`
	Sandbox   string `json:"sandbox,omitempty"` // the named sandbox (run --name)
	Screen    string `json:"screen"`
	Agentbox  string `json:"agentbox,omitempty"`
	Settle    string `json:"settle,omitempty"`
	// ForkedFrom names the run this one was forked from and the step
	// ("run R (environment E), at step N"); empty when it was not.
	ForkedFrom string `json:"forked_from,omitempty"`
	// SettleCapped says how many screens were taken after a stable
	// settle gave up at its cap ("3 screens did not settle within 2s").
	SettleCapped string             `json:"settle_capped,omitempty"`
	Started      string             `json:"started,omitempty"`
	DurationMS   float64            `json:"duration_ms,omitempty"`
	Steps        int                `json:"steps"`
	Timings      map[string]float64 `json:"timings,omitempty"`
	AppExit      string             `json:"app_exit,omitempty"`
	// Confirm summarises how long input took to be confirmed per step.
	Confirm string `json:"confirm,omitempty"`
}

type stepData struct {
	N     int             `json:"n"`
	Final bool            `json:"final,omitempty"`
	T     float64         `json:"t"`               // when the screen was observed, ms since the run started
	Sent  float64         `json:"sent"`            // when the action was recorded (about to run)
	Lat   float64         `json:"lat,omitempty"`   // decision latency
	Queue float64         `json:"queue,omitempty"` // of it, waiting for a turn at the model (eval --model-concurrency)
	Img   int             `json:"img"`             // index into Images; -1 when none
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
	Sum   string          `json:"sum,omitempty"`  // "3 lines of output, 1 event"
	View  *trace.ViewInfo `json:"view,omitempty"`
	Rep   map[string]any  `json:"rep,omitempty"` // replay comparison of this step
	Hash  string          `json:"hash,omitempty"`
	Wins  []string        `json:"wins,omitempty"`
	Focus string          `json:"focus,omitempty"`
	Stl   float64         `json:"stl,omitempty"` // the settle before the screenshot, ms
	Cap   bool            `json:"cap,omitempty"` // it hit its cap: the screen was still changing
	Tree  *treeData       `json:"tree,omitempty"`
	// TP is where an action on a target went (the element's centre, found
	// in the live tree at the moment of the action).
	TP *[2]int `json:"tp,omitempty"`
	// Who chose the action, when not an agent: script, remote, mcp, human.
	Who string `json:"who,omitempty"`
	// IV says what a person did while they had control before this
	// observation (the live page's takeover).
	IV string `json:"iv,omitempty"`
}

// treeData is the accessibility tree read with a step's observation, as
// lines of text (one element each, indented by depth), and its marks.
type treeData struct {
	N     int      `json:"n"`
	MS    float64  `json:"ms"`
	Lines []string `json:"l,omitempty"`
	More  int      `json:"more,omitempty"` // elements not shown
	Note  string   `json:"note,omitempty"`
	Cut   []string `json:"cut,omitempty"`
	Err   string   `json:"err,omitempty"`
	URL   string   `json:"url,omitempty"` // the tree's JSON file
	// Marked is the index in Images of the agent's marked screenshot
	// (-1: none); Marks lists the marks.
	Marked int      `json:"mi"`
	Marks  []string `json:"marks,omitempty"`
}

type resultData struct {
	OK    bool    `json:"ok"`
	Error string  `json:"error,omitempty"`
	MS    float64 `json:"ms,omitempty"`
	CMS   float64 `json:"cms,omitempty"` // of which confirming the input
}

// lineData is one line of app output ("o" stdout, "e" stderr), an event
// ("v") or the trusted observer's event ("a") at T ms since the run
// started.
type lineData struct {
	K string  `json:"k"`
	T float64 `json:"t"`
	X string  `json:"x"`
}

// fileData is one collected file.
type fileData struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	URL    string `json:"url,omitempty"` // absent when it is not a plain file in the trace
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
		Backend:   run.Env.Backend, Image: run.Env.Image, ImageID: run.Env.ImageID, Sandbox: run.Env.Sandbox,
		Screen:   fmt.Sprintf("%d×%d×%d", run.Env.Screen.Width, run.Env.Screen.Height, run.Env.Screen.Depth),
		Agentbox: run.Agentbox, Steps: len(tr.Steps), Timings: run.Timings,
		DurationMS: run.DurationMS,
	}
	if run.Settings != nil {
		p.Run.Settle = run.Settings.Settle
	}
	if f := run.ForkedFrom; f != nil {
		p.Run.ForkedFrom = fmt.Sprintf("run %s", f.Run)
		if f.Env != "" {
			p.Run.ForkedFrom += fmt.Sprintf(" (environment %s)", f.Env)
		}
		p.Run.ForkedFrom += fmt.Sprintf(", at step %d: steps 1–%d replay it", f.Step, f.Step)
	}
	if !run.Started.IsZero() {
		p.Run.Started = run.Started.Format(time.RFC3339)
	}
	if run.AppExit != nil {
		p.Run.AppExit = run.AppExit.String()
	}
	p.Grade = run.Grade
	if tr.Incomplete {
		if run.Status != trace.StatusComplete {
			p.Incomplete = append(p.Incomplete, "the run was never finalised: agentbox was killed, or the run is still going; what is shown is what was on disk")
		}
		if tr.TornTail {
			p.Incomplete = append(p.Incomplete, "the last line of steps.jsonl was cut off mid-write and is not shown")
		}
	}
	p.Resume = resumeNotes(tr)
	if len(tr.Missing) > 0 {
		p.Incomplete = append(p.Incomplete, fmt.Sprintf("%s referenced by steps %s not on disk (first: %s)", plural.S(len(tr.Missing), "screenshot"), isAre(len(tr.Missing)), tr.Missing[0]))
	}

	p.Refused = append(p.Refused, tr.Refused...)

	// Screenshots: one URL per distinct file, each a plain file inside the
	// trace (trace.Open checked them; OpenFile checks again as it reads).
	imgIndex := map[string]int{}
	var embedded int
	imageOf := func(shot string) (int, error) {
		if !tr.HasScreenshot(shot) {
			return -1, nil
		}
		if i, ok := imgIndex[shot]; ok {
			return i, nil
		}
		var u string
		if opts.Embed {
			data, err := readEmbedded(tr.Dir, shot, maxEmbedBytes-embedded)
			switch {
			case errors.Is(err, trace.ErrRefused):
				p.Refused = append(p.Refused, err.Error())
				return -1, nil
			case errors.Is(err, fs.ErrNotExist):
				return -1, nil // removed since Open: shown as missing
			case err != nil:
				return -1, err
			}
			embedded += len(data)
			u = "data:image/png;base64," + base64.StdEncoding.EncodeToString(data)
		} else {
			u = relURL(baseDir, tr.Dir, shot)
			p.files = append(p.files, shot)
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
	treeBytes := 0
	capped := 0
	for i, r := range obs {
		if i%256 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		s := stepData{N: r.Step, Final: r.Type == trace.TypeFinal, T: r.TMS, Sent: r.TMS, Img: -1}
		if r.Decision != nil {
			s.Lat = r.Decision.LatencyMS
			s.Queue = r.Decision.QueueMS
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
			s.Stl, s.Cap = o.SettleMS, o.SettleCapped
			if o.SettleCapped {
				capped++
			}
			for _, w := range o.Windows {
				s.Wins = append(s.Wins, w.Title)
				if w.Focused {
					s.Focus = w.Title
				}
			}
			if o.Tree != nil {
				td, err := readTree(p, tr, o, baseDir, &treeBytes, imageOf)
				if err != nil {
					return nil, err
				}
				s.Tree = td
			}
		}
		for k := range held {
			s.Held = append(s.Held, k)
		}
		sort.Strings(s.Held)
		if r.Actor != "" && r.Actor != trace.ActorAgent {
			s.Who = r.Actor
		}
		if o := r.Observation; o != nil && o.Intervention != nil {
			s.IV = clip(o.Intervention.String(), maxMessageRunes)
		}
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
				if t := res.Result.Target; t != nil && t.Point != nil {
					s.TP = &[2]int{t.Point.X, t.Point.Y}
				}
			}
		}
		p.Steps = append(p.Steps, s)
	}
	p.Run.Confirm = confirmSummary(p.Steps)
	if capped > 0 {
		p.Run.SettleCapped = fmt.Sprintf("%s did not settle within the cap", plural.Count(capped, "screen", "screens"))
	}
	alignOutput(tr, p.Steps)
	networkLines(tr, obs, p.Steps)
	if p.Replay = readReplay(p, tr.Dir, baseDir); p.Replay != nil {
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
	}{{trace.StdoutFile, run.Logs.StdoutBytes, run.Logs.StdoutDropped}, {trace.StderrFile, run.Logs.StderrBytes, run.Logs.StderrDropped}, {trace.NetworkFile, -1, 0}} {
		if lg.bytes < 0 && run.Network == nil {
			continue // the sandbox had no network
		}
		ld := logData{Name: lg.name, Bytes: lg.bytes, Dropped: lg.dropped}
		var err error
		ld.Tail, ld.Truncated, ld.Bytes, err = readTail(tr.Dir, lg.name, maxLogBytes)
		switch {
		case err == nil:
			ld.URL = relURL(baseDir, tr.Dir, lg.name)
			p.files = append(p.files, lg.name)
		case errors.Is(err, trace.ErrRefused):
			p.Refused = append(p.Refused, err.Error())
		}
		p.Logs = append(p.Logs, ld)
	}
	collectedFiles(p, tr, baseDir)
	return p, nil
}

// collectedFiles lists the task's collected files, each linked when it is
// a plain file under the trace's files/.
func collectedFiles(p *page, tr *trace.Trace, baseDir string) {
	p.FilesRefused = tr.Run.FilesRefused
	if len(tr.Run.Files) == 0 {
		return
	}
	root, err := os.OpenRoot(tr.Dir)
	if err != nil {
		return
	}
	defer root.Close()
	for _, f := range tr.Run.Files {
		fd := fileData{Path: f.Path, Size: f.Size, SHA256: f.SHA256}
		rel := trace.FilesDir + "/" + f.Path
		if stagepath.Check(f.Path) == nil {
			if fi, err := root.Lstat(filepath.FromSlash(rel)); err == nil && fi.Mode().IsRegular() {
				fd.URL = relURL(baseDir, tr.Dir, rel)
				p.files = append(p.files, rel)
			}
		}
		p.Files = append(p.Files, fd)
	}
}

// readTree reads a step's accessibility tree (within the page's budget)
// and its marks. A tree that cannot be read is said, not an error; only
// the context ending is.
func readTree(p *page, tr *trace.Trace, o *trace.Observation, baseDir string, used *int, imageOf func(string) (int, error)) (*treeData, error) {
	ti := o.Tree
	td := &treeData{N: ti.Elements, MS: ti.ElapsedMS, Note: clip(ti.Note, maxLineRunes), Err: clip(ti.Error, maxLineRunes), Marked: -1}
	for _, c := range ti.Cut {
		td.Cut = append(td.Cut, clip(c, maxLineRunes))
	}
	if o.MarkedScreenshot != "" && trace.CheckFile(tr.Dir, o.MarkedScreenshot) == nil {
		i, err := imageOf(o.MarkedScreenshot)
		if err != nil {
			return nil, err
		}
		td.Marked = i
	}
	for _, m := range o.Marks {
		line := fmt.Sprintf("[%d] %s", m.N, m.Role)
		if m.Name != "" {
			line += fmt.Sprintf(" %q", clip(m.Name, 80))
		}
		td.Marks = append(td.Marks, line+fmt.Sprintf(" at %v", m.Bounds))
	}
	if ti.File == "" {
		return td, nil
	}
	data, err := trace.ReadFile(tr.Dir, ti.File, maxTreeFile)
	switch {
	case errors.Is(err, trace.ErrRefused):
		p.Refused = append(p.Refused, err.Error())
		return td, nil
	case err != nil:
		td.Err = clip(err.Error(), maxLineRunes)
		return td, nil
	}
	td.URL = relURL(baseDir, tr.Dir, ti.File)
	p.files = append(p.files, ti.File)
	var t observe.Tree
	if err := json.Unmarshal(data, &t); err != nil {
		td.Err = clip("the tree file is not a tree: "+err.Error(), maxLineRunes)
		return td, nil
	}
	for i, e := range t.Elements {
		if i == maxTreeLines || *used > maxTreeBytes {
			td.More = len(t.Elements) - i
			break
		}
		line := strings.Repeat("  ", min(max(e.Depth, 0), 30)) + e.Role
		if e.Name != "" {
			line += fmt.Sprintf(" %q", clip(e.Name, 120))
		}
		if e.Text != "" && e.Text != e.Name {
			line += fmt.Sprintf(" text=%q", clip(e.Text, 120))
		}
		if e.Bounds != nil {
			line += fmt.Sprintf(" %v", *e.Bounds)
		}
		var st []string
		for _, k := range []string{"focused", "checked", "selected", "pressed", "editable"} {
			if e.Has(k) {
				st = append(st, k)
			}
		}
		if len(st) > 0 {
			line += " (" + strings.Join(st, ", ") + ")"
		}
		line = clip(line+" · "+e.ID, maxLineRunes)
		*used += len(line)
		td.Lines = append(td.Lines, line)
	}
	return td, nil
}

// networkLines adds to each step the sandbox's connections its
// observation showed the agent, as event lines ("network: denied GET
// evil.test:80 (…)"); network.jsonl, linked from the page, has them all.
func networkLines(tr *trace.Trace, obs []*trace.Record, steps []stepData) {
	for i, r := range obs {
		if r.Observation == nil || i >= len(steps) {
			continue
		}
		for _, ev := range r.Observation.Network {
			t := r.TMS
			if !ev.Time.IsZero() && !tr.Run.Started.IsZero() {
				t = float64(ev.Time.Sub(tr.Run.Started).Microseconds()) / 1000
			}
			steps[i].Out = append(steps[i].Out, lineData{K: "v", T: t, X: clip("network: "+ev.String(), maxMessageRunes)})
		}
	}
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

// readEmbedded reads a screenshot to embed, if it fits in budget bytes.
func readEmbedded(dir, shot string, budget int) ([]byte, error) {
	f, err := trace.OpenFile(dir, shot)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	if st.Size() > int64(budget) {
		return nil, fmt.Errorf("report: screenshots exceed %d MiB; write the report without embedding them", maxEmbedBytes>>20)
	}
	data := make([]byte, st.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("report: %s: %w", shot, err)
	}
	return data, nil
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
				if l.Stream == observe.Stderr {
					k = "e"
				}
				lines = append(lines, lineData{K: k, T: float64(l.T.Microseconds()) / 1000, X: clip(l.Text, maxLineRunes)})
			}
			// The trusted observer's events, at the time each was seen:
			// on the step whose action was running then.
			for _, ev := range r.Observation.Activity {
				t := r.TMS
				if !ev.Time.IsZero() && !tr.Run.Started.IsZero() {
					t = min(r.TMS, float64(ev.Time.Sub(tr.Run.Started).Microseconds())/1000)
				}
				lines = append(lines, lineData{K: "a", T: t, X: clip("observer: "+ev.String(), maxMessageRunes)})
			}
		case r.Type == trace.TypeEvent:
			lines = append(lines, lineData{K: "v", T: r.TMS, X: describeEvent(r)})
		}
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].T < lines[j].T })
	j := 0
	counts := make([][3]int, len(steps)) // lines of output, events, the observer's events
	for _, l := range lines {
		for j+1 < len(steps) && steps[j+1].T <= l.T {
			j++
		}
		switch l.K {
		case "v":
			counts[j][1]++
		case "a":
			counts[j][2]++
		default:
			counts[j][0]++
		}
		s := &steps[j]
		if len(s.Out) >= maxLinesPerStep {
			s.More++
			continue
		}
		s.Out = append(s.Out, l)
	}
	for i, c := range counts {
		var parts []string
		if c[0] > 0 {
			parts = append(parts, plural.Count(c[0], "line of output", "lines of output"))
		}
		if c[1] > 0 {
			parts = append(parts, plural.S(c[1], "event"))
		}
		if c[2] > 0 {
			parts = append(parts, plural.S(c[2], "observed process or file event"))
		}
		steps[i].Sum = strings.Join(parts, ", ")
	}
}

// isAre is the verb that agrees with a count.
func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

func describeEvent(r trace.Record) string {
	switch r.Event {
	case "window_mapped", "window_unmapped", "window_title":
		return fmt.Sprintf("%s %q %vx%v at %v,%v", strings.ReplaceAll(r.Event, "_", " "), r.Data["title"], r.Data["width"], r.Data["height"], r.Data["x"], r.Data["y"])
	case "app_exited":
		e := &observe.Exit{}
		if code, ok := r.Data["code"].(float64); ok {
			e.Code = int(code)
		}
		e.Signal, _ = r.Data["signal"].(string)
		e.OOM, _ = r.Data["oom_killed"].(bool)
		e.Stopped, _ = r.Data["stopped"].(string)
		if e.Stopped != "" {
			return "app " + e.String() // "app stopped by agentbox … (exit code 0)"
		}
		return "app exited: " + e.String()
	case trace.EventTakeover:
		return fmt.Sprintf("%v took control", r.Data["by"])
	case trace.EventHandBack:
		n, _ := r.Data["steps"].(float64)
		return fmt.Sprintf("%v handed control back (%v) after %s in %v ms", r.Data["by"], r.Data["reason"], plural.S(int(n), "step"), r.Data["duration_ms"])
	case trace.EventNotApplied:
		b, _ := json.Marshal(r.Data["action"])
		return fmt.Sprintf("the %v's action %s was not performed: a person had taken control", r.Data["actor"], clipBytes(string(b), 300))
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
		// ':' too: a first segment such as "javascript:x" must stay a
		// path, not become a scheme.
		parts[i] = strings.ReplaceAll(url.PathEscape(s), ":", "%3A")
	}
	return path.Join(parts...)
}

func absOr(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// readTail returns the last max bytes of a file of the trace (cut at a
// line start) and its size.
func readTail(dir, name string, max int64) (string, bool, int64, error) {
	f, err := trace.OpenFile(dir, name)
	if err != nil {
		return "", false, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", false, 0, err
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
	return strings.ToValidUTF8(string(buf), "\uFFFD"), off > 0, size, nil
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// maxReplayBytes bounds replay.json.
const maxReplayBytes = 64 << 20

func readReplay(p *page, dir, baseDir string) *replayData {
	data, err := trace.ReadFile(dir, ReplayFile, maxReplayBytes)
	if errors.Is(err, trace.ErrRefused) {
		p.Refused = append(p.Refused, err.Error())
	}
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
		// Only relative links to plain files of the trace: a value such as
		// "javascript:…" or "../../secret.png" is dropped, and said so.
		link := func(rel string) string {
			if rel == "" {
				return ""
			}
			if err := trace.CheckFile(dir, rel); err != nil {
				if errors.Is(err, trace.ErrRefused) {
					p.Refused = append(p.Refused, ReplayFile+": "+err.Error())
				}
				return ""
			}
			p.files = append(p.files, path.Clean(rel))
			return relURL(baseDir, dir, rel)
		}
		rd.Diff = link(r.Divergence.Diff)
		rd.Compare = link(r.Divergence.Compare)
	}
	return rd
}

func clip(s string, n int) string { return textcut.Runes(s, n, " …[cut]") }

func clipBytes(s string, n int) string {
	return strings.ToValidUTF8(textcut.Bytes(s, n, " …[cut]"), "")
}

// resumeNotes are the report's words on resuming: the seam of a resumed
// run; a crashed run's state (resumable, being resumed, resumed as …).
func resumeNotes(tr *trace.Trace) []string {
	var notes []string
	run := tr.Run
	if rf := run.ResumedFrom; rf != nil {
		notes = append(notes, fmt.Sprintf("resumed from %s (run %s) after its step %d: steps 1–%d were replayed in a fresh sandbox and compared with it, the agent went on from step %d",
			rf.Trace, rf.ID, rf.Step, rf.Step, rf.Step+1))
	}
	lv, err := trace.CheckLiveness(tr.Dir)
	if err != nil {
		return notes
	}
	switch {
	case lv == trace.Crashed && run.ResumedBy != "":
		notes = append(notes, "crashed: agentbox died during this run; it was resumed as "+run.ResumedBy)
	case lv == trace.Crashed:
		notes = append(notes, fmt.Sprintf("crashed (resumable): agentbox died during this run after step %d; agentbox resume %s continues it", trace.LastCompleted(tr), tr.Dir))
	case lv == trace.Resuming:
		notes = append(notes, "crashed: agentbox died during this run; an agentbox resume is continuing it")
	}
	return notes
}
