// Package openai holds two model agents built on the official OpenAI Go SDK:
//
//   - "openai" drives OpenAI's Responses API with its computer-use tool
//     (computer_use_preview): the model sees the screen and answers with
//     computer calls, which map one to one onto agentbox actions;
//   - "openai-chat" speaks the chat-completions API of any OpenAI-compatible
//     server with vision (Ollama, vLLM, LM Studio, …) and asks for one
//     agentbox action per turn as a JSON object constrained by a JSON
//     schema.
//
// Both run on the host, never in the sandbox. Keys come from the
// environment only (OPENAI_API_KEY, or the variable named by api_key_env);
// the SDK's own environment defaults (OPENAI_ORG_ID, OPENAI_CUSTOM_HEADERS,
// …) are not used, so nothing but what the options say reaches the server.
// Every request is recorded (images replaced by references to the trace's
// screenshots) and attached to the step as exchange.json.
package openai

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/agent/llm"
	"github.com/codegirl-games/agentbox/internal/plural"
	"github.com/codegirl-games/agentbox/internal/textcut"
	"github.com/codegirl-games/agentbox/observe"
)

func init() {
	agent.Register("openai", func(opts agent.Options) (agent.Agent, error) { return NewResponses(opts) })
	agent.Register("openai-chat", func(opts agent.Options) (agent.Agent, error) { return NewChat(opts) })
}

// Environment variables the agents read.
const (
	KeyEnv = "OPENAI_API_KEY"
	URLEnv = "OPENAI_BASE_URL"
)

// DefaultBaseURL is used when neither base_url nor OPENAI_BASE_URL is set.
const DefaultBaseURL = "https://api.openai.com/v1"

// DefaultMaxWidth is the widest screenshot sent as is; wider screens are
// scaled down to it (option max_width).
const DefaultMaxWidth = 1280

// client is what both agents share: settings, the recorder and the SDK
// options that send requests through it.
type client struct {
	cfg      llm.Config
	maxWidth int
	rec      *llm.Recorder
	retry    *llm.Retrier
	queue    llm.QueueSlot // eval --model-concurrency: SetQueue
	http     *http.Client
	sdkOpts  []option.RequestOption
	baseOpts []option.RequestOption // without retries and recording: Preflight
	baseURL  string                 // ends in "/"
	task     agent.Task
	started  bool
}

// newClient builds the SDK options: base URL, key (if any), and the
// shared HTTP policy (llm.Retrier, llm.AttemptTimeout) around the
// recorder. The SDK's own retries are off.
func newClient(cfg llm.Config, maxWidth int) *client {
	c := &client{cfg: cfg, maxWidth: maxWidth, rec: llm.NewRecorder(), retry: &llm.Retrier{Max: cfg.MaxRetries}}
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		c.http = &http.Client{Transport: t.Clone()}
	} else {
		c.http = &http.Client{Transport: http.DefaultTransport}
	}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	c.baseURL = base
	c.baseOpts = []option.RequestOption{
		option.WithBaseURL(base),
		option.WithHTTPClient(c.http),
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		c.baseOpts = append(c.baseOpts, option.WithAPIKey(cfg.APIKey))
	}
	// The SDK's WithRequestTimeout is not used: when its per-attempt
	// deadline passes, the SDK returns at once instead of retrying.
	// llm.AttemptTimeout bounds each attempt inside the retrier.
	c.sdkOpts = append(append([]option.RequestOption(nil), c.baseOpts...),
		option.WithMiddleware(c.retry.Middleware, c.queue.Middleware, llm.AttemptTimeout(cfg.Timeout), c.rec.Middleware))
	return c
}

// SetQueue implements llm.Queued: the model requests wait their turn in
// q, shared with other episodes.
func (c *client) SetQueue(q *llm.Queue) { c.queue.SetQueue(q) }

// preflightTimeout bounds the preflight request.
const preflightTimeout = 15 * time.Second

// Preflight implements agent.Preflighter: one GET models, with the key
// when there is one, before any sandbox exists. A refused key or a wrong
// URL is a configuration error; no answer is agent.ErrUnreachable.
func (c *client) Preflight(ctx context.Context) error {
	_, err := c.listModels(ctx)
	return err
}

// listModels is the preflight's GET models and its verdict.
func (c *client) listModels(ctx context.Context) (*llm.Probe, error) {
	var p llm.Probe
	svc := sdk.NewModelService(c.baseOpts...)
	_, err := svc.List(ctx, option.WithMiddleware(p.Middleware, llm.AttemptTimeout(min(c.cfg.Timeout, preflightTimeout))))
	return &p, p.Verdict(ctx, err, c.cfg.KeyEnv, c.cfg.APIKey != "")
}

// SetProgress implements agent.ProgressSetter: a line per retried request.
func (c *client) SetProgress(w io.Writer) { c.retry.SetProgress(w) }

// callError describes a failed API call once, for the run's message: the
// endpoint, the HTTP status and the server's own message (or an excerpt
// of whatever else it sent), and how many attempts were made. It wraps
// the SDK's error without repeating it.
func (c *client) callError(endpoint string, err error) error {
	n := c.retry.Attempts()
	var api *sdk.Error
	if errors.As(err, &api) {
		msg := fmt.Sprintf("%s: %s", endpoint, llm.Status(api.StatusCode))
		detail := api.Message
		if raw := api.RawJSON(); detail == "" && raw != "" {
			detail = llm.ErrorDetail([]byte(raw))
		} else if detail == "" && api.Response != nil && api.Response.Body != nil {
			// Not JSON (a proxy's error page): the SDK kept the body.
			body, _ := io.ReadAll(io.LimitReader(api.Response.Body, 64<<10))
			api.Response.Body = io.NopCloser(bytes.NewReader(body))
			detail = llm.ErrorDetail(body)
		}
		if detail = strings.TrimSpace(detail); detail != "" {
			msg += ": " + clip(detail, 300)
		}
		return llm.Wrap(fmt.Sprintf("%s (%s)", msg, plural.S(n, "attempt")), err)
	}
	return fmt.Errorf("%s (%s): %w", endpoint, plural.S(n, "attempt"), err)
}

// Start implements agent.Starter: it keeps the task and the screen size.
func (c *client) Start(_ context.Context, t agent.Task) error {
	c.task, c.started = t, true
	return nil
}

// Close implements agent.Closer.
func (c *client) Close() error {
	c.http.CloseIdleConnections()
	return nil
}

// instructions is the system prompt, from the task given to Start (or the
// observation, when Start was not called).
func (c *client) instructions(obs *observe.Observation) string {
	task, w, h := c.task.Text, c.task.Width, c.task.Height
	if !c.started {
		task = obs.Task
	}
	if w == 0 || h == 0 {
		w, h = obs.Screen.Width, obs.Screen.Height
	}
	if strings.TrimSpace(task) == "" {
		task = "(no task was given: look at the application and finish when you have seen what it does)"
	}
	return llm.Instructions(task, w, h)
}

// shot is one screenshot as sent to the model.
type shot struct {
	view    *observe.View // maps the model's coordinates back to the screen
	b64     string
	dataURL string
	ref     string // what the recorder writes instead of the image
}

// screenshot scales the observation's screen to at most max_width (exactly
// mapped back by the view), encodes it, and registers it with the recorder
// under the trace's screenshot name.
func (c *client) screenshot(obs *observe.Observation) (shot, error) {
	if obs.Screen == nil {
		return shot{}, errors.New("the observation has no screenshot")
	}
	v := observe.FullView(obs.Screen)
	if c.maxWidth > 0 && obs.Screen.Width > c.maxWidth {
		var err error
		if v, err = observe.NewView(obs.Screen, nil, 0, c.maxWidth, 0); err != nil {
			return shot{}, fmt.Errorf("scale the screenshot: %w", err)
		}
	}
	b64, err := llm.PNGBase64(v.Frame)
	if err != nil {
		return shot{}, fmt.Errorf("encode the screenshot: %w", err)
	}
	ref := obs.ScreenshotRef
	if ref == "" {
		ref = fmt.Sprintf("step %d", obs.Step)
	}
	if v.Scaled() {
		ref = fmt.Sprintf("%s scaled to %dx%d", ref, v.Frame.Width, v.Frame.Height)
	}
	c.rec.Image(b64, ref)
	return shot{view: v, b64: b64, dataURL: "data:image/png;base64," + b64, ref: ref}, nil
}

// modelObs is the observation as the model is told it: with a scaled
// screenshot, the pointer and the windows are given in screenshot pixels,
// the coordinates the model answers in.
func modelObs(obs *observe.Observation, v *observe.View) *observe.Observation {
	if !v.Scaled() {
		return obs
	}
	o := *obs
	scale := func(n, from, to int) int { return n * to / from }
	if x, y, ok := v.FromScreen(obs.Cursor.X, obs.Cursor.Y); ok {
		o.Cursor = action.Point{X: x, Y: y}
	}
	fw, fh, rw, rh := v.Frame.Width, v.Frame.Height, v.Region.Dx(), v.Region.Dy()
	o.Windows = make([]observe.Window, len(obs.Windows))
	for i, w := range obs.Windows {
		w.X, w.Y = scale(w.X-v.Region[0], rw, fw), scale(w.Y-v.Region[1], rh, fh)
		w.Width, w.Height = scale(w.Width, rw, fw), scale(w.Height, rh, fh)
		o.Windows[i] = w
	}
	o.Tree = llm.MapTree(obs.Tree, func(x, y int) (int, int) {
		return scale(x-v.Region[0], rw, fw), scale(y-v.Region[1], rh, fh)
	})
	return &o
}

// files returns the recorded exchanges of this decision for the trace.
func (c *client) files() map[string][]byte {
	if ex := c.rec.Take(); ex != nil {
		return map[string][]byte{"exchange.json": ex}
	}
	return nil
}

// malformed is the error that ends a run whose model kept answering with
// something agentbox cannot run.
func malformed(problems []string) error {
	return fmt.Errorf("%w: after %d attempts the model kept answering with something agentbox cannot run: %s",
		agent.ErrMalformed, len(problems), strings.Join(problems, "; then "))
}

// clip shortens s for messages.
func clip(s string, n int) string {
	return textcut.Runes(strings.TrimSpace(s), n, "…")
}

// parseMaxWidth reads the max_width option.
func parseMaxWidth(opts agent.Options) (int, error) {
	v, ok := opts["max_width"]
	if !ok {
		return DefaultMaxWidth, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 64 || n > 10000 {
		return 0, fmt.Errorf("option max_width: want 64–10000, got %q", v)
	}
	return n, nil
}

// toScreen maps a point of the image the model saw to the screen, or
// fails when it lies outside that image.
func toScreen(v *observe.View, x, y int) (int, int, error) {
	w, h := v.Frame.Width, v.Frame.Height
	if x < 0 || y < 0 || x >= w || y >= h {
		return 0, 0, fmt.Errorf("(%d,%d) is outside the %dx%d screenshot", x, y, w, h)
	}
	sx, sy := v.ToScreen(x, y)
	return sx, sy, nil
}

// Rehearse implements agent.Rehearser: the next Decide's requests are
// answered by the recorded exchanges (a resume rebuilding the
// conversation: the chat's history, the Responses chain's last id).
func (c *client) Rehearse(recorded []byte) error { return c.rec.Play(recorded) }

// Rehearsed implements agent.Rehearser.
func (c *client) Rehearsed() error { return c.rec.Stop() }
