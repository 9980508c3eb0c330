// Package llm holds what every model adapter shares: settings from
// options and the environment, the wording that keeps text from the screen
// and the app as untrusted data, observation rendering, screenshot
// encoding and scaling, and the recording of raw exchanges with images
// replaced by references to the trace's screenshots.
//
// Keys come from the environment only (OPENAI_API_KEY, ANTHROPIC_API_KEY,
// or the variable named by the api_key_env option); they are never agent
// options, so they never reach run.json, the trace or the logs, and the
// sandbox never sees them: agents run on the host.
package llm

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/agent"
)

// Config is a model adapter's settings.
type Config struct {
	Model   string
	BaseURL string
	APIKey  string // never recorded
	KeyEnv  string // the variable the key came from
	// MaxScreenshots is how many of the latest screenshots stay in the
	// context; older ones are replaced by a note (default 3).
	MaxScreenshots int
	// MaxRetries bounds retries of a request on 429, 5xx and timeouts, with
	// exponential backoff (default 4).
	MaxRetries int
	// MaxMalformed bounds how often a malformed or disallowed answer is
	// told back to the model before the run ends as malformed_answer
	// (default 3).
	MaxMalformed int
	// Timeout bounds one request (default 120s).
	Timeout     time.Duration
	MaxTokens   int
	Temperature *float64
	// MaxHistory bounds the earlier actions listed in a prompt (default 20).
	MaxHistory int
}

// CommonOptions are the option names Parse understands; adapters add their
// own.
var CommonOptions = []string{"model", "base_url", "api_key_env", "max_screenshots", "max_retries", "max_malformed", "timeout", "max_tokens", "temperature", "max_history"}

// Parse reads options and the environment. keyEnv and urlEnv name the
// provider's variables (OPENAI_API_KEY, OPENAI_BASE_URL, …); model is the
// default model. requireKey makes a missing key an error.
func Parse(opts agent.Options, extra []string, keyEnv, urlEnv, modelEnv, model string, requireKey bool) (Config, error) {
	if err := agent.CheckOptions(opts, append(append([]string(nil), CommonOptions...), extra...)...); err != nil {
		return Config{}, err
	}
	for k := range opts {
		if strings.Contains(strings.ToLower(k), "key") && k != "api_key_env" {
			return Config{}, fmt.Errorf("option %q: keys are read from the environment only, never from options", k)
		}
	}
	c := Config{
		Model: model, MaxScreenshots: 3, MaxRetries: 4, MaxMalformed: 3,
		Timeout: 120 * time.Second, MaxTokens: 1024, MaxHistory: 20, KeyEnv: keyEnv,
	}
	if v := os.Getenv(modelEnv); modelEnv != "" && v != "" {
		c.Model = v
	}
	if v := os.Getenv(urlEnv); urlEnv != "" && v != "" {
		c.BaseURL = v
	}
	if v, ok := opts["model"]; ok {
		c.Model = v
	}
	if v, ok := opts["base_url"]; ok {
		c.BaseURL = v
	}
	if v, ok := opts["api_key_env"]; ok {
		c.KeyEnv = v
	}
	c.APIKey = os.Getenv(c.KeyEnv)
	ints := []struct {
		name     string
		dst      *int
		min, max int
	}{
		{"max_screenshots", &c.MaxScreenshots, 1, 50},
		{"max_retries", &c.MaxRetries, 0, 20},
		{"max_malformed", &c.MaxMalformed, 0, 20},
		{"max_tokens", &c.MaxTokens, 16, 200000},
		{"max_history", &c.MaxHistory, 0, 1000},
	}
	for _, i := range ints {
		if v, ok := opts[i.name]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < i.min || n > i.max {
				return c, fmt.Errorf("option %s: want %d–%d, got %q", i.name, i.min, i.max, v)
			}
			*i.dst = n
		}
	}
	if v, ok := opts["timeout"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("option timeout: want a duration like 60s, got %q", v)
		}
		c.Timeout = d
	}
	if v, ok := opts["temperature"]; ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 2 {
			return c, fmt.Errorf("option temperature: want 0–2, got %q", v)
		}
		c.Temperature = &f
	}
	if c.Model == "" {
		return c, fmt.Errorf("no model: pass --agent-opt model=NAME")
	}
	if requireKey && c.APIKey == "" {
		return c, fmt.Errorf("no API key: set %s (keys are read from the environment only)", c.KeyEnv)
	}
	return c, nil
}

// Usage is a decision's token accounting.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// Meta is what a model adapter records with each decision (the runtime
// adds the latency): the model, token usage summed over the attempts, the
// model's returned text, and how many attempts the decision took (more than
// one when malformed answers were told back).
func Meta(model string, u Usage, text string, attempts int) map[string]any {
	m := map[string]any{"model": model, "usage": u, "attempts": attempts}
	if text != "" {
		m["text"] = text
	}
	return m
}
