package openapigen

import (
	"reflect"
	"regexp"
	"strconv"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/serve/api"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

// API is the spec of serve/openapi.json: the bodies of its routes and the
// WebSocket's messages, and what their types cannot say.
func API() Spec {
	min := func(v float64) *float64 { return &v }
	status := regexp.MustCompile(`^\d{3}:?\s*`)
	return Spec{
		Roots: []Root{
			{Type: reflect.TypeFor[api.Error]()},
			{Type: reflect.TypeFor[api.ErrorBody]()},
			{Type: reflect.TypeFor[api.Server]()},
			{Type: reflect.TypeFor[api.CreateRequest]()},
			{Type: reflect.TypeFor[api.Environment]()},
			{Type: reflect.TypeFor[api.Upload]()},
			{Type: reflect.TypeFor[api.Observation]()},
			{Type: reflect.TypeFor[action.Action]()},
			{Type: reflect.TypeFor[api.StepResponse]()},
			{Type: reflect.TypeFor[api.ResetRequest]()},
			{Type: reflect.TypeFor[api.ApprovalAnswer]()},
			{Type: reflect.TypeFor[api.ResetResponse]()},
			{Type: reflect.TypeFor[api.ForkRequest]()},
			{Type: reflect.TypeFor[api.ForkResponse]()},
			{Type: reflect.TypeFor[api.Event]()},
			{Type: reflect.TypeFor[api.Request](), Name: "WSRequest"},
			{Type: reflect.TypeFor[api.Response](), Name: "WSResponse"},
		},
		As: map[reflect.Type]reflect.Type{
			reflect.TypeFor[action.Path]():   reflect.TypeFor[[][2]int](),      // [[x, y], …]
			reflect.TypeFor[action.Action](): reflect.TypeFor[action.Action](), // its fields, as Parse reads them
		},
		Fields: map[string]Field{
			"Error.code": {Enum: anys(api.Codes), Describe: func(v any, comment string) string {
				// The constants' comments begin with their status.
				c := v.(string)
				s := c + " (" + strconv.Itoa(api.Status(c)) + ")"
				if rest := status.ReplaceAllString(comment, ""); rest != "" {
					s += ": " + rest
				}
				return s
			}},
			"End.outcome":              {ConstsOf: reflect.TypeFor[trace.Outcome](), Describe: func(any, string) string { return "" }},
			"Environment.state":        {Enum: anys(api.States)},
			"Environment.reset_mode":   {Enum: anys(api.ResetModes)},
			"CreateRequest.reset_mode": {Enum: anys(api.ResetModes)},
			"ResetRequest.mode":        {Enum: anys(api.ResetModes)},
			"WSRequest.mode":           {Enum: anys(api.ResetModes)},
			"Frame.format":             {Enum: anys(api.Images)},
			"ForkRequest.count":        {Minimum: min(1)},
			"ForkResponse.fork":        {Enum: anys(api.ForkModes)},
			"Capabilities.fork":        {Enum: anys(api.ForkModes)},
			"WSRequest.op":             {Enum: anys(api.Ops)},
			"WSRequest.image":          {Enum: anys(api.Images)},
			"WSRequest.action":         {Ref: "Action"},
			"Event.kind":               {Enum: anys(session.EventKinds), ConstsOf: reflect.TypeFor[session.Event]()},
			"Action.action":            {Enum: anys(action.Kinds)},
			"Action.mark":              {Minimum: min(1)},
			"Selector.index":           {Minimum: min(0)},
			"Screen.depth":             {Enum: []any{0, observe.ScreenDepth}, Optional: true, Describe: func(any, string) string { return "" }},
		},
		// The request bodies the server decodes refusing unknown fields.
		Closed: []string{"Action", "Selector", "CreateRequest", "Limits", "Screen", "ResetRequest", "ForkRequest", "WSRequest", "ApprovalAnswer"},
	}
}

// anys is a list of constants as enum values (a named string type's as
// plain strings).
func anys[T any](list []T) []any {
	out := make([]any, len(list))
	for i, v := range list {
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.String {
			out[i] = rv.String()
			continue
		}
		out[i] = v
	}
	return out
}
