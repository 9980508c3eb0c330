package openai

import (
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent/llm"
)

// TestChatTypeSecret: the chat agent's model may answer type_secret with a
// secret's name (the schema offers it), and is told the vault's names.
func TestChatTypeSecret(t *testing.T) {
	a, _, err := parseAnswer(`{"thought": "the password field has the focus", "action": "type_secret", "secret": "PW", "text": null, "x": null}`)
	if err != nil || a.Kind != action.TypeSecret || a.Secret != "PW" {
		t.Fatalf("parsed %+v, %v", a, err)
	}
	if !strings.Contains(AnswerSchema, `"type_secret"]`) || !strings.Contains(AnswerSchema, `"secret", "path"`) {
		t.Error("the answer schema does not offer type_secret and its secret")
	}
	if !strings.Contains(answerFormat(640, 480, false), "- type_secret: secret") {
		t.Error("the prompt does not describe type_secret")
	}
	if n := llm.SecretsNote([]string{"PW"}); !strings.Contains(n, "type_secret, by name: PW.") {
		t.Errorf("note %q", n)
	}
	if llm.SecretsNote(nil) != "" {
		t.Error("a run without a vault is told of secrets")
	}
}
