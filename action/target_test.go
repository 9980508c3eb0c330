package action

import (
	"strings"
	"testing"
)

func TestParseTarget(t *testing.T) {
	tests := []struct {
		in, wantErr string
	}{
		{`{"action":"click","target":{"role":"push button","name":"OK"}}`, ""},
		{`{"action":"type","text":"x","target":{"role":"text","index":0,"ancestor":{"role":"dialog"}}}`, ""},
		{`{"action":"click","target":{"role":"push button"},"x":1,"y":2}`, "a target or a position, not both"},
		{`{"action":"click","target":{"role":"push button"},"mark":3}`, "not resolved"},
		{`{"action":"click","target":{"colour":"red"}}`, `unknown field "colour"`},
		{`{"action":"click","target":"OK"}`, "must be an object"},
		{`{"action":"click","target":{"index":"1","role":"x"}}`, "index must be an integer"},
		{`{"action":"key","keys":"a","target":{"role":"text"}}`, `unknown field; key takes keys, key, repeat`},
		{`{"action":"click","mark":-2}`, "positive mark"},
		{`{"action":"click","mark":2}`, "not resolved"},
		{`{"action":"accessibility_tree"}`, ""},
	}
	for _, tt := range tests {
		a, err := Parse([]byte(tt.in))
		if err == nil {
			err = Validate(a, DefaultLimits(640, 480))
		}
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.in, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: got %v, want an error with %q", tt.in, err, tt.wantErr)
		}
	}
}
