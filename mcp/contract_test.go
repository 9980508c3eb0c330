package mcp

import (
	"reflect"
	"testing"

	"github.com/codegirl-games/agentbox/action"
)

// noTool are the action kinds that have no MCP tool, and why. Every other
// kind of action.Kinds must have one (TestEveryKindHasATool).
var noTool = map[action.Kind]string{
	action.AccessibilityTree: "the tree comes with the next observation, and no MCP tool returns an observation's tree yet (screenshot answers with the image and the desktop's state); an MCP client reads the screen by screenshot",
}

// TestEveryKindHasATool: every action kind has a tool (or is in noTool
// with its reason), and every argument of an action tool has its own
// schema in fieldSchema (not the bare fallback).
func TestEveryKindHasATool(t *testing.T) {
	has := map[action.Kind]bool{}
	for _, tl := range toolTable() {
		if tl.kind == "" {
			continue
		}
		has[tl.kind] = true
		for _, f := range tl.args() {
			if s := fieldSchema(tl.kind, f); reflect.DeepEqual(s, map[string]any{"description": f}) {
				t.Errorf("mcp/tools.go: fieldSchema has no schema for the field %s of %s (tool %s)", f, tl.kind, tl.name)
			}
		}
	}
	for _, k := range action.Kinds {
		_, exempt := noTool[k]
		switch {
		case !has[k] && !exempt:
			t.Errorf("mcp/tools.go: the tool table has no tool for the action %s (add one, or add it to noTool with the reason)", k)
		case has[k] && exempt:
			t.Errorf("mcp/tools.go: the action %s has a tool, yet noTool still lists it", k)
		}
	}
}
