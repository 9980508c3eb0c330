package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/plural"
	"github.com/codegirl-games/agentbox/internal/textcut"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

// tool is one of the server's tools.
type tool struct {
	name, title, desc string
	// kind, for a tool that is an action: its arguments are the action's
	// fields (action.Fields) but those in fixed, which the tool sets.
	kind  action.Kind
	fixed map[string]json.RawMessage
	// props is the input schema's properties of a tool that is not an
	// action.
	props    map[string]any
	readOnly bool
	run      func(s *Server, ctx context.Context, c *client, t *tool, req *sdk.CallToolRequest) *sdk.CallToolResult
}

// toolTable is every tool, in the order clients list them.
func toolTable() []*tool {
	act := (*Server).act
	return []*tool{
		{name: "screenshot", title: "Screenshot", kind: action.Screenshot, readOnly: true, run: (*Server).screenshot,
			desc: "Look at the sandbox's screen: a PNG image, and the desktop's state as JSON (cursor, windows, whether the app runs). Optionally only a region of it, or scaled down (scale, max_width); the coordinates every other tool takes are still screen pixels, and the answer says which part of the screen the image shows. Recorded in the trace as a step."},
		{name: "click", title: "Click", kind: action.Click, run: act,
			desc: "Click a mouse button at x,y (screen pixels, origin top left; without x,y where the pointer is). count 2 or 3 double- or triple-clicks; keys holds modifiers during the click (ctrl, shift+ctrl)."},
		{name: "double_click", title: "Double-click", kind: action.Click, fixed: map[string]json.RawMessage{"count": json.RawMessage("2")}, run: act,
			desc: "Double-click a mouse button at x,y (screen pixels; without x,y where the pointer is)."},
		{name: "mouse_move", title: "Move the mouse", kind: action.MouseMove, run: act,
			desc: "Move the pointer to x,y (screen pixels), or by dx,dy (relative motion, as games read it)."},
		{name: "mouse_down", title: "Press a mouse button", kind: action.MouseDown, run: act,
			desc: "Press a mouse button where the pointer is and hold it until mouse_up."},
		{name: "mouse_up", title: "Release a mouse button", kind: action.MouseUp, run: act,
			desc: "Release a mouse button pressed with mouse_down."},
		{name: "drag", title: "Drag", kind: action.Drag, run: act,
			desc: "Drag with a mouse button held along path [[x,y], …] (at least two points): pressed at the first point, moved through each, released at the last."},
		{name: "scroll", title: "Scroll", kind: action.Scroll, run: act,
			desc: "Turn the mouse wheel at x,y (or where the pointer is): dy clicks down (negative: up), dx clicks right (negative: left)."},
		{name: "type", title: "Type text", kind: action.Type, run: act,
			desc: "Type text as a keyboard would: any Unicode, \\n is Return, \\t is Tab; at most 10,000 characters."},
		{name: "type_secret", title: "Type a secret", kind: action.TypeSecret, run: act,
			desc: "Type the value of a secret of the server's vault, by its name (secret): the value is typed into the app as type types text, and never shown to you, recorded or sent back; where the app shows it you read [secret:NAME]. A name the vault does not hold fails."},
		{name: "key", title: "Press keys", kind: action.Key, run: act,
			desc: "Press and release a key or a chord: key names joined by + with modifiers first, pressed in order and released in reverse — Return, Escape, Tab, BackSpace, Right, Page_Up, F5, a, A, ctrl+c, ctrl+shift+t, alt+F4, super; + itself is plus (ctrl+plus). Names are X keysyms or the aliases of docs/actions.md."},
		{name: "key_down", title: "Hold a key", kind: action.KeyDown, run: act,
			desc: "Press a key and hold it until key_up (a game that reads held keys: hold Right to keep moving). Everything held is released when the episode ends."},
		{name: "key_up", title: "Release a key", kind: action.KeyUp, run: act,
			desc: "Release a key held with key_down."},
		{name: "wait", title: "Wait", kind: action.Wait, run: act,
			desc: "Wait ms milliseconds; or until a condition holds, ms being the most to wait (default 10 s): until=stable (the screen unchanged for stable_ms, default 500), until=window (a window whose title matches title: a glob, or /regex/), until=change (the screen differs from when the wait began), until=file (the file at file, ~/… below the home, was written since the app was launched and has stayed the same for stable_ms, default 500: a save is done). The result's met says whether the condition held."},
		{name: "cursor_position", title: "Where the pointer is", kind: action.CursorPosition, readOnly: true, run: act,
			desc: "Tell where the mouse pointer is (the result's cursor)."},
		{name: "done", title: "Finish the episode", kind: action.Done, run: act,
			desc: "End the episode: success (default true) and a message are recorded as its outcome; the sandbox is removed and the trace finished. Call launch for another episode."},
		{name: "launch", title: "Launch the app", run: (*Server).launch,
			props: map[string]any{
				"app":  map[string]any{"type": "string", "description": "which app, when the server offers several (the error of a call without it names them)"},
				"task": map[string]any{"type": "string", "description": "what the episode is for, recorded in its trace"},
			},
			desc: "Start the app in a fresh sandbox: a new episode with its own trace. If an episode runs, it ends first and its sandbox is removed — nothing is kept between episodes. The app also starts by itself at the first tool call that needs it, when there is one app."},
		{name: "read_output", title: "Read the app's output", readOnly: true, run: (*Server).readOutput,
			props: map[string]any{
				"after":     map[string]any{"type": "integer", "minimum": 0, "description": "read what came after this point: the next of the previous answer (default 0: the oldest kept)"},
				"max_bytes": map[string]any{"type": "integer", "minimum": 1, "maximum": maxOutputBytes, "description": fmt.Sprintf("at most this many bytes of text (default %d)", defaultOutputBytes)},
				"stream":    map[string]any{"type": "string", "enum": []string{"stdout", "stderr"}, "description": "only this stream (default both)"},
				"wait_ms":   map[string]any{"type": "integer", "minimum": 0, "maximum": maxOutputWaitMS, "description": "when nothing new has come yet, wait up to this long for it (default 0)"},
			},
			desc: "Read what the app printed (stdout, stderr) since a point, bounded, with when an episode started and how the app ended. Pass the answer's next as after to read on. Not recorded as a step."},
		{name: "state", title: "The desktop's state", readOnly: true, run: (*Server).state,
			desc: "Tell the running episode (its number, run ID, trace), the screen's size, the cursor, the windows (title, position, size, focus) and whether the app runs or how it ended, without a screenshot. Not recorded as a step."},
	}
}

var tools = toolTable()

// findTool is the tool of that name, or nil.
func findTool(name string) *tool {
	for _, t := range tools {
		if t.name == name {
			return t
		}
	}
	return nil
}

func toolNames() []string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.name
	}
	return names
}

// args lists the arguments an action tool takes.
func (t *tool) args() []string {
	var names []string
	for _, f := range action.Fields(t.kind) {
		if _, fixed := t.fixed[f]; !fixed {
			names = append(names, f)
		}
	}
	return names
}

// sdkTool is the tool as clients see it: its input schema takes exactly
// the fields of its action (or its own arguments), each described.
func (t *tool) sdkTool() *sdk.Tool {
	props := t.props
	if t.kind != "" {
		props = map[string]any{}
		for _, f := range t.args() {
			props[f] = fieldSchema(t.kind, f)
		}
	}
	if props == nil {
		props = map[string]any{}
	}
	schema := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if t.kind == action.Drag {
		schema["required"] = []string{"path"}
	}
	// key takes its chord as keys or as key (one of the two; the session
	// says so when neither or both are given): no schema states "one of"
	// at the top level that every model provider accepts.
	for kind, field := range map[action.Kind]string{action.Type: "text", action.TypeSecret: "secret", action.KeyDown: "key", action.KeyUp: "key"} {
		if t.kind == kind {
			schema["required"] = []string{field}
		}
	}
	closed := false
	return &sdk.Tool{
		Name: t.name, Title: t.title, Description: t.desc, InputSchema: schema,
		Annotations: &sdk.ToolAnnotations{Title: t.title, ReadOnlyHint: t.readOnly, DestructiveHint: &closed, OpenWorldHint: &closed},
	}
}

// fieldSchema is the JSON schema of an action's field, as the tool of
// that action describes it. The schema informs the client; the session
// checks the action itself (action.FromMap, action.Validate).
func fieldSchema(kind action.Kind, field string) map[string]any {
	integer := func(desc string) map[string]any { return map[string]any{"type": "integer", "description": desc} }
	switch field {
	case "x":
		return integer("screen x in pixels from the left edge")
	case "y":
		return integer("screen y in pixels from the top edge")
	case "dx":
		if kind == action.Scroll {
			return integer("wheel clicks to the right (negative: left)")
		}
		return integer("relative motion in pixels to the right (negative: left)")
	case "dy":
		if kind == action.Scroll {
			return integer("wheel clicks down (negative: up)")
		}
		return integer("relative motion in pixels down (negative: up)")
	case "button":
		return map[string]any{"type": "string", "enum": []string{"left", "middle", "right", "back", "forward"}, "description": "the mouse button (default left)"}
	case "count":
		return integer("clicks: 1, 2 (double) or 3 (triple)")
	case "keys":
		if kind == action.Key {
			return map[string]any{"type": "string", "description": "a key or chord: Return, Right, ctrl+c, ctrl+shift+t, alt+F4"}
		}
		return map[string]any{"type": "string", "description": "modifier keys held meanwhile: ctrl, shift, alt, super, or a chord of them (ctrl+shift)"}
	case "key":
		if kind == action.Key {
			return map[string]any{"type": "string", "description": "the same as keys, under the name key_down and key_up use: give keys or key, not both"}
		}
		return map[string]any{"type": "string", "description": "one key name: Right, shift, space, a"}
	case "repeat":
		return integer("press the chord this many times (1–100)")
	case "text":
		return map[string]any{"type": "string", "description": "the text: any Unicode; \\n is Return, \\t is Tab (at most 10,000 characters)"}
	case "delay_ms":
		return integer("pause between characters, in milliseconds")
	case "secret":
		return map[string]any{"type": "string", "description": "the name of a secret of the vault (its value is never shown)"}
	case "path":
		if kind == action.Wait {
			return map[string]any{"type": "string", "description": "the same as file (give one of them)"}
		}
		return map[string]any{"type": "array", "minItems": 2, "description": "the points [[x, y], …] the pointer passes through",
			"items": map[string]any{"type": "array", "minItems": 2, "maxItems": 2, "items": map[string]any{"type": "integer"}}}
	case "ms":
		return integer("milliseconds to wait; with until, the most to wait (default 10000)")
	case "until":
		return map[string]any{"type": "string", "enum": []string{"stable", "window", "change", "file"}, "description": "wait for a condition instead of a fixed time"}
	case "title":
		return map[string]any{"type": "string", "description": "with until=window: the title to wait for (a glob, or /regex/)"}
	case "stable_ms":
		return integer("with until=stable: how long the screen must stay unchanged; with until=file: the file (default 500)")
	case "file":
		return map[string]any{"type": "string", "description": "with until=file: the file to wait for, ~/… below the home (e.g. ~/Documents/out.ods)"}
	case "region":
		return map[string]any{"type": "array", "minItems": 4, "maxItems": 4, "items": map[string]any{"type": "integer"},
			"description": "only this part of the screen: [x0, y0, x1, y1] in screen pixels, x1 and y1 exclusive"}
	case "scale":
		return map[string]any{"type": "number", "exclusiveMinimum": 0, "maximum": 1, "description": "scale the image down by this factor"}
	case "max_width":
		return integer("scale the image down to at most this width")
	case "target":
		return map[string]any{"type": "object", "description": "an element of the accessibility tree instead of a point (the sandbox needs --a11y): {role, name, id, index, ancestor}"}
	case "mark":
		return integer("a numbered box of the last screenshot instead of a point (needs --marks)")
	case "success":
		return map[string]any{"type": "boolean", "description": "whether the task succeeded (default true)"}
	case "message":
		return map[string]any{"type": "string", "description": "what happened, recorded as the episode's message"}
	}
	return map[string]any{"description": field}
}

// handler is the SDK's handler of a tool: the tool's run, with a panic
// of agentbox's own code answered as a tool error rather than a crash.
func (s *Server) handler(t *tool) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (res *sdk.CallToolResult, err error) {
		defer func() {
			if p := recover(); p != nil {
				debug.PrintStack()
				res, err = toolError("agentbox failed on this call (%v); the server goes on", p), nil
			}
		}()
		c, cerr := s.client(req.Session, ownerOf(req))
		if cerr != nil {
			return toolError("%v", cerr), nil
		}
		if len(req.Params.Arguments) > action.MaxJSON {
			return toolError("%s: the arguments are %d bytes; the most is %d", t.name, len(req.Params.Arguments), action.MaxJSON), nil
		}
		return t.run(s, ctx, c, t, req), nil
	}
}

func ownerOf(req *sdk.CallToolRequest) string {
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		return req.Extra.TokenInfo.UserID
	}
	return ""
}

// toolError is a tool's failure, told to the client (and its model).
func toolError(format string, args ...any) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// answer is a tool's result: v as JSON text, and as structured content.
func answer(v any, more ...sdk.Content) *sdk.CallToolResult {
	data, err := json.Marshal(v)
	if err != nil {
		return toolError("encoding the answer: %v", err)
	}
	return &sdk.CallToolResult{Content: append(more, &sdk.TextContent{Text: string(data)}), StructuredContent: json.RawMessage(data)}
}

// parseAction makes the action of an action tool's arguments: the same
// parser (action.FromMap) as every action agentbox takes, so a field of
// the wrong type, a fractional coordinate or a field the action does not
// take is refused with the same words. Validation against the screen is
// the session's, at the step.
func parseAction(t *tool, args json.RawMessage) (action.Action, error) {
	raw, err := objectArgs(t, args)
	if err != nil {
		return action.Action{}, err
	}
	allowed := t.args()
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		if !slices.Contains(allowed, name) {
			if len(allowed) == 0 {
				return action.Action{}, fmt.Errorf("%s: field %q: unknown field; %s takes no arguments", t.name, name, t.name)
			}
			return action.Action{}, fmt.Errorf("%s: field %q: unknown field; %s takes %s", t.name, name, t.name, strings.Join(allowed, ", "))
		}
	}
	kind, _ := json.Marshal(t.kind)
	raw["action"] = kind
	maps.Copy(raw, t.fixed)
	a, err := action.FromMap(raw)
	if err != nil {
		return a, fmt.Errorf("%w (docs/actions.md has the vocabulary)", err)
	}
	return a, nil
}

// objectArgs splits a tool's arguments, which must be a JSON object (or
// nothing).
func objectArgs(t *tool, args json.RawMessage) (map[string]json.RawMessage, error) {
	raw := map[string]json.RawMessage{}
	if b := bytes.TrimSpace(args); len(b) == 0 || bytes.Equal(b, []byte("null")) {
		return raw, nil
	}
	if err := json.Unmarshal(args, &raw); err != nil || raw == nil {
		return nil, fmt.Errorf("%s: the arguments must be a JSON object", t.name)
	}
	return raw, nil
}

// decodeArgs decodes the arguments of a tool that is not an action into
// v, strictly: unknown fields and values of the wrong type are errors.
func decodeArgs(t *tool, args json.RawMessage, v any) error {
	if b := bytes.TrimSpace(args); len(b) == 0 || bytes.Equal(b, []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		if _, err := dec.Token(); err != io.EOF {
			return fmt.Errorf("%s: unexpected data after the arguments", t.name)
		}
		return nil
	case errors.As(err, &te) && te.Field != "":
		return fmt.Errorf("%s: field %q: want %s, got a JSON %s", t.name, te.Field, te.Type, te.Value)
	case errors.As(err, &te):
		return fmt.Errorf("%s: the arguments must be a JSON object", t.name)
	}
	return fmt.Errorf("%s: %s", t.name, strings.TrimPrefix(err.Error(), "json: "))
}

// episode is the client's running episode; when none was launched yet
// and there is one app, it launches it.
func (s *Server) episode(c *client) (Episode, error) {
	c.launchMu.Lock()
	defer c.launchMu.Unlock()
	ep, err := c.eps.Current()
	if !errors.Is(err, ErrNotLaunched) {
		return ep, err
	}
	if apps := c.eps.Apps(); len(apps) > 1 {
		return ep, fmt.Errorf("no app is running: call launch with app, one of %s", strings.Join(apps, ", "))
	}
	return c.eps.Launch(Launch{Client: clientName(c.ss)})
}

// clientName is the MCP client's name and version, as it introduced itself.
func clientName(ss *sdk.ServerSession) string {
	if ss == nil {
		return ""
	}
	p := ss.InitializeParams()
	if p == nil || p.ClientInfo == nil {
		return ""
	}
	return strings.TrimSpace(p.ClientInfo.Name + " " + p.ClientInfo.Version)
}

// endAnswer is how an episode ended, in an answer.
// With files to collect, it has the files and the grade (Closed).
type endAnswer struct {
	Outcome trace.Outcome `json:"outcome"`
	Reason  string        `json:"reason"`
	Message string        `json:"message"`
	Trace   string        `json:"trace"`
	*Closed
}

func ended(ep Episode, e *session.End, c *Closed) *endAnswer {
	if e == nil {
		return nil
	}
	return &endAnswer{Outcome: e.Outcome, Reason: e.Reason, Message: e.Message, Trace: ep.Trace, Closed: c}
}

// endedError is the client's error for a step refused because its
// episode ended (now or before); the host is told.
func endedError(c *client, ep Episode, err error) *sdk.CallToolResult {
	var ee *session.EndedError
	if errors.As(err, &ee) {
		closed := c.eps.Ended(ep, &ee.End)
		return toolError("episode %d has ended (%s, %s): %s; its trace is %s.%s Call launch for a fresh episode.", ep.N, ee.End.Outcome, ee.End.Reason, ee.End.Message, ep.Trace, closed.sentence())
	}
	return toolError("%v", err)
}

// stepAnswer is what an action did.
type stepAnswer struct {
	Episode int `json:"episode"`
	Step    int `json:"step"`
	action.Result
	Ended *endAnswer `json:"ended,omitempty"`
}

// step performs an action tool's action as a step of the running episode.
// When the step ended the episode, closed is what its end collected and
// graded (nil when nothing was to be collected).
//
// A step the policy asks about waits for the client's answer (ask.go):
// on protocol 2026-07-28 and later the call then answers with the
// question (failed, an input-required result), and the client's retry,
// naming the step by its request state, answers it and waits on.
func (s *Server) step(ctx context.Context, c *client, t *tool, req *sdk.CallToolRequest) (ep Episode, res *session.StepResult, closed *Closed, failed *sdk.CallToolResult) {
	var p *pending
	if req.Params.RequestState != "" {
		var err error
		if p, err = c.resume(t, req); err != nil {
			return Episode{}, nil, nil, toolError("%v", err)
		}
	} else {
		a, err := parseAction(t, req.Params.Arguments)
		if err != nil {
			return Episode{}, nil, nil, toolError("%v", err)
		}
		ep, err = s.episode(c)
		if err != nil {
			return ep, nil, nil, toolError("%v", err)
		}
		if p, err = c.start(ctx, t, ep, a); err != nil {
			return ep, nil, nil, toolError("%v", err)
		}
	}
	ep = p.ep
	input, err := c.await(ctx, req, p)
	switch {
	case err != nil:
		return ep, nil, nil, toolError("%s: %v", t.name, err)
	case input != nil:
		return ep, nil, nil, input
	}
	r, err := p.res, p.err
	if err != nil {
		return ep, nil, nil, endedError(c, ep, err)
	}
	if r.Ended != nil {
		closed = c.eps.Ended(ep, r.Ended)
	}
	if r.Invalid {
		return ep, &r, closed, toolError("%s was not performed (recorded as step %d, invalid): %s", t.name, r.Step, r.Result.Error)
	}
	return ep, &r, closed, nil
}

// sentence tells what an episode's end collected and graded, for an
// error's text ("" for nothing).
func (c *Closed) sentence() string {
	if c == nil {
		return ""
	}
	msg := fmt.Sprintf(" Collected %s (%d left out).", plural.S(len(c.Files), "file"), len(c.FilesRefused))
	if g := c.Grade; g != nil {
		msg += fmt.Sprintf(" Grade: %s (score %g): %s.", g.Outcome, g.Score, strings.TrimSuffix(g.Message, "."))
	}
	return msg
}

// act is the run of an action tool.
func (s *Server) act(ctx context.Context, c *client, t *tool, req *sdk.CallToolRequest) *sdk.CallToolResult {
	ep, res, closed, failed := s.step(ctx, c, t, req)
	if failed != nil {
		return failed
	}
	out := answer(stepAnswer{Episode: ep.N, Step: res.Step, Result: res.Result, Ended: ended(ep, res.Ended, closed)})
	if !res.Result.OK {
		out.IsError = true
		out.Content = append([]sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("%s did not succeed (step %d): %s", t.name, res.Step, res.Result.Error)}}, out.Content...)
	}
	return out
}

// screenAnswer is what a screenshot shows besides its image.
type screenAnswer struct {
	Episode int            `json:"episode"`
	Step    int            `json:"step"`
	Screen  observe.Screen `json:"screen"`
	// Image is the size of the image; Region, when the image shows part
	// of the screen or is scaled, the part it shows (screen pixels).
	Image   imageSize        `json:"image"`
	Region  *action.Rect     `json:"region,omitempty"`
	Cursor  action.Point     `json:"cursor"`
	Windows []observe.Window `json:"windows"`
	Running bool             `json:"running"`
	Exit    string           `json:"exit,omitempty"`
	Ended   *endAnswer       `json:"ended,omitempty"`
}

type imageSize struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

// screenshot takes the screenshot step, then the observation it asked
// for (a region, scaled), whose image is the answer.
func (s *Server) screenshot(ctx context.Context, c *client, t *tool, req *sdk.CallToolRequest) *sdk.CallToolResult {
	ep, res, closed, failed := s.step(ctx, c, t, req)
	if failed != nil {
		return failed
	}
	if res.Ended != nil {
		return toolError("episode %d has ended (%s, %s): %s.%s Call launch for a fresh episode.", ep.N, res.Ended.Outcome, res.Ended.Reason, res.Ended.Message, closed.sentence())
	}
	obs, err := ep.Session.Observe(c.eps.Context())
	if err != nil {
		return endedError(c, ep, err)
	}
	if obs.Ended != nil {
		closed = c.eps.Ended(ep, obs.Ended)
	}
	img := obs.Screen
	a := screenAnswer{Episode: ep.N, Step: res.Step, Screen: ep.Screen, Cursor: obs.Cursor, Windows: obs.Windows,
		Running: obs.Running, Ended: ended(ep, obs.Ended, closed)}
	if obs.View != nil {
		img = obs.View.Frame
		r := obs.View.Region
		a.Region = &r
	}
	if a.Windows == nil {
		a.Windows = []observe.Window{}
	}
	if obs.Exit != nil {
		a.Exit = obs.Exit.String()
	}
	a.Image = imageSize{img.Width, img.Height}
	data, err := img.PNG()
	if err != nil {
		return toolError("encoding the screenshot: %v", err)
	}
	return answer(a, &sdk.ImageContent{Data: data, MIMEType: "image/png"})
}

// maxTask bounds a launch's task (as serve bounds a create's).
const maxTask = 64 << 10

// launchAnswer is the episode a launch started.
type launchAnswer struct {
	Env     string           `json:"environment,omitempty"`
	Episode int              `json:"episode"`
	App     string           `json:"app"`
	RunID   string           `json:"run_id"`
	Trace   string           `json:"trace"`
	Screen  observe.Screen   `json:"screen"`
	Windows []observe.Window `json:"windows"`
}

func (s *Server) launch(ctx context.Context, c *client, t *tool, req *sdk.CallToolRequest) *sdk.CallToolResult {
	args := req.Params.Arguments
	var in struct {
		App  string  `json:"app"`
		Task *string `json:"task"`
	}
	if err := decodeArgs(t, args, &in); err != nil {
		return toolError("%v", err)
	}
	if in.Task != nil && (len(*in.Task) > maxTask || !utf8.ValidString(*in.Task)) {
		return toolError("launch: field \"task\": at most %d bytes of UTF-8, got %d bytes", maxTask, len(*in.Task))
	}
	c.launchMu.Lock()
	ep, err := c.eps.Launch(Launch{App: in.App, Task: in.Task, Client: clientName(c.ss)})
	c.launchMu.Unlock()
	if err != nil {
		return toolError("launch: %v", err)
	}
	a := launchAnswer{Env: ep.Env, Episode: ep.N, App: ep.App, RunID: ep.RunID, Trace: ep.Trace, Screen: ep.Screen, Windows: []observe.Window{}}
	if _, st, err := ep.Session.Peek(ctx); err == nil && st.Windows != nil {
		a.Windows = st.Windows
	}
	return answer(a)
}

// stateAnswer is the desktop's state.
type stateAnswer struct {
	Env     string           `json:"environment,omitempty"`
	Episode int              `json:"episode"`
	App     string           `json:"app"`
	RunID   string           `json:"run_id"`
	Trace   string           `json:"trace"`
	Screen  observe.Screen   `json:"screen"`
	Cursor  action.Point     `json:"cursor"`
	Windows []observe.Window `json:"windows"`
	Running bool             `json:"running"`
	Exit    string           `json:"exit,omitempty"`
}

func (s *Server) state(ctx context.Context, c *client, t *tool, req *sdk.CallToolRequest) *sdk.CallToolResult {
	args := req.Params.Arguments
	if err := decodeArgs(t, args, &struct{}{}); err != nil {
		return toolError("%v", err)
	}
	ep, err := s.episode(c)
	if err != nil {
		return toolError("%v", err)
	}
	_, st, err := ep.Session.Peek(ctx)
	if err != nil {
		return endedError(c, ep, err)
	}
	a := stateAnswer{Env: ep.Env, Episode: ep.N, App: ep.App, RunID: ep.RunID, Trace: ep.Trace, Screen: ep.Screen,
		Cursor: st.Cursor, Windows: st.Windows, Running: st.Running}
	if a.Windows == nil {
		a.Windows = []observe.Window{}
	}
	if st.Exit != nil {
		a.Exit = st.Exit.String()
	}
	return answer(a)
}

// Bounds of read_output.
const (
	defaultOutputBytes = 16 << 10
	maxOutputBytes     = 256 << 10
	maxOutputWaitMS    = 30_000
)

// outputAnswer is what read_output found.
type outputAnswer struct {
	// Next is where to read on (after=next).
	Next   int64         `json:"next"`
	Output []outputChunk `json:"output"`
	// Gap says the log no longer holds everything after the point asked
	// for (it keeps the latest events within a budget): some output may
	// be missing here, though the trace's logs have it.
	Gap bool `json:"gap,omitempty"`
	// More says there is more than max_bytes: read on from next.
	More bool `json:"more,omitempty"`
}

// outputChunk is output of one stream in a row, an episode's start or the
// app's end.
type outputChunk struct {
	Episode int    `json:"episode"`
	Stream  string `json:"stream,omitempty"`
	Text    string `json:"text,omitempty"`
	// Dropped counts bytes the episode's log cap discarded; Cut, bytes of
	// this chunk left out to keep within max_bytes.
	Dropped int64 `json:"dropped,omitempty"`
	Cut     int   `json:"cut,omitempty"`
	// Started is the run ID of an episode that started here; Exit says
	// how the app ended.
	Started string `json:"started,omitempty"`
	Exit    string `json:"exit,omitempty"`
}

func (s *Server) readOutput(ctx context.Context, c *client, t *tool, req *sdk.CallToolRequest) *sdk.CallToolResult {
	args := req.Params.Arguments
	var in struct {
		After    int64  `json:"after"`
		MaxBytes int    `json:"max_bytes"`
		Stream   string `json:"stream"`
		WaitMS   int    `json:"wait_ms"`
	}
	if err := decodeArgs(t, args, &in); err != nil {
		return toolError("%v", err)
	}
	switch {
	case in.After < 0:
		return toolError("read_output: field \"after\": must not be negative, got %d", in.After)
	case in.MaxBytes < 0 || in.MaxBytes > maxOutputBytes:
		return toolError("read_output: field \"max_bytes\": between 1 and %d, got %d", maxOutputBytes, in.MaxBytes)
	case in.Stream != "" && in.Stream != string(observe.Stdout) && in.Stream != string(observe.Stderr):
		return toolError("read_output: field \"stream\": stdout or stderr, got %q", in.Stream)
	case in.WaitMS < 0 || in.WaitMS > maxOutputWaitMS:
		return toolError("read_output: field \"wait_ms\": between 0 and %d, got %d", maxOutputWaitMS, in.WaitMS)
	}
	if in.MaxBytes == 0 {
		in.MaxBytes = defaultOutputBytes
	}
	out := outputAnswer{Next: in.After, Output: []outputChunk{}}
	events := c.eps.Events()
	log, base := events.Log, events.Base
	if log == nil {
		return answer(out)
	}
	// The log's own numbers; what the client is told adds base.
	after := in.After - base
	if after < 0 {
		out.Gap = in.After < events.Missed // the end of a replaced log was not read
		after = 0
	}
	out.Next = after
	now, cancel := context.WithCancel(ctx)
	cancel() // reads that do not wait
	rctx := now
	if in.WaitMS > 0 {
		var stop context.CancelFunc
		rctx, stop = context.WithTimeout(ctx, msDuration(in.WaitMS))
		defer stop()
	}
	budget := in.MaxBytes
	first := true
	for budget > 0 && !out.More {
		evs, _, _ := log.Read(rctx, out.Next, 256)
		if len(evs) == 0 {
			break
		}
		if first && evs[0].Seq > out.Next+1 {
			out.Gap = true
		}
		first = false
		for _, ev := range evs {
			var ch outputChunk
			switch ev.Kind {
			case session.EventOutput:
				if in.Stream != "" && string(ev.Stream) != in.Stream {
					break
				}
				text := ev.Text
				if len(text) > budget {
					if budget < in.MaxBytes { // text is taken already: this goes next time
						out.More = true
						break
					}
					cut := textcut.Bytes(text, budget, "")
					ch.Cut, text = len(text)-len(cut), cut
				}
				budget -= len(text)
				ch.Episode, ch.Stream, ch.Text, ch.Dropped = ev.Episode, string(ev.Stream), text, ev.Dropped
			case session.EventEpisode:
				ch.Episode, ch.Started = ev.Episode, ev.RunID
			case session.EventExit:
				ch.Episode, ch.Exit = ev.Episode, ev.Exit.String()
			}
			if out.More {
				break
			}
			out.Next = ev.Seq
			if ch.Episode != 0 {
				out.Output = appendChunk(out.Output, ch)
			}
			if budget <= 0 {
				break
			}
		}
		if len(out.Output) > 0 {
			rctx = now // something came: what follows is read without waiting
		}
	}
	out.Next += base
	return answer(out)
}

// appendChunk adds ch, joined to the last chunk when both are output of
// the same stream and episode.
func appendChunk(list []outputChunk, ch outputChunk) []outputChunk {
	if n := len(list); n > 0 && ch.Stream != "" {
		last := &list[n-1]
		if last.Stream == ch.Stream && last.Episode == ch.Episode && last.Cut == 0 {
			last.Text += ch.Text
			last.Dropped += ch.Dropped
			last.Cut = ch.Cut
			return list
		}
	}
	return append(list, ch)
}

func msDuration(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }
