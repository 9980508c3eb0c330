package mcp

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/grade"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
	"github.com/codegirl-games/agentbox/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// stubApp is an app directory the scripted guest "runs".
func stubApp(t *testing.T) *app.Bundle {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "game"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command": "game"}`), 0o644)
	b, err := app.Load(dir, app.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// fixture is a Server over a Local whose sandboxes are scripted guests
// (the real session, trace and host side of the protocol; no sandbox),
// and an SDK client connected to it in memory.
type fixture struct {
	srv   *Server
	local *Local
	cs    *sdk.ClientSession
	out   string
}

func newFixture(t *testing.T, guest func() *guestenvtest.Guest) *fixture {
	t.Helper()
	return newFixtureWith(t, guest, nil)
}

// newFixtureWith is newFixture with the episodes' session configuration
// changed by config.
func newFixtureWith(t *testing.T, guest func() *guestenvtest.Guest, config func(*session.Config)) *fixture {
	t.Helper()
	return newFixtureClient(t, guest, config, nil, nil)
}

// newFixtureClient is newFixtureWith with the client's options (its
// handlers, its protocol version).
func newFixtureClient(t *testing.T, guest func() *guestenvtest.Guest, config func(*session.Config), copts *sdk.ClientOptions, sopts *sdk.ClientSessionOptions) *fixture {
	t.Helper()
	if guest == nil {
		guest = func() *guestenvtest.Guest { return &guestenvtest.Guest{} }
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	t.Cleanup(func() { cancel(nil) })
	f := &fixture{out: t.TempDir()}
	n := 0
	cfg := session.Config{
		Backend: &guestenvtest.Backend{New: guest}, App: stubApp(t), Task: "play",
		Env: environment.Config{Screen: observe.Screen{Width: 320, Height: 240, Depth: 24}},
	}
	if config != nil {
		config(&cfg)
	}
	f.local = NewLocal(LocalOptions{
		Config: cfg,
		App:    "game", Out: f.out, Context: ctx,
		RunID: func() string { n++; return "episode-" + string(rune('0'+n)) },
	})
	f.srv = New(Options{Open: func(_ string, asks policy.Approver) Episodes { f.local.o.Asks = asks; return f.local }, Version: "test"})
	st, ct := sdk.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- f.srv.sdk.Run(ctx, st) }()
	c := sdk.NewClient(&sdk.Implementation{Name: "fixture", Version: "1"}, copts)
	cs, err := c.Connect(t.Context(), ct, sopts)
	if err != nil {
		t.Fatal(err)
	}
	f.cs = cs
	t.Cleanup(func() {
		cs.Close()
		<-served
		f.srv.Close()
	})
	return f
}

// call calls a tool; a protocol error fails the test unless wantRPC.
func (f *fixture) call(t *testing.T, name string, args any) *sdk.CallToolResult {
	t.Helper()
	res, err := f.cs.CallTool(t.Context(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// text is the text content of a result.
func text(r *sdk.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// decode reads the JSON answer of a result (its last text content).
func decode(t *testing.T, r *sdk.CallToolResult, v any) {
	t.Helper()
	tc, ok := r.Content[len(r.Content)-1].(*sdk.TextContent)
	if !ok {
		t.Fatalf("no text content: %+v", r.Content)
	}
	if err := json.Unmarshal([]byte(tc.Text), v); err != nil {
		t.Fatalf("%q: %v", tc.Text, err)
	}
}

// TestToolList: the tools and their input schemas, as clients see them
// (testdata/tools.golden.json; go test -update rewrites it). Each action
// tool takes exactly its action's fields.
func TestToolList(t *testing.T) {
	f := newFixture(t, nil)
	res, err := f.cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		if tl.Description == "" {
			t.Errorf("%s has no description", tl.Name)
		}
		tt := findTool(tl.Name)
		if tt == nil || tt.kind == "" {
			continue
		}
		schema := tl.InputSchema.(map[string]any)
		var props []string
		for p := range schema["properties"].(map[string]any) {
			props = append(props, p)
		}
		slices.Sort(props)
		want := tt.args()
		slices.Sort(want)
		if !slices.Equal(props, want) || schema["additionalProperties"] != false {
			t.Errorf("%s takes %v (additionalProperties %v), its action %v", tl.Name, props, schema["additionalProperties"], want)
		}
	}
	for _, must := range []string{"screenshot", "click", "double_click", "type", "key", "key_down", "key_up", "scroll", "drag", "mouse_move", "wait", "launch", "read_output", "state"} {
		if !slices.Contains(names, must) {
			t.Errorf("no tool %s", must)
		}
	}
	got, _ := json.MarshalIndent(res.Tools, "", "  ")
	golden := filepath.Join("testdata", "tools.golden.json")
	if *update {
		os.MkdirAll("testdata", 0o755)
		os.WriteFile(golden, append(got, '\n'), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if string(want) != string(got)+"\n" {
		t.Errorf("the tool list differs from %s (go test -update rewrites it):\n%s", golden, got)
	}
}

// TestEpisodes: the app starts at the first call that needs it; a step is
// recorded with the actor mcp; launch starts a fresh episode with its own
// trace (the first is finalised as closed); done ends the episode and
// later calls say so; the client's going away finalises the last trace.
func TestEpisodes(t *testing.T) {
	f := newFixture(t, nil)
	shot := f.call(t, "screenshot", nil)
	if shot.IsError || len(shot.Content) != 2 {
		t.Fatalf("screenshot: %s", text(shot))
	}
	img, ok := shot.Content[0].(*sdk.ImageContent)
	if !ok || img.MIMEType != "image/png" || len(img.Data) < 8 || string(img.Data[1:4]) != "PNG" {
		t.Fatalf("screenshot: no PNG: %+v", shot.Content[0])
	}
	var sa screenAnswer
	decode(t, shot, &sa)
	if sa.Episode != 1 || sa.Step != 1 || sa.Screen.Width != 320 || sa.Image.Width != 320 || !sa.Running || len(sa.Windows) != 1 {
		t.Errorf("screenshot: %+v", sa)
	}
	// A region, scaled: the image is the region's, and says so.
	shot = f.call(t, "screenshot", map[string]any{"region": []int{0, 0, 160, 120}, "scale": 0.5})
	decode(t, shot, &sa)
	if shot.IsError || sa.Image != (imageSize{80, 60}) || sa.Region == nil || *sa.Region != (action.Rect{0, 0, 160, 120}) {
		t.Errorf("a scaled region: %s", text(shot))
	}
	var st stepAnswer
	decode(t, f.call(t, "click", map[string]any{"x": 10, "y": 20}), &st)
	if !st.OK || st.Step != 3 || st.Episode != 1 {
		t.Errorf("click: %+v", st)
	}
	var la launchAnswer
	decode(t, f.call(t, "launch", map[string]any{"task": "again"}), &la)
	if la.Episode != 2 || la.RunID != "episode-2" || la.Trace != filepath.Join(f.out, "episode-2") {
		t.Errorf("launch: %+v", la)
	}
	first, err := trace.Open(filepath.Join(f.out, "episode-1"))
	if err != nil {
		t.Fatal(err)
	}
	if first.Incomplete || first.Run.Reason != trace.ReasonClosed || len(first.Steps) != 3 || first.Run.Agent.Name != "mcp" || first.Run.Agent.Options["client"] != "fixture 1" {
		t.Errorf("the first episode: incomplete %v, %s, %d steps, agent %+v", first.Incomplete, first.Run.Reason, len(first.Steps), first.Run.Agent)
	}
	for _, s := range first.Steps {
		if s.Actor != trace.ActorMCP {
			t.Errorf("step %d: actor %q", s.Step, s.Actor)
		}
	}
	decode(t, f.call(t, "done", map[string]any{"message": "moved"}), &st)
	if st.Ended == nil || st.Ended.Outcome != trace.Success || st.Ended.Trace != la.Trace {
		t.Errorf("done: %+v", st)
	}
	after := f.call(t, "key", map[string]any{"keys": "Return"})
	if !after.IsError || !strings.Contains(text(after), "episode 2 has ended (success, done)") || !strings.Contains(text(after), "Call launch") {
		t.Errorf("a step after done: %s", text(after))
	}
	decode(t, f.call(t, "launch", nil), &la)
	if la.Episode != 3 {
		t.Errorf("launch after done: %+v", la)
	}
	f.cs.Close()
	f.srv.Close()
	for _, tt := range []struct {
		dir    string
		reason string
		task   string
	}{{"episode-2", trace.ReasonDone, "again"}, {"episode-3", trace.ReasonClosed, "again"}} {
		tr, err := trace.Open(filepath.Join(f.out, tt.dir))
		if err != nil {
			t.Fatal(err)
		}
		if tr.Incomplete || tr.Run.Reason != tt.reason || tr.Run.Task != tt.task {
			t.Errorf("%s: incomplete %v, reason %s, task %q", tt.dir, tr.Incomplete, tr.Run.Reason, tr.Run.Task)
		}
	}
}

// TestEndAnswersWithFilesAndGrade: with files to collect and a grader,
// the step that ends an episode answers with the files collected and the
// grade (as serve's step does); without collect, the end has neither.
func TestEndAnswersWithFilesAndGrade(t *testing.T) {
	for _, tt := range []struct {
		name    string
		collect bool
		grade   string // the note's expected text: verified when "hi\n"
		want    string // the grade's outcome, "" for none
	}{
		{"verified", true, "hi\n", trace.GradeVerified},
		{"incorrect", true, "bye\n", trace.GradeIncorrect},
		{"nothing collected", false, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixtureWith(t, nil, func(cfg *session.Config) {
				if !tt.collect {
					return
				}
				dir := t.TempDir()
				if err := os.WriteFile(filepath.Join(dir, "note.txt"), []byte("hi\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				tf := app.TaskFiles{Dir: dir, Inputs: []app.Input{{From: "note.txt", To: "~/note.txt"}}, Collect: app.Collect{Patterns: []string{"~/note.txt"}}}
				in, err := app.LoadInputs(tf, cfg.App, app.DefaultLimits)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { in.Close() })
				spec, err := grade.ParseJSON("grade", []byte(`[{"text": "note.txt", "equals": `+strconv.Quote(tt.grade)+`}]`), grade.Options{})
				if err != nil {
					t.Fatal(err)
				}
				cfg.Inputs, cfg.Collect, cfg.Grader = in, tf.Collect, spec
			})
			var st stepAnswer
			decode(t, f.call(t, "done", map[string]any{"message": "finished"}), &st)
			switch {
			case st.Ended == nil:
				t.Fatalf("done: no end: %+v", st)
			case tt.want == "":
				if st.Ended.Closed != nil {
					t.Errorf("done: files and grade without collect: %+v", st.Ended.Closed)
				}
				return
			case st.Ended.Closed == nil || len(st.Ended.Files) != 1 || st.Ended.Files[0].Path != "note.txt" || st.Ended.Files[0].Size != 3:
				t.Fatalf("done: want note.txt collected: %+v", st.Ended)
			case st.Ended.Grade == nil || st.Ended.Grade.Outcome != tt.want:
				t.Fatalf("done: grade %+v, want %s", st.Ended.Grade, tt.want)
			}
			// The trace agrees: the end's answer is the closed episode's.
			tr, err := trace.Open(st.Ended.Trace)
			if err != nil {
				t.Fatal(err)
			}
			if tr.Run.Grade == nil || tr.Run.Grade.Outcome != tt.want || len(tr.Run.Files) != 1 {
				t.Errorf("trace: grade %+v, files %+v", tr.Run.Grade, tr.Run.Files)
			}
		})
	}
}

// TestBadInput: every kind of bad input is a tool error (an unknown tool
// a protocol error naming the tools) with a clear message, the action
// parser's words where it is an action; what the screen refuses is
// recorded as an invalid step and not performed; the server serves on.
func TestBadInput(t *testing.T) {
	f := newFixture(t, nil)
	huge := strings.Repeat("é", 1<<20) // 2 MiB of text
	for _, tt := range []struct {
		name string
		tool string
		args any
		want string
	}{
		{"a string for a number", "click", map[string]any{"x": "ten", "y": 5}, `click: field "x": must be an integer`},
		{"a fractional coordinate", "click", map[string]any{"x": 1.5, "y": 5}, `field "x"`},
		{"a field the tool does not take", "double_click", map[string]any{"x": 1, "y": 5, "count": 3}, `double_click: field "count": unknown field; double_click takes x, y, button, keys, target, mark`},
		{"a field of another tool", "key", map[string]any{"text": "a"}, `key: field "text": unknown field`},
		{"the action's name", "click", map[string]any{"action": "type"}, `field "action": unknown field`},
		{"arguments that are not an object", "click", []int{1, 2}, "the arguments must be a JSON object"},
		{"off the screen", "click", map[string]any{"x": 400, "y": 10}, "click was not performed (recorded as step 1, invalid): click: (400,10) is outside the 320x240 screen"},
		{"megabytes of text", "type", map[string]any{"text": huge}, "type: the arguments are"},
		{"text over the limit", "type", map[string]any{"text": strings.Repeat("a", 10_001)}, "type was not performed"},
		{"an unknown key", "key", map[string]any{"keys": "ctrl+Retrun"}, `did you mean "Return"`},
		{"a missing field", "key_down", map[string]any{}, `key_down: field "key": required`},
		{"key and keys at once", "key", map[string]any{"keys": "a", "key": "b"}, `key: field "key": give keys (a key or chord) or key (one key), not both`},
		{"key without a key", "key", map[string]any{}, `key: field "keys": required`},
		{"a bad button", "click", map[string]any{"button": "thumb"}, `field "button"`},
		{"a region off the screen", "screenshot", map[string]any{"region": []int{0, 0, 999, 10}}, `field "region"`},
		{"read_output: a string for a number", "read_output", map[string]any{"after": "x"}, `read_output: field "after": want int64, got a JSON string`},
		{"read_output: an unknown field", "read_output", map[string]any{"since": 3}, `read_output: unknown field "since"`},
		{"read_output: too much", "read_output", map[string]any{"max_bytes": 1 << 30}, `field "max_bytes": between 1 and 262144`},
		{"read_output: a stream that is not", "read_output", map[string]any{"stream": "stdin"}, `field "stream": stdout or stderr`},
		{"launch: an app there is not", "launch", map[string]any{"app": "other"}, `no app "other" here: this server runs game`},
		{"state: an argument", "state", map[string]any{"verbose": true}, `state: unknown field "verbose"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := f.call(t, tt.tool, tt.args)
			if !res.IsError || !strings.Contains(text(res), tt.want) {
				t.Errorf("want a tool error saying %q, got error %v: %.300s", tt.want, res.IsError, text(res))
			}
		})
	}
	_, err := f.cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "teleport", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), `unknown tool "teleport"; the tools are screenshot, click,`) {
		t.Errorf("an unknown tool: %v", err)
	}
	// The server serves on, and the episode too.
	if res := f.call(t, "screenshot", nil); res.IsError {
		t.Fatalf("after the bad input: %s", text(res))
	}
	// key takes its key as key too, the name key_down and key_up use.
	if res := f.call(t, "key", map[string]any{"key": "Return"}); res.IsError {
		t.Errorf("key with key: %s", text(res))
	}
	f.cs.Close()
	f.srv.Close()
	tr, err := trace.Open(filepath.Join(f.out, "episode-1"))
	if err != nil {
		t.Fatal(err)
	}
	var invalid []string
	pressed := false
	for _, s := range tr.Steps {
		if s.Invalid != "" {
			invalid = append(invalid, s.Action.String())
		} else if s.Action.Kind == action.Key && s.Action.Keys == "Return" {
			pressed = true
		}
		if s.Actor != trace.ActorMCP {
			t.Errorf("step %d: actor %q", s.Step, s.Actor)
		}
	}
	// What parses but the screen or the vocabulary refuses is recorded,
	// not performed: the off-screen click, the long text, the unknown key,
	// the missing key, the key without a key, the bad button, the region
	// (in that order).
	if len(invalid) != 7 {
		t.Errorf("invalid steps recorded: %q", invalid)
	}
	if !pressed {
		t.Errorf("no step pressed Return (key with key)")
	}
}

// TestReadOutput: the app's output since a point, bounded, by stream,
// with the episode's start and the app's end; waiting for output.
func TestReadOutput(t *testing.T) {
	f := newFixture(t, func() *guestenvtest.Guest {
		return &guestenvtest.Guest{
			OnLaunch: func(w *Writer) {
				w.Event(wire.EventOutput, wire.OutputEvent{Stream: observe.Stdout}, []byte("hello\n"))
				w.Event(wire.EventOutput, wire.OutputEvent{Stream: observe.Stderr}, []byte("warning: é\n"))
				w.Event(wire.EventOutput, wire.OutputEvent{Stream: observe.Stdout}, []byte(strings.Repeat("x", 100)+"\n"))
			},
			OnAct: func(w *Writer) {
				w.Event(wire.EventOutput, wire.OutputEvent{Stream: observe.Stdout}, []byte("acted\n"))
			},
		}
	})
	read := func(args any) (out outputAnswer) {
		t.Helper()
		decode(t, f.call(t, "read_output", args), &out)
		return out
	}
	out := read(nil)
	if len(out.Output) != 0 || out.Next != 0 {
		t.Errorf("before any launch: %+v", out)
	}
	f.call(t, "launch", nil)
	out = read(nil)
	if len(out.Output) != 4 || out.Output[0].Started != "episode-1" || out.Output[1].Text != "hello\n" ||
		out.Output[2].Stream != "stderr" || out.Output[3].Text != strings.Repeat("x", 100)+"\n" || out.Gap || out.More {
		t.Errorf("after the launch: %+v", out)
	}
	next := out.Next
	out = read(map[string]any{"after": next})
	if len(out.Output) != 0 || out.Next != next {
		t.Errorf("nothing new: %+v", out)
	}
	// Waiting: the output a step causes arrives meanwhile.
	done := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, _ := f.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "read_output", Arguments: map[string]any{"after": next, "wait_ms": 20000, "stream": "stdout"}})
		done <- res
	}()
	time.Sleep(100 * time.Millisecond)
	f.call(t, "key", map[string]any{"keys": "a"})
	select {
	case res := <-done:
		out = outputAnswer{}
		decode(t, res, &out)
		if len(out.Output) == 0 || out.Output[0].Text != "acted\n" {
			t.Errorf("waited for: %+v", out)
		}
	case <-time.After(time.Minute):
		t.Fatal("read_output with wait_ms did not return")
	}
	// Bounded: the first chunk is cut to max_bytes (at a character), the
	// next one waits for the next call.
	out = read(map[string]any{"stream": "stderr", "max_bytes": 10})
	if len(out.Output) != 2 || out.Output[1].Text != "warning: " || out.Output[1].Cut != 3 {
		t.Errorf("cut at 10 bytes (not inside é): %+v", out)
	}
	out = read(map[string]any{"max_bytes": 8})
	if !out.More || len(out.Output) != 2 || out.Output[1].Text != "hello\n" {
		t.Errorf("more than max_bytes: %+v", out)
	}
}

// Writer is the scripted guest's writer.
type Writer = guestenvtest.Writer

// panicking is an Episodes whose Current panics: a bug of agentbox's own.
type panicking struct{ *Local }

func (panicking) Current() (Episode, error) { panic("a bug") }

// TestPanicIsAToolError: a panic in a tool is told to the client as a
// tool error and the server serves on (the SDK does not recover them: the
// process would end).
func TestPanicIsAToolError(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.o.Open = func(string, policy.Approver) Episodes { return panicking{f.local} }
	st, ct := sdk.NewInMemoryTransports()
	go f.srv.sdk.Run(t.Context(), st)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "p", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for range 2 {
		res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "key", Arguments: map[string]any{"keys": "a"}})
		if err != nil || !res.IsError || !strings.Contains(text(res), "agentbox failed on this call (a bug); the server goes on") {
			t.Fatalf("a panic: %v %+v", err, res)
		}
	}
	// The other session is served as before.
	if res := f.call(t, "key", map[string]any{"keys": "a"}); res.IsError {
		t.Errorf("the other session: %s", text(res))
	}
}
