package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/agent/llm"
	"github.com/codegirl-games/agentbox/observe"
)

// Response formats of the chat agent (option response_format).
const (
	FormatSchema = "json_schema" // strict JSON schema (AnswerSchema)
	FormatObject = "json_object" // any JSON object; the prompt describes it
	FormatNone   = "none"        // no response_format; the prompt describes it
)

// Chat is the "openai-chat" agent: any OpenAI-compatible chat-completions
// server with vision. Each turn sends the system prompt, the conversation
// so far (each step's observation text and the model's answer, at most
// max_history of them) with the latest max_screenshots screenshots (older
// ones replaced by a note), and asks for one action as a JSON object.
type Chat struct {
	*client
	svc     sdk.ChatCompletionService
	format  string
	history []chatTurn
}

// chatTurn is one finished step of the conversation.
type chatTurn struct {
	step   int
	text   string // the observation as told
	shot   shot   // the screenshot as sent
	answer string // the model's answer, verbatim
}

// ChatOptions are the "openai-chat" agent's options besides
// llm.CommonOptions.
var ChatOptions = []string{"max_width", "response_format"}

// NewChat makes the "openai-chat" agent. Options: those of llm.Parse
// (model is required; a key is optional: OPENAI_API_KEY or the variable
// named by api_key_env is sent when set, so servers without keys such as
// Ollama work with it unset), max_width (default 1280) and
// response_format (json_schema, the default; json_object or none for
// servers without schema support).
func NewChat(opts agent.Options) (*Chat, error) {
	cfg, err := llm.Parse(opts, ChatOptions, KeyEnv, URLEnv, "", "", false)
	if err != nil {
		return nil, err
	}
	maxWidth, err := parseMaxWidth(opts)
	if err != nil {
		return nil, err
	}
	c := &Chat{format: FormatSchema}
	if v, ok := opts["response_format"]; ok {
		switch v {
		case FormatSchema, FormatObject, FormatNone:
			c.format = v
		default:
			return nil, fmt.Errorf("option response_format: want %s, %s or %s, got %q", FormatSchema, FormatObject, FormatNone, v)
		}
	}
	c.client = newClient(cfg, maxWidth)
	c.svc = sdk.NewChatCompletionService(c.sdkOpts...)
	return c, nil
}

// Preflight implements agent.Preflighter. An OpenAI-compatible server
// need not list its models: when GET models is not there (404, 405), the
// endpoint itself is asked, with an empty request (refused before any
// model runs, so it costs nothing): any answer but 401, 403, 404 and 405
// shows it is there.
func (c *Chat) Preflight(ctx context.Context) error {
	p, err := c.listModels(ctx)
	if s := p.Status(); err == nil || (s != http.StatusNotFound && s != http.StatusMethodNotAllowed) {
		return err
	}
	var q llm.Probe
	req, rerr := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+"chat/completions", strings.NewReader("{}"))
	if rerr != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, qerr := llm.AttemptTimeout(min(c.cfg.Timeout, preflightTimeout))(req, func(r *http.Request) (*http.Response, error) {
		return q.Middleware(r, c.http.Do)
	})
	if qerr == nil {
		resp.Body.Close()
	}
	switch s := q.Status(); s {
	case 0, http.StatusNotFound, http.StatusMethodNotAllowed:
		return err // the listing's refusal says it
	case http.StatusUnauthorized, http.StatusForbidden:
		return q.Verdict(ctx, qerr, c.cfg.KeyEnv, c.cfg.APIKey != "")
	}
	return nil
}

// Decide implements agent.Agent.
func (c *Chat) Decide(ctx context.Context, obs *observe.Observation) (agent.Decision, error) {
	s, err := c.screenshot(obs)
	if err != nil {
		return agent.Decision{}, err
	}
	screen := action.DefaultLimits(obs.Screen.Width, obs.Screen.Height)
	cur := chatTurn{step: obs.Step, text: llm.ObservationText(modelObs(obs, s.view)), shot: s}
	msgs, shots := c.messages(obs, s, cur)
	var (
		usage    llm.Usage
		problems []string
		answers  []string
	)
	meta := func(attempts int) map[string]any {
		md := llm.Meta(c.cfg.Model, usage, strings.Join(answers, "\n"), attempts)
		if len(problems) > 0 {
			md["malformed"] = problems
		}
		return md
	}
	for attempt := 1; ; attempt++ {
		content, u, perr, err := c.complete(ctx, msgs, shots)
		usage.InputTokens += u.InputTokens
		usage.OutputTokens += u.OutputTokens
		if err != nil {
			return agent.Decision{Meta: meta(attempt), Files: c.files()}, err
		}
		answers = append(answers, content)
		var a action.Action
		var thought string
		if perr == nil {
			a, thought, perr = parseAnswer(content)
		}
		switch {
		case perr == nil && a.Mark > 0 && a.X == nil && a.Y == nil:
			// A mark is a place on the screen already: its centre.
			if perr = observe.ResolveMark(&a, obs.Marks); perr == nil {
				perr = action.Validate(a, screen)
			}
		case perr == nil:
			a, perr = toScreenAction(a, s.view, screen)
		}
		if perr == nil {
			cur.answer = strings.TrimSpace(content)
			c.remember(cur)
			msg := thought
			if a.Kind == action.Done && a.Message != "" && msg == "" {
				msg = a.Message
			}
			return agent.Decision{Action: a, Message: msg, Meta: meta(attempt), Files: c.files()}, nil
		}
		problems = append(problems, fmt.Sprintf("%q (%v)", clip(content, 300), perr))
		if attempt > c.cfg.MaxMalformed {
			return agent.Decision{Meta: meta(attempt), Files: c.files()}, malformed(problems)
		}
		// Tell the model what was wrong, then ask again.
		msgs = append(msgs, sdk.AssistantMessage(content), sdk.UserMessage(fmt.Sprintf(
			"That answer cannot be run: %v. The screenshot is %dx%d pixels (x 0-%d, y 0-%d). "+
				"Answer again with exactly one JSON object as described.",
			perr, s.view.Frame.Width, s.view.Frame.Height, s.view.Frame.Width-1, s.view.Frame.Height-1)))
	}
}

// compactSchema is AnswerSchema without its layout whitespace (key order
// kept: the thought comes first).
var compactSchema = func() json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(AnswerSchema)); err != nil {
		panic(err)
	}
	return b.Bytes()
}()

// remember appends a finished turn, keeping what max_history allows.
func (c *Chat) remember(t chatTurn) {
	c.history = append(c.history, t)
	if n := len(c.history) - c.cfg.MaxHistory; n > 0 {
		c.history = append(c.history[:0:0], c.history[n:]...)
	}
}

// messages builds the request's conversation: the system prompt, the
// remembered turns (screenshots only for the latest max_screenshots-1 of
// them, a note for the others) and the current observation.
func (c *Chat) messages(obs *observe.Observation, s shot, cur chatTurn) ([]sdk.ChatCompletionMessageParamUnion, []shot) {
	var shots []shot
	// The Responses agent answers with computer calls, which cannot type
	// a secret: only the chat agent is told the vault's names.
	system := c.instructions(obs) + llm.SecretsNote(obs.Secrets) + "\n\n" + answerFormat(s.view.Frame.Width, s.view.Frame.Height, s.view.Scaled())
	msgs := []sdk.ChatCompletionMessageParamUnion{sdk.SystemMessage(system)}
	keepImages := c.cfg.MaxScreenshots - 1 // the current screenshot is one
	for i, t := range c.history {
		text := t.text
		if i == 0 && t.step > 1 {
			text = fmt.Sprintf("(The %d steps before step %d are not shown.)\n%s", t.step-1, t.step, text)
		}
		parts := []sdk.ChatCompletionContentPartUnionParam{}
		if len(c.history)-i <= keepImages {
			parts = append(parts, sdk.TextContentPart(text), imagePart(t.shot.dataURL))
			shots = append(shots, t.shot)
		} else {
			parts = append(parts, sdk.TextContentPart(text+"\n"+omittedNote(c.cfg.MaxScreenshots)))
		}
		msgs = append(msgs, sdk.UserMessage(parts), sdk.AssistantMessage(t.answer))
	}
	text := cur.text
	if len(c.history) == 0 && cur.step > 1 {
		text = fmt.Sprintf("(The %d steps before step %d are not shown.)\n%s", cur.step-1, cur.step, text)
	}
	text += "\nThis is the current screen. Answer with the next action as one JSON object."
	msgs = append(msgs, sdk.UserMessage([]sdk.ChatCompletionContentPartUnionParam{sdk.TextContentPart(text), imagePart(cur.shot.dataURL)}))
	return msgs, append(shots, cur.shot)
}

// omittedNote replaces an old screenshot, as Anthropic's reference loop
// drops old screenshots to keep the context small.
func omittedNote(keep int) string {
	return fmt.Sprintf("[screenshot omitted: only the latest %d are kept]", keep)
}

func imagePart(dataURL string) sdk.ChatCompletionContentPartUnionParam {
	return sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{URL: dataURL})
}

// complete sends one chat completion (the SDK retries 429, 5xx and
// timeouts). perr reports an answer that is not usable as such (a refusal,
// a cut-off answer), to be told back; err a failed call.
func (c *Chat) complete(ctx context.Context, msgs []sdk.ChatCompletionMessageParamUnion, shots []shot) (content string, u llm.Usage, perr, err error) {
	p := sdk.ChatCompletionNewParams{
		Model:     c.cfg.Model,
		Messages:  msgs,
		MaxTokens: param.NewOpt(int64(c.cfg.MaxTokens)),
	}
	if t := c.cfg.Temperature; t != nil {
		p.Temperature = param.NewOpt(*t)
	}
	switch c.format {
	case FormatSchema:
		p.ResponseFormat.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
			Name:   "agentbox_action",
			Strict: param.NewOpt(true),
			Schema: compactSchema,
		}}
	case FormatObject:
		p.ResponseFormat.OfJSONObject = &shared.ResponseFormatJSONObjectParam{}
	}
	resp, err := c.svc.New(ctx, p)
	if err != nil {
		return "", u, nil, c.callError("POST chat/completions", err)
	}
	u = llm.Usage{InputTokens: resp.Usage.PromptTokens, OutputTokens: resp.Usage.CompletionTokens}
	if len(resp.Choices) == 0 {
		return "", u, fmt.Errorf("the completion has no choices"), nil
	}
	ch := resp.Choices[0]
	content = ch.Message.Content
	switch {
	case ch.Message.Refusal != "":
		return ch.Message.Refusal, u, fmt.Errorf("the model refused"), nil
	case ch.FinishReason == "length":
		return content, u, fmt.Errorf("the answer was cut off at max_tokens=%d", c.cfg.MaxTokens), nil
	}
	return content, u, nil, nil
}
