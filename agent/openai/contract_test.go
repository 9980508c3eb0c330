package openai

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/action"
)

// notOffered are the action kinds the chat agent does not offer the model,
// and why; every other kind must be in chatKinds.
var notOffered = map[action.Kind]string{
	action.Screenshot:        "every turn brings the screenshot",
	action.CursorPosition:    "every turn says where the pointer is",
	action.AccessibilityTree: "the tree comes with the turn when asked for (--agent-opt tree), not as an action",
}

// notInSchema are action fields the chat schema leaves out, and why.
var notInSchema = map[string]string{
	"target":    "selectors name elements of a tree the chat agent does not send",
	"region":    "screenshot options: the model does not ask for screenshots",
	"scale":     "as region",
	"max_width": "as region",
	"until":     "a model waits for time; conditions are scripts' vocabulary",
	"title":     "as until",
	"stable_ms": "as until",
	"file":      "as until",
	"delay_ms":  "type's pacing is agentbox's, not the model's",
}

// TestChatContract holds the chat adapter to the vocabulary: the
// schema's action enum is chatKinds, every kind is offered or excused
// (notOffered), every field of an offered kind is in the schema or
// excused (notInSchema), every schema field belongs to an offered kind,
// and the prompt's list names every offered kind. A kind or field added
// to package action fails here until the adapter decides about it.
func TestChatContract(t *testing.T) {
	var schema struct {
		Properties map[string]struct {
			Enum []any `json:"enum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal([]byte(AnswerSchema), &schema); err != nil {
		t.Fatal(err)
	}
	var enum []string
	for _, v := range schema.Properties["action"].Enum {
		enum = append(enum, v.(string))
	}
	var offered []string
	for _, k := range chatKinds {
		offered = append(offered, string(k))
	}
	if !slices.Equal(enum, offered) {
		t.Errorf("AnswerSchema's action enum %v, chatKinds %v: keep them one list", enum, offered)
	}
	prompt := answerFormat(640, 480, false)
	fields := map[string]bool{}
	for _, k := range action.Kinds {
		_, excused := notOffered[k]
		if slices.Contains(chatKinds, k) == excused {
			t.Errorf("action kind %s: offered %v, excused %v; offer it in chatKinds (and AnswerSchema, answerFormat) or say why in notOffered", k, !excused, excused)
		}
		if excused {
			continue
		}
		if !strings.Contains(prompt, "- "+string(k)) && !strings.Contains(prompt, ", "+string(k)+":") {
			t.Errorf("action kind %s is offered but answerFormat's list does not describe it", k)
		}
		for _, f := range action.Fields(k) {
			fields[f] = true
			if _, ok := schema.Properties[f]; !ok && notInSchema[f] == "" {
				t.Errorf("field %q of %s is not in AnswerSchema: add it or say why in notInSchema", f, k)
			}
		}
	}
	for f := range schema.Properties {
		if f != "thought" && f != "action" && !fields[f] {
			t.Errorf("AnswerSchema has %q, which no offered kind takes", f)
		}
	}
	all := map[string]bool{}
	for _, k := range action.Kinds {
		for _, f := range action.Fields(k) {
			all[f] = true
		}
	}
	for f := range notInSchema {
		if !all[f] {
			t.Errorf("notInSchema excuses %q, which no action kind has", f)
		}
		if _, ok := schema.Properties[f]; ok {
			t.Errorf("notInSchema excuses %q, which AnswerSchema has", f)
		}
	}
}
