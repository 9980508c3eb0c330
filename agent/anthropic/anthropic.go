// Package anthropic is the model agent for Anthropic's Messages API with the
// computer-use tool (computer_20250124, beta computer-use-2025-01-24).
//
// Each model turn sends the task, the latest screenshots scaled to the
// XGA-class size the model expects (llm.ModelView), the results of the
// previous tool calls and the app's recent output marked as untrusted
// data. Every computer-tool action is mapped onto agentbox's vocabulary;
// coordinates are mapped back to the screen exactly. Agentbox performs one
// action per step, so a tool call that needs several (hold_key, a drag from
// the pointer, several key chords) is queued here and answered with one
// tool_result after its last action. A turn without tool_use ends the run:
// done, with the model's text as the message.
//
// The key comes from ANTHROPIC_API_KEY (or the variable named by
// api_key_env) and never reaches options, the trace or the logs.
package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/agent/llm"
	"github.com/codegirl-games/agentbox/internal/plural"
	"github.com/codegirl-games/agentbox/observe"
)

func init() {
	agent.Register("anthropic", func(opts agent.Options) (agent.Agent, error) { return New(opts) })
}

// DefaultModel is the model used unless the model option or ANTHROPIC_MODEL
// names another: a current model documented with computer_20250124.
const DefaultModel = "claude-haiku-4-5"

// Tool versions the adapter can declare. Both have the same actions; the
// newer one (for newer models) is declared without zoom.
const (
	Tool20250124 = "computer_20250124"
	Tool20251124 = "computer_20251124"
)

// DefaultMaxHistory is how many earlier model turns (tool_use/tool_result
// pairs) a request keeps when max_history is not given.
const DefaultMaxHistory = 50

// maxPauses bounds pause_turn continuations within one decision.
const maxPauses = 5

// Options this adapter adds to llm.CommonOptions.
var extraOptions = []string{"tool"}

// Agent drives the computer-use tool. Decide is called from one goroutine.
type Agent struct {
	cfg       llm.Config
	tool      string
	beta      sdk.AnthropicBeta
	client    sdk.Client
	probe     sdk.Client // for Preflight: no retries, no recording
	transport *http.Transport
	rec       *llm.Recorder
	retry     *llm.Retrier
	queue     llm.QueueSlot // eval --model-concurrency: SetQueue

	begun   bool
	system  string
	screenW int
	screenH int
	disp    display

	msgs    []sdk.BetaMessageParam
	dropped int     // earlier turns dropped by max_history
	pending []*call // tool calls of the last answer not started yet
	cur     *call   // the tool call being performed
	results []sdk.BetaContentBlockParamUnion
	output  []observe.LogLine // app output not yet shown to the model
	// marks are the numbered boxes of the latest screenshot shown (with
	// them the model also has the click_mark tool).
	marks []observe.Mark
	// secrets names the vault's secrets (the observation's): with them the
	// model also has the type_secret tool.
	secrets []string

	// The last screenshot sent, by frame hash: an unchanged screen is not
	// scaled and encoded again.
	lastHash uint64
	lastB64  string
}

// call is one tool_use being performed, action by action.
type call struct {
	id     string
	input  json.RawMessage
	plan   *plan
	next   int    // index of the next action
	failed string // why the call failed, once it did
}

// New makes the agent from its options (see README: Model agents). It
// fails without an API key.
func New(opts agent.Options) (*Agent, error) {
	cfg, err := llm.Parse(opts, extraOptions, "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL", DefaultModel, true)
	if err != nil {
		return nil, err
	}
	if _, ok := opts["max_history"]; !ok {
		cfg.MaxHistory = DefaultMaxHistory
	}
	a := &Agent{cfg: cfg, tool: Tool20250124, beta: sdk.AnthropicBetaComputerUse2025_01_24, rec: llm.NewRecorder(),
		retry: &llm.Retrier{Max: cfg.MaxRetries}}
	if v, ok := opts["tool"]; ok {
		switch v {
		case Tool20250124:
		case Tool20251124:
			a.tool, a.beta = v, sdk.AnthropicBetaComputerUse2025_11_24
		default:
			return nil, fmt.Errorf("option tool: want %s or %s, got %q", Tool20250124, Tool20251124, v)
		}
	}
	a.transport = http.DefaultTransport.(*http.Transport).Clone()
	base := []option.RequestOption{
		option.WithoutEnvironmentDefaults(), // no profiles, no other credentials
		option.WithAPIKey(cfg.APIKey),
		option.WithHTTPClient(&http.Client{Transport: a.transport}),
		option.WithMaxRetries(0), // llm.Retrier retries
	}
	if cfg.BaseURL != "" {
		base = append(base, option.WithBaseURL(cfg.BaseURL))
	}
	// Outermost first: retry, bound each attempt, record each attempt.
	a.client = sdk.NewClient(append(base, option.WithMiddleware(
		a.retry.Middleware, a.queue.Middleware, llm.AttemptTimeout(cfg.Timeout), a.rec.Middleware))...)
	a.probe = sdk.NewClient(base...)
	return a, nil
}

// preflightTimeout bounds the preflight request.
const preflightTimeout = 15 * time.Second

// Preflight implements agent.Preflighter: one GET /v1/models (a page of
// one) with the key, before any sandbox exists. A refused key or a wrong
// URL is a configuration error; no answer is ErrUnreachable.
func (a *Agent) Preflight(ctx context.Context) error {
	var p llm.Probe
	_, err := a.probe.Models.List(ctx, sdk.ModelListParams{Limit: param.NewOpt[int64](1)},
		option.WithMiddleware(p.Middleware, llm.AttemptTimeout(min(a.cfg.Timeout, preflightTimeout))))
	return p.Verdict(ctx, err, a.cfg.KeyEnv, a.cfg.APIKey != "")
}

// SetProgress implements agent.ProgressSetter: a line per retried request.
func (a *Agent) SetProgress(w io.Writer) { a.retry.SetProgress(w) }

// Start implements agent.Starter: the task and the screen size.
func (a *Agent) Start(_ context.Context, t agent.Task) error {
	a.begin(t.Text, t.Width, t.Height)
	return nil
}

// Close implements agent.Closer.
func (a *Agent) Close() error {
	a.transport.CloseIdleConnections()
	return nil
}

func (a *Agent) begin(task string, w, h int) {
	a.begun = true
	a.screenW, a.screenH = w, h
	mw, mh := llm.ScaleFor(w, h)
	a.disp = newDisplay(w, h, mw, mh)
	a.system = llm.Instructions(task, mw, mh) + "\n\n" + fmt.Sprintf(toolRules, mw, mh)
}

// toolRules adds to llm.Instructions what is particular to the computer
// tool: it has no done action.
const toolRules = `You act through the computer tool. Its display is %dx%d pixels: every
coordinate you send is a pixel of the screenshots you receive. The tool has
no done action: when the task is done, stop calling the tool and answer
with a short summary of what you achieved. If the task cannot be done,
answer with a message that starts with "FAILED:" and says why.`

// Decide implements agent.Agent: it performs the next action of the tool
// call in progress, or asks the model for the next turn.
func (a *Agent) Decide(ctx context.Context, obs *observe.Observation) (agent.Decision, error) {
	if obs.Screen == nil {
		return agent.Decision{}, errors.New("anthropic: the observation has no screenshot")
	}
	if !a.begun {
		a.begin(obs.Task, obs.Screen.Width, obs.Screen.Height)
	}
	if a.secrets == nil && len(obs.Secrets) > 0 { // the run's vault: the same at every step
		a.secrets = obs.Secrets
		a.system += llm.SecretsNote(a.secrets)
	}
	if obs.Screen.Width != a.screenW || obs.Screen.Height != a.screenH {
		return agent.Decision{}, fmt.Errorf("anthropic: the screen is %dx%d, the task said %dx%d", obs.Screen.Width, obs.Screen.Height, a.screenW, a.screenH)
	}
	a.output = append(a.output, obs.Output...)
	if c := a.cur; c != nil {
		if d, ok := a.advance(c, obs); ok {
			return d, nil
		}
		if err := a.finish(c, obs, true); err != nil {
			return agent.Decision{}, err
		}
		a.cur = nil
	}
	for len(a.pending) > 0 {
		c := a.pending[0]
		a.pending = a.pending[1:]
		if !obs.Running {
			c.failed = "not performed: the application has exited"
			if err := a.finish(c, obs, false); err != nil {
				return agent.Decision{}, err
			}
			continue
		}
		a.cur = c
		return a.step(c, queuedMeta(a.cfg.Model, c)), nil
	}
	return a.ask(ctx, obs)
}

// advance returns the call's next action, after taking in the result of
// its previous one. After a failure only releases (key_up, mouse_up) run.
func (a *Agent) advance(c *call, obs *observe.Observation) (agent.Decision, bool) {
	if c.failed == "" {
		switch {
		case obs.Last != nil && !obs.Last.OK:
			c.failed = obs.Last.Error
			if c.failed == "" {
				c.failed = "the action failed"
			}
		case !obs.Running:
			c.failed = "the application has exited"
		}
	}
	for c.next < len(c.plan.actions) {
		if c.failed != "" && !c.plan.releases[c.next] {
			c.next++
			continue
		}
		return a.step(c, queuedMeta(a.cfg.Model, c)), true
	}
	return agent.Decision{}, false
}

// step hands out the call's next action.
func (a *Agent) step(c *call, meta map[string]any) agent.Decision {
	i := c.next
	c.next++
	msg := c.plan.name
	if n := len(c.plan.actions); n > 1 {
		msg = fmt.Sprintf("%s, action %d of %d", c.plan.name, i+1, n)
	}
	return agent.Decision{Action: c.plan.actions[i], Message: msg, Meta: meta}
}

func queuedMeta(model string, c *call) map[string]any {
	m := llm.Meta(model, llm.Usage{}, "", 0)
	m["tool_use_id"] = c.id
	m["queued"] = true
	return m
}

// finish turns a performed (or skipped) call into its tool_result, with the
// observation after its last action.
func (a *Agent) finish(c *call, obs *observe.Observation, performed bool) error {
	var text strings.Builder
	if c.failed != "" {
		fmt.Fprintf(&text, "Error: %s\n", c.failed)
	}
	image := performed
	if c.plan.cursor && c.failed == "" {
		p := obs.Cursor
		if obs.Last != nil && obs.Last.Cursor != nil {
			p = *obs.Last.Cursor
		}
		x, y := a.disp.toModel(p.X, p.Y)
		fmt.Fprintf(&text, "X=%d,Y=%d\n", x, y)
		image = false
	}
	text.WriteString(a.observationText(obs))
	content := []sdk.BetaToolResultBlockParamContentUnion{{OfText: &sdk.BetaTextBlockParam{Text: text.String()}}}
	if image {
		img, err := a.image(obs)
		if err != nil {
			return err
		}
		content = append(content, sdk.BetaToolResultBlockParamContentUnion{OfImage: img})
	}
	r := sdk.BetaToolResultBlockParam{ToolUseID: c.id, Content: content}
	if c.failed != "" {
		r.IsError = param.NewOpt(true)
	}
	a.results = append(a.results, sdk.BetaContentBlockParamUnion{OfToolResult: &r})
	return nil
}

// observationText renders the observation in the model's coordinates with
// the app output not yet shown, which it then forgets.
func (a *Agent) observationText(obs *observe.Observation) string {
	o := *obs
	o.Cursor.X, o.Cursor.Y = a.disp.toModel(obs.Cursor.X, obs.Cursor.Y)
	o.Windows = make([]observe.Window, len(obs.Windows))
	for i, w := range obs.Windows {
		x0, y0 := a.disp.toModel(w.X, w.Y)
		x1, y1 := a.disp.toModel(w.X+w.Width, w.Y+w.Height)
		w.X, w.Y, w.Width, w.Height = x0, y0, x1-x0, y1-y0
		o.Windows[i] = w
	}
	o.Tree = llm.MapTree(obs.Tree, a.disp.toModel)
	o.Output = a.output
	o.Last = nil // told by the tool_result itself
	a.output = nil
	return llm.ObservationText(&o)
}

// image is the screenshot as the model sees it: scaled to its display,
// base64 PNG, registered with the recorder under the trace's screenshot.
func (a *Agent) image(obs *observe.Observation) (*sdk.BetaImageBlockParam, error) {
	b64 := a.lastB64
	if h := obs.Screen.Hash; h == 0 || h != a.lastHash {
		v, err := llm.ModelView(obs.Screen)
		if err != nil {
			return nil, fmt.Errorf("anthropic: scale the screenshot: %w", err)
		}
		if v.Frame.Width != a.disp.width() || v.Frame.Height != a.disp.height() {
			return nil, fmt.Errorf("anthropic: scaled screenshot is %dx%d, the tool says %dx%d", v.Frame.Width, v.Frame.Height, a.disp.width(), a.disp.height())
		}
		if b64, err = llm.PNGBase64(v.Frame); err != nil {
			return nil, fmt.Errorf("anthropic: encode the screenshot: %w", err)
		}
		a.lastHash, a.lastB64 = h, b64
	}
	ref := obs.ScreenshotRef
	if ref == "" {
		ref = fmt.Sprintf("step %d", obs.Step)
	}
	a.rec.Image(b64, ref)
	return &sdk.BetaImageBlockParam{Source: sdk.BetaImageBlockParamSourceUnion{
		OfBase64: &sdk.BetaBase64ImageSourceParam{Data: b64, MediaType: sdk.BetaBase64ImageSourceMediaTypeImagePNG},
	}}, nil
}

// ask sends the next user turn and interprets the answer, telling
// malformed answers back up to MaxMalformed times.
func (a *Agent) ask(ctx context.Context, obs *observe.Observation) (agent.Decision, error) {
	content := a.results
	a.results = nil
	if len(a.msgs) == 0 || len(content) == 0 {
		img, err := a.image(obs)
		if err != nil {
			return agent.Decision{}, err
		}
		a.marks = obs.Marks
		intro := fmt.Sprintf("This is the screen now (%dx%d). ", a.disp.width(), a.disp.height())
		content = append(content,
			sdk.BetaContentBlockParamUnion{OfText: &sdk.BetaTextBlockParam{Text: intro + a.observationText(obs)}},
			sdk.BetaContentBlockParamUnion{OfImage: img})
	}
	a.msgs = append(a.msgs, sdk.BetaMessageParam{Role: sdk.BetaMessageParamRoleUser, Content: content})

	var usage llm.Usage
	var texts []string
	malformed, pauses := 0, 0
	for attempt := 1; ; attempt++ {
		resp, err := a.send(ctx)
		if err != nil {
			// Every attempt is in the trace, failed ones too.
			m := llm.Meta(a.cfg.Model, usage, strings.Join(texts, "\n"), attempt)
			m["http_attempts"] = a.retry.Attempts()
			return agent.Decision{Meta: m, Files: a.files()}, err
		}
		usage.InputTokens += resp.Usage.InputTokens
		usage.OutputTokens += resp.Usage.OutputTokens
		a.msgs = append(a.msgs, resp.ToParam())
		text := responseText(resp)
		if text != "" {
			texts = append(texts, text)
		}
		meta := func() map[string]any {
			m := llm.Meta(a.cfg.Model, usage, strings.Join(texts, "\n"), attempt)
			m["stop_reason"] = string(resp.StopReason)
			m["display"] = fmt.Sprintf("%dx%d", a.disp.width(), a.disp.height())
			return m
		}
		calls, bad := a.plans(resp)
		switch {
		case bad != nil:
			malformed++
			if malformed > a.cfg.MaxMalformed {
				return agent.Decision{Meta: meta(), Files: a.files()}, fmt.Errorf("anthropic: %w after %d answers (max_malformed %d): %v", agent.ErrMalformed, attempt, a.cfg.MaxMalformed, bad)
			}
			a.msgs = append(a.msgs, sdk.BetaMessageParam{Role: sdk.BetaMessageParamRoleUser, Content: bad.results})
			continue
		case len(calls) > 0:
			inputs := map[string]any{}
			for _, c := range calls {
				inputs[c.id] = c.input
			}
			m := meta()
			m["tool_use"] = inputs
			a.pending = calls[1:]
			a.cur = calls[0]
			m["tool_use_id"] = a.cur.id
			d := a.step(a.cur, m)
			if text != "" {
				d.Message = text
			}
			d.Files = a.files()
			return d, nil
		case resp.StopReason == sdk.BetaStopReasonPauseTurn && pauses < maxPauses:
			pauses++ // the API asks to send the turn back as it is
			continue
		case resp.StopReason == sdk.BetaStopReasonMaxTokens:
			malformed++
			if malformed > a.cfg.MaxMalformed {
				return agent.Decision{Meta: meta(), Files: a.files()}, fmt.Errorf("anthropic: %w: the answer was cut off at max_tokens %d, %d times (max_malformed %d)", agent.ErrMalformed, a.cfg.MaxTokens, malformed, a.cfg.MaxMalformed)
			}
			a.msgs = append(a.msgs, sdk.BetaMessageParam{Role: sdk.BetaMessageParamRoleUser, Content: []sdk.BetaContentBlockParamUnion{{OfText: &sdk.BetaTextBlockParam{
				Text: fmt.Sprintf("Your answer was cut off at the %d-token limit. Answer briefly: one tool call, or a short final message.", a.cfg.MaxTokens)}}}})
			continue
		}
		// The model ended its turn without a tool call: it is finished.
		ok := true
		msg := strings.TrimSpace(text)
		switch {
		case resp.StopReason == sdk.BetaStopReasonRefusal:
			ok, msg = false, "the model refused: "+msg
		case strings.HasPrefix(strings.ToUpper(msg), "FAILED"):
			ok = false
		case msg == "":
			msg = "the model ended its turn"
		}
		return agent.Decision{
			Action:  action.Action{Kind: action.Done, Success: &ok, Message: msg},
			Message: msg, Meta: meta(), Files: a.files(),
		}, nil
	}
}

// malformedAnswer is an answer whose tool calls cannot be performed, with
// the tool_results that tell the model why.
type malformedAnswer struct {
	results []sdk.BetaContentBlockParamUnion
	first   string
}

func (m *malformedAnswer) Error() string { return m.first }

// plans maps every tool_use of an answer. If any cannot be performed, none
// is: each gets an error tool_result saying why.
func (a *Agent) plans(resp *sdk.BetaMessage) ([]*call, *malformedAnswer) {
	var calls []*call
	var errs []string
	bad := false
	for _, b := range resp.Content {
		if b.Type != "tool_use" {
			continue
		}
		c := &call{id: b.ID, input: b.Input}
		var err error
		switch {
		case b.Name == llm.MarkTool && len(a.marks) > 0:
			c.plan, err = markInput(b.Input, a.marks)
		case b.Name == llm.TypeSecretTool && len(a.secrets) > 0:
			c.plan, err = secretInput(b.Input)
		case b.Name != "computer":
			err = badInput("unknown tool %q: the only tool is computer", b.Name)
		case resp.StopReason == sdk.BetaStopReasonMaxTokens:
			err = badInput("the answer was cut off at the %d-token limit, so this input may be incomplete", a.cfg.MaxTokens)
		default:
			c.plan, err = mapInput(b.Input, a.disp)
		}
		calls = append(calls, c)
		if err != nil {
			bad = true
			errs = append(errs, err.Error())
		} else {
			errs = append(errs, "")
		}
	}
	if !bad {
		return calls, nil
	}
	m := &malformedAnswer{}
	for i, c := range calls {
		msg := errs[i]
		if msg == "" {
			msg = "not performed: another tool call of the same answer was invalid; send it again if still wanted"
		} else {
			if m.first == "" {
				m.first = fmt.Sprintf("tool_use %s: %s", c.id, msg)
			}
			msg = "invalid input, nothing was done: " + msg
		}
		r := sdk.BetaToolResultBlockParam{ToolUseID: c.id, IsError: param.NewOpt(true),
			Content: []sdk.BetaToolResultBlockParamContentUnion{{OfText: &sdk.BetaTextBlockParam{Text: msg}}}}
		m.results = append(m.results, sdk.BetaContentBlockParamUnion{OfToolResult: &r})
	}
	return nil, m
}

// send makes one request (the SDK retries it) with the history trimmed.
func (a *Agent) send(ctx context.Context) (*sdk.BetaMessage, error) {
	a.trim()
	p := sdk.BetaMessageNewParams{
		Model:     a.cfg.Model,
		MaxTokens: int64(a.cfg.MaxTokens),
		System:    []sdk.BetaTextBlockParam{{Text: a.system}},
		Tools:     a.tools(),
		Messages:  a.window(),
		Betas:     []sdk.AnthropicBeta{a.beta},
	}
	if a.cfg.Temperature != nil {
		p.Temperature = param.NewOpt(*a.cfg.Temperature)
	}
	resp, err := a.client.Beta.Messages.New(ctx, p)
	if err != nil {
		return nil, a.describe(ctx, err)
	}
	return resp, nil
}

// tools are the computer tool and, while the screenshot has marks, the
// tool that clicks one.
func (a *Agent) tools() []sdk.BetaToolUnionParam {
	t := []sdk.BetaToolUnionParam{a.toolParam()}
	if len(a.marks) > 0 {
		t = append(t, sdk.BetaToolUnionParam{OfTool: &sdk.BetaToolParam{
			Name:        llm.MarkTool,
			Description: param.NewOpt(llm.MarkToolDescription),
			InputSchema: sdk.BetaToolInputSchemaParam{
				Properties: map[string]any{"mark": map[string]any{"type": "integer", "description": "the mark's number"}},
				Required:   []string{"mark"},
			},
		}})
	}
	if len(a.secrets) > 0 {
		t = append(t, sdk.BetaToolUnionParam{OfTool: &sdk.BetaToolParam{
			Name:        llm.TypeSecretTool,
			Description: param.NewOpt(llm.TypeSecretToolDescription),
			InputSchema: sdk.BetaToolInputSchemaParam{
				Properties: map[string]any{"secret": map[string]any{"type": "string", "enum": a.secrets, "description": "the secret's name"}},
				Required:   []string{"secret"},
			},
		}})
	}
	return t
}

// secretInput maps a type_secret call onto the action (the session
// refuses a name its vault does not hold).
func secretInput(raw json.RawMessage) (*plan, error) {
	var in struct {
		Secret *string `json:"secret"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || in.Secret == nil {
		return nil, badInput("type_secret takes {\"secret\": NAME}, got %s", string(raw))
	}
	return &plan{name: llm.TypeSecretTool, actions: []action.Action{{Kind: action.TypeSecret, Secret: *in.Secret}}, releases: []bool{false}}, nil
}

// markInput maps a click_mark call onto a click at the mark's centre
// (screen pixels: the mark was found on the screen), recorded with the
// mark.
func markInput(raw json.RawMessage, marks []observe.Mark) (*plan, error) {
	var in struct {
		Mark *int `json:"mark"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || in.Mark == nil {
		return nil, badInput("click_mark takes {\"mark\": N}, got %s", string(raw))
	}
	a := action.Action{Kind: action.Click, Mark: *in.Mark}
	if err := observe.ResolveMark(&a, marks); err != nil {
		return nil, badInput("%v", err)
	}
	return &plan{name: llm.MarkTool, actions: []action.Action{a}, releases: []bool{false}}, nil
}

func (a *Agent) toolParam() sdk.BetaToolUnionParam {
	w, h := int64(a.disp.width()), int64(a.disp.height())
	if a.tool == Tool20251124 {
		return sdk.BetaToolUnionParam{OfComputerUseTool20251124: &sdk.BetaToolComputerUse20251124Param{
			DisplayWidthPx: w, DisplayHeightPx: h, DisplayNumber: param.NewOpt[int64](1)}}
	}
	return sdk.BetaToolUnionParam{OfComputerUseTool20250124: &sdk.BetaToolComputerUse20250124Param{
		DisplayWidthPx: w, DisplayHeightPx: h, DisplayNumber: param.NewOpt[int64](1)}}
}

// describe words a failed request once: the HTTP status and the API's
// error (or an excerpt of whatever else the server sent), or the timeout,
// with the number of attempts. The SDK's error is wrapped, not repeated:
// its text holds the whole response body.
func (a *Agent) describe(ctx context.Context, err error) error {
	n := a.retry.Attempts()
	var apiErr *sdk.Error
	switch {
	case errors.As(err, &apiErr):
		msg := fmt.Sprintf("anthropic: %s after %s (max_retries %d)", llm.Status(apiErr.StatusCode), plural.S(n, "attempt"), a.cfg.MaxRetries)
		if d := llm.ErrorDetail([]byte(apiErr.RawJSON())); d != "" {
			msg += ": " + d
		}
		return llm.Wrap(msg, err)
	case ctx.Err() == nil && errors.Is(err, llm.ErrTimeout):
		return llm.Wrap(fmt.Sprintf("anthropic: no answer within the %v timeout, %s (max_retries %d)", a.cfg.Timeout, plural.S(n, "attempt"), a.cfg.MaxRetries), err)
	}
	return fmt.Errorf("anthropic: request failed after %s: %w", plural.S(n, "attempt"), err)
}

// files are the raw exchanges of this decision, for the trace.
func (a *Agent) files() map[string][]byte {
	if b := a.rec.Take(); b != nil {
		return map[string][]byte{"exchange.json": b}
	}
	return nil
}

func responseText(resp *sdk.BetaMessage) string {
	var parts []string
	for _, b := range resp.Content {
		if b.Type == "text" && strings.TrimSpace(b.Text) != "" {
			parts = append(parts, strings.TrimSpace(b.Text))
		}
	}
	return strings.Join(parts, "\n")
}

// SetQueue implements llm.Queued: the model requests wait their turn in
// q, shared with other episodes.
func (a *Agent) SetQueue(q *llm.Queue) { a.queue.SetQueue(q) }

// Rehearse implements agent.Rehearser: the next Decide's requests are
// answered by the recorded exchanges (a resume rebuilding the history).
func (a *Agent) Rehearse(recorded []byte) error { return a.rec.Play(recorded) }

// Rehearsed implements agent.Rehearser.
func (a *Agent) Rehearsed() error { return a.rec.Stop() }
