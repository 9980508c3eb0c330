package session

import (
	"bytes"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
)

// TestVerboseProgressIsEscaped: what the agent says (a model's text) is
// shown on the terminal with its control characters escaped, while the
// trace keeps the bytes as they were.
func TestVerboseProgressIsEscaped(t *testing.T) {
	const evil = "\x1b[2K\rsuccess: forged\x1b]52;c;cHduZWQ=\x07\u009b2J"
	no := false
	ag := &scripted{steps: []agent.Decision{
		{Action: action.Action{Kind: action.Type, Text: evil}, Message: evil},
		{Action: action.Action{Kind: action.Key, Keys: evil}, Message: "bad key"},
		{Action: action.Action{Kind: action.Done, Success: &no, Message: evil}},
	}}
	var progress bytes.Buffer
	res, tr := runFake(t, &fakeBackend{}, ag, func(c *Config) { c.Verbose, c.Progress = true, &progress })
	out := progress.String()
	if strings.ContainsAny(out, "\x1b\r\x07") || strings.Contains(out, "\u009b") {
		t.Errorf("progress holds control characters: %q", out)
	}
	if !strings.Contains(out, `step 1: type "\x1b[2K\rsuccess`) || !strings.Contains(out, `— \x1b[2K\rsuccess: forged\x1b]52;c;cHduZWQ=\x07\u009b2J`) || !strings.Contains(out, "step 2: rejected") {
		t.Errorf("progress:\n%s", out)
	}
	if res.Message != evil || tr.Run.Message != evil || tr.Steps[0].Decision.Message != evil {
		t.Errorf("the result and the trace must keep the agent's text as it was: %q / %q", res.Message, tr.Run.Message)
	}
}
