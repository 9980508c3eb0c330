package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/agent/llm"
	"github.com/codegirl-games/agentbox/observe"
)

// DefaultModel is the Responses agent's model.
const DefaultModel = "computer-use-preview"

// Safety-check policies (option safety_checks).
const (
	// SafetyAcknowledge acknowledges the model's pending safety checks in
	// the next computer_call_output and runs the action: the sandbox is
	// disposable and has no network, so what the checks guard against
	// (prompt injection steering the agent, sensitive sites) is contained.
	SafetyAcknowledge = "acknowledge"
	// SafetyStop ends the run (outcome failure, reason gave_up) when a
	// computer call carries pending safety checks, without running it.
	SafetyStop = "stop"
)

// Responses is the "openai" agent: OpenAI's Responses API with the
// computer-use tool. The conversation lives on the server: each turn is
// chained to the previous one with previous_response_id and carries the
// computer_call_output (the new screenshot) and, as a user message, the
// observation's text (the app's output marked as untrusted data).
type Responses struct {
	*client
	svc       responses.ResponseService
	safety    string
	waitMS    int
	maxScroll int

	prevID string
	calls  []pendingCall   // computer calls that need an output next turn
	queue  []action.Action // actions of the last call still to run
}

// pendingCall is a computer call (or a click_mark function call)
// answered by agentbox actions, waiting for its output.
type pendingCall struct {
	id     string
	fn     string // the function's name; "" for a computer call
	checks []safetyCheck
}

// safetyCheck is one pending safety check, as recorded in the decision's
// meta and acknowledged back.
type safetyCheck struct {
	ID      string `json:"id"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// ResponsesOptions are the "openai" agent's options besides llm.CommonOptions
// (max_screenshots and max_history do not apply: the server keeps the
// conversation and truncation is auto).
var ResponsesOptions = []string{"max_width", "safety_checks", "wait_ms", "max_scroll"}

// NewResponses makes the "openai" agent. Options: those of llm.Parse
// (model defaults to computer-use-preview; OPENAI_API_KEY is required),
// max_width (default 1280: wider screens are scaled down, coordinates
// mapped back exactly), safety_checks (acknowledge, the default, or stop),
// wait_ms (what the model's wait action waits, default 1000) and
// max_scroll (wheel clicks per axis per scroll action, default 10).
func NewResponses(opts agent.Options) (*Responses, error) {
	for _, k := range []string{"max_screenshots", "max_history"} {
		if _, ok := opts[k]; ok {
			return nil, fmt.Errorf("option %s does not apply to openai: the Responses API keeps the conversation on the server and truncates it itself (truncation auto)", k)
		}
	}
	cfg, err := llm.Parse(opts, ResponsesOptions, KeyEnv, URLEnv, "", DefaultModel, true)
	if err != nil {
		return nil, err
	}
	maxWidth, err := parseMaxWidth(opts)
	if err != nil {
		return nil, err
	}
	r := &Responses{safety: SafetyAcknowledge, waitMS: 1000, maxScroll: 10}
	if v, ok := opts["safety_checks"]; ok {
		if v != SafetyAcknowledge && v != SafetyStop {
			return nil, fmt.Errorf("option safety_checks: want %s or %s, got %q", SafetyAcknowledge, SafetyStop, v)
		}
		r.safety = v
	}
	for _, o := range []struct {
		name     string
		dst      *int
		min, max int
	}{{"wait_ms", &r.waitMS, 0, 60000}, {"max_scroll", &r.maxScroll, 1, 100}} {
		if v, ok := opts[o.name]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < o.min || n > o.max {
				return nil, fmt.Errorf("option %s: want %d–%d, got %q", o.name, o.min, o.max, v)
			}
			*o.dst = n
		}
	}
	r.client = newClient(cfg, maxWidth)
	r.svc = responses.NewResponseService(r.sdkOpts...)
	return r, nil
}

// finishRule adds to the shared system prompt what "done" means with a
// tool that has no done action.
const finishRule = `The computer tool has no done action: when you are finished, answer with
a message and no computer call. If the task cannot be done, start that
message with "FAILED:" and say why.`

// failedPrefix marks a final message that gives up.
const failedPrefix = "FAILED:"

// turn is what one response said.
type turn struct {
	id      string
	calls   []computerCall
	text    string // the model's words (output_text, else reasoning summaries)
	refusal string
	status  string
	reason  string // incomplete_details.reason
}

// computerCall is a computer call, or a function call (fn set: the
// click_mark tool, offered while the screenshot has marks) whose one
// action is its arguments.
type computerCall struct {
	id      string
	fn      string
	actions []string // raw JSON of each action
	checks  []safetyCheck
}

// Decide implements agent.Agent.
func (r *Responses) Decide(ctx context.Context, obs *observe.Observation) (agent.Decision, error) {
	if len(r.queue) > 0 {
		// The rest of a batched computer call (or the key_up after a move
		// with keys held): no model call.
		a := r.queue[0]
		r.queue = r.queue[1:]
		md := llm.Meta(r.cfg.Model, llm.Usage{}, "", 0)
		md["continues_call"] = true
		return agent.Decision{Action: a, Meta: md}, nil
	}
	s, err := r.screenshot(obs)
	if err != nil {
		return agent.Decision{}, err
	}
	m := mapping{view: s.view, limits: action.DefaultLimits(obs.Screen.Width, obs.Screen.Height), waitMS: r.waitMS, maxShift: r.maxScroll, marks: obs.Marks}
	input := r.nextInput(obs, s, "")
	var (
		usage    llm.Usage
		problems []string
		texts    []string
		checks   []safetyCheck
		raws     []json.RawMessage
	)
	meta := func(attempts int, last string) map[string]any {
		md := llm.Meta(r.cfg.Model, usage, strings.Join(texts, "\n"), attempts)
		md["response_id"] = last
		if len(checks) > 0 {
			md["pending_safety_checks"] = checks
		}
		if len(problems) > 0 {
			md["malformed"] = problems
		}
		if len(raws) > 0 {
			md["computer_actions"] = raws
		}
		return md
	}
	for attempt := 1; ; attempt++ {
		t, u, err := r.create(ctx, obs, s, input)
		usage.InputTokens += u.InputTokens
		usage.OutputTokens += u.OutputTokens
		if err != nil {
			return agent.Decision{Meta: meta(attempt, r.prevID), Files: r.files()}, err
		}
		r.prevID = t.id
		if t.text != "" {
			texts = append(texts, t.text)
		}
		for _, c := range t.calls {
			checks = append(checks, c.checks...)
			for _, a := range c.actions {
				if json.Valid([]byte(a)) {
					raws = append(raws, json.RawMessage(a))
				}
			}
		}
		if len(t.calls) > 0 && r.safety == SafetyStop && hasChecks(t.calls) {
			msg := "the model raised safety checks and safety_checks=stop ends the run: " + describeChecks(t.calls)
			no := false
			return agent.Decision{
				Action:  action.Action{Kind: action.Done, Success: &no, Message: msg},
				Message: msg, Meta: meta(attempt, t.id), Files: r.files(),
			}, nil
		}
		acts, answer, problem := interpret(t, m)
		if problem == nil {
			if len(t.calls) == 0 {
				// Only a message: the model is finished.
				done := action.Action{Kind: action.Done, Message: t.text}
				if rest, failed := strings.CutPrefix(t.text, failedPrefix); failed {
					no := false
					done.Success, done.Message = &no, strings.TrimSpace(rest)
				}
				return agent.Decision{Action: done, Message: t.text, Meta: meta(attempt, t.id), Files: r.files()}, nil
			}
			r.calls = pending(t.calls)
			r.queue = acts[1:]
			return agent.Decision{Action: acts[0], Message: t.text, Meta: meta(attempt, t.id), Files: r.files()}, nil
		}
		problems = append(problems, fmt.Sprintf("%s (%v)", answer, problem))
		if attempt > r.cfg.MaxMalformed {
			return agent.Decision{Meta: meta(attempt, t.id), Files: r.files()}, malformed(problems)
		}
		// Tell the model what was wrong; the screen is unchanged.
		r.calls = pending(t.calls)
		input = r.nextInput(obs, s, fmt.Sprintf(
			"Your last answer was not performed: %v. The screenshot is %dx%d pixels; x must be 0–%d and y 0–%d. "+
				"Answer with one valid computer action, or, when the task is finished, with a message and no action.",
			problem, s.view.Frame.Width, s.view.Frame.Height, s.view.Frame.Width-1, s.view.Frame.Height-1))
	}
}

// interpret turns a response into agentbox actions; for a response
// without a computer call it returns no actions and no problem when the
// model said something (it is finished). answer describes what the model
// answered, for error messages.
func interpret(t turn, m mapping) ([]action.Action, string, error) {
	if len(t.calls) == 0 {
		switch {
		case t.refusal != "":
			return nil, "a refusal " + strconv.Quote(clip(t.refusal, 200)), fmt.Errorf("the model refused")
		case t.text != "":
			return nil, "", nil
		case t.reason != "":
			return nil, "an incomplete response", fmt.Errorf("the response is incomplete (%s) and has no computer call", t.reason)
		default:
			return nil, "an empty response", fmt.Errorf("the response has neither a computer call nor a message (status %q)", t.status)
		}
	}
	var out []action.Action
	var raws []string
	for _, c := range t.calls {
		if c.fn != "" {
			a, err := markCall(c, m.marks)
			if err != nil {
				return nil, clip(c.fn+" "+strings.Join(c.actions, " "), 300), err
			}
			out = append(out, a)
			continue
		}
		if len(c.actions) == 0 {
			return nil, "a computer call without an action", fmt.Errorf("computer call %s has no action", c.id)
		}
		for _, raw := range c.actions {
			raws = append(raws, raw)
			acts, err := mapComputerAction([]byte(raw), m)
			if err != nil {
				return nil, clip(strings.Join(raws, " "), 300), err
			}
			out = append(out, acts...)
		}
	}
	return out, "", nil
}

// markCall maps a click_mark function call onto a click at the mark's
// centre (screen pixels: the marks were found on the screen, not on the
// scaled screenshot), recorded with the mark.
func markCall(c computerCall, marks []observe.Mark) (action.Action, error) {
	if c.fn != llm.MarkTool || len(marks) == 0 {
		return action.Action{}, fmt.Errorf("function call %s: unknown function %q: the tools are computer and, while the screenshot has marks, %s", c.id, c.fn, llm.MarkTool)
	}
	var in struct {
		Mark *int `json:"mark"`
	}
	dec := json.NewDecoder(strings.NewReader(strings.Join(c.actions, "")))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || in.Mark == nil {
		return action.Action{}, fmt.Errorf("%s takes {\"mark\": N}, got %s", llm.MarkTool, clip(strings.Join(c.actions, ""), 200))
	}
	a := action.Action{Kind: action.Click, Mark: *in.Mark}
	if err := observe.ResolveMark(&a, marks); err != nil {
		return action.Action{}, err
	}
	return a, nil
}

// markTool is the click_mark function tool of the Responses API.
func markTool() responses.ToolUnionParam {
	t := responses.ToolParamOfFunction(llm.MarkTool, map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"mark": map[string]any{"type": "integer", "description": "the mark's number"}},
		"required":             []string{"mark"},
		"additionalProperties": false,
	}, true)
	t.OfFunction.Description = param.NewOpt(llm.MarkToolDescription)
	return t
}

func pending(calls []computerCall) []pendingCall {
	var out []pendingCall
	for _, c := range calls {
		out = append(out, pendingCall{id: c.id, fn: c.fn, checks: c.checks})
	}
	return out
}

func hasChecks(calls []computerCall) bool {
	for _, c := range calls {
		if len(c.checks) > 0 {
			return true
		}
	}
	return false
}

func describeChecks(calls []computerCall) string {
	var s []string
	for _, c := range calls {
		for _, k := range c.checks {
			s = append(s, fmt.Sprintf("%s (%s)", k.Code, clip(k.Message, 200)))
		}
	}
	return strings.Join(s, "; ")
}

// nextInput is the input of the next request: the outputs of the pending
// computer calls with the new screenshot (acknowledging their safety
// checks) and a user message with the observation's text — or, on the
// first turn, a user message with the text and the screenshot. note, if
// set, says what was wrong with the last answer.
func (r *Responses) nextInput(obs *observe.Observation, s shot, note string) responses.ResponseInputParam {
	var in responses.ResponseInputParam
	text := llm.ObservationText(modelObs(obs, s.view))
	if note != "" {
		text = note + "\n\n" + text
	}
	if len(r.calls) == 0 && r.prevID == "" {
		img := responses.ResponseInputContentParamOfInputImage(responses.ResponseInputImageDetailHigh)
		img.OfInputImage.ImageURL = param.NewOpt(s.dataURL)
		content := responses.ResponseInputMessageContentListParam{responses.ResponseInputContentParamOfInputText(text), img}
		return append(in, responses.ResponseInputItemParamOfMessage(content, responses.EasyInputMessageRoleUser))
	}
	screenshotSent := false
	for _, c := range r.calls {
		if c.fn != "" {
			// A function's output is text: the screenshot goes in the user
			// message below unless a computer call's output carries it.
			out := "Done; the new screenshot and what the app printed follow."
			if note != "" {
				out = "Not performed; the next message says why."
			}
			item := responses.ResponseInputItemParamOfFunctionCallOutput(out)
			item.OfFunctionCallOutput.CallID = param.NewOpt(c.id)
			in = append(in, item)
			continue
		}
		screenshotSent = true
		item := responses.ResponseInputItemParamOfComputerCallOutput(c.id, responses.ResponseComputerToolCallOutputScreenshotParam{
			ImageURL: param.NewOpt(s.dataURL),
		})
		for _, k := range c.checks {
			ack := responses.ResponseInputItemComputerCallOutputAcknowledgedSafetyCheckParam{ID: k.ID}
			if k.Code != "" {
				ack.Code = param.NewOpt(k.Code)
			}
			if k.Message != "" {
				ack.Message = param.NewOpt(k.Message)
			}
			item.OfComputerCallOutput.AcknowledgedSafetyChecks = append(item.OfComputerCallOutput.AcknowledgedSafetyChecks, ack)
		}
		in = append(in, item)
	}
	if !screenshotSent {
		// After a turn without a computer call (a refusal told back, or a
		// click_mark) the model needs the screen again.
		r.calls = nil
		img := responses.ResponseInputContentParamOfInputImage(responses.ResponseInputImageDetailHigh)
		img.OfInputImage.ImageURL = param.NewOpt(s.dataURL)
		content := responses.ResponseInputMessageContentListParam{responses.ResponseInputContentParamOfInputText(text), img}
		return append(in, responses.ResponseInputItemParamOfMessage(content, responses.EasyInputMessageRoleUser))
	}
	r.calls = nil
	return append(in, responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser))
}

// create sends one request (the SDK retries 429, 5xx and timeouts) and
// reads the response.
func (r *Responses) create(ctx context.Context, obs *observe.Observation, s shot, input responses.ResponseInputParam) (turn, llm.Usage, error) {
	p := responses.ResponseNewParams{
		Model:        r.cfg.Model,
		Instructions: param.NewOpt(r.instructions(obs) + "\n\n" + finishRule),
		Input:        responses.ResponseNewParamsInputUnion{OfInputItemList: input},
		Tools: []responses.ToolUnionParam{responses.ToolParamOfComputerUsePreview(
			int64(s.view.Frame.Height), int64(s.view.Frame.Width), responses.ComputerUsePreviewToolEnvironmentLinux)},
		Truncation:      responses.ResponseNewParamsTruncationAuto,
		MaxOutputTokens: param.NewOpt(int64(r.cfg.MaxTokens)),
	}
	if len(obs.Marks) > 0 {
		p.Tools = append(p.Tools, markTool())
	}
	if r.prevID != "" {
		p.PreviousResponseID = param.NewOpt(r.prevID)
	}
	if t := r.cfg.Temperature; t != nil {
		p.Temperature = param.NewOpt(*t)
	}
	resp, err := r.svc.New(ctx, p)
	if err != nil {
		return turn{}, llm.Usage{}, r.callError("POST responses", err)
	}
	u := llm.Usage{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens}
	if resp.ID == "" {
		return turn{}, u, fmt.Errorf("POST responses: the response has no id")
	}
	if resp.Status == responses.ResponseStatusFailed {
		return turn{}, u, fmt.Errorf("POST responses: the response failed: %s: %s", resp.Error.Code, resp.Error.Message)
	}
	t := turn{id: resp.ID, status: string(resp.Status), reason: resp.IncompleteDetails.Reason}
	var texts, summaries []string
	for _, item := range resp.Output {
		switch item.Type {
		case "computer_call":
			cc := item.AsComputerCall()
			c := computerCall{id: cc.CallID}
			if raw := cc.Action.RawJSON(); raw != "" && raw != "null" {
				c.actions = append(c.actions, raw)
			} else {
				for _, a := range cc.Actions {
					c.actions = append(c.actions, a.RawJSON())
				}
			}
			for _, k := range cc.PendingSafetyChecks {
				c.checks = append(c.checks, safetyCheck{ID: k.ID, Code: k.Code, Message: k.Message})
			}
			if c.id == "" {
				return t, u, fmt.Errorf("POST responses: a computer call without call_id")
			}
			t.calls = append(t.calls, c)
		case "function_call":
			fc := item.AsFunctionCall()
			if fc.CallID == "" {
				return t, u, fmt.Errorf("POST responses: a function call without call_id")
			}
			t.calls = append(t.calls, computerCall{id: fc.CallID, fn: fc.Name, actions: []string{fc.Arguments}})
		case "message":
			for _, part := range item.Content {
				switch part.Type {
				case "output_text":
					texts = append(texts, part.Text)
				case "refusal":
					t.refusal += part.Refusal
				}
			}
		case "reasoning":
			for _, sm := range item.AsReasoning().Summary {
				summaries = append(summaries, sm.Text)
			}
		}
	}
	t.text = strings.TrimSpace(strings.Join(texts, "\n"))
	if t.text == "" {
		t.text = strings.TrimSpace(strings.Join(summaries, "\n"))
		if len(t.calls) == 0 {
			// A reasoning summary alone does not finish the task.
			t.text = ""
		}
	}
	return t, u, nil
}
