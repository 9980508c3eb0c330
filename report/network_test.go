package report

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// TestNetworkInReport: the connections an observation showed are event
// lines of its step, and network.jsonl is linked; a trace without a
// network links none.
func TestNetworkInReport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	start := time.Now()
	tw, err := trace.Create(dir, trace.Run{ID: "r1", Started: start, Network: &trace.NetworkInfo{Allow: []string{"ok.test"}}}, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	denied := observe.NetEvent{Time: start.Add(50 * time.Millisecond), Kind: "http", Method: "GET", Dest: "evil.test:80", Reason: "no --allow-net rule matches evil.test:80 <b>"}
	tw.Network(denied)
	f := &observe.Frame{Width: 8, Height: 8, Pix: make([]byte, 8*8*4), Hash: 1}
	a := action.Action{Kind: action.Wait, MS: 1}
	tw.Record(trace.Record{Type: trace.TypeStep, Step: 1, TMS: 100,
		Observation: &trace.Observation{Screenshot: tw.Screenshot(1, f), FrameHash: "1", Width: 8, Height: 8, Running: true, Network: []observe.NetEvent{denied}},
		Decision:    &trace.Decision{LatencyMS: 1}, Action: &a})
	if err := tw.Finish(func(r *trace.Run) { r.Outcome = trace.Success }); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Run.Network.Denied != 1 {
		t.Errorf("run.json network: %+v", tr.Run.Network)
	}
	p := pageData(t, mustRender(t, tr))
	if len(p.Steps) == 0 || len(p.Steps[0].Out) != 1 || p.Steps[0].Out[0].K != "v" ||
		!strings.HasPrefix(p.Steps[0].Out[0].X, "network: denied GET evil.test:80 (no --allow-net rule") {
		t.Fatalf("step 1's lines: %+v", p.Steps)
	}
	linked := false
	for _, lg := range p.Logs {
		linked = linked || lg.Name == trace.NetworkFile && lg.URL != "" && lg.Bytes > 0
	}
	if !linked {
		t.Errorf("network.jsonl is not linked: %+v", p.Logs)
	}

	plain := write(t, 1, "", nil)
	for _, lg := range pageData(t, mustRender(t, plain)).Logs {
		if lg.Name == trace.NetworkFile {
			t.Errorf("a trace without a network links %s", lg.Name)
		}
	}
}
