package wire

import (
	"encoding/json"
	"testing"

	"github.com/codegirl-games/agentbox/observe"
)

// TestStartRequestJSON: the start request carries observe.Screen under the
// names the protocol has always used, both ways.
func TestStartRequestJSON(t *testing.T) {
	const old = `{"screen":{"width":1280,"height":720,"depth":24},"home":"/tmp/home","app_dir":"/tmp/app","timeout_ms":30000}`
	var req StartRequest
	if err := json.Unmarshal([]byte(old), &req); err != nil {
		t.Fatal(err)
	}
	if req.Screen != (observe.Screen{Width: 1280, Height: 720, Depth: 24}) {
		t.Errorf("screen %+v", req.Screen)
	}
	b, err := json.Marshal(req)
	if err != nil || string(b) != old {
		t.Errorf("marshalled %s, %v; want %s", b, err, old)
	}
}
