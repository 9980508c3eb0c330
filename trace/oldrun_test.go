package trace

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/codegirl-games/agentbox/observe"
)

// TestOldRunJSONLoads: a run.json written before the screen became
// observe.Screen (agentbox e30ee60, `run examples/mover --screen 800x600
// --backend local`) still loads, and writing it again keeps the screen's
// JSON as it was.
func TestOldRunJSONLoads(t *testing.T) {
	dir := filepath.Join("testdata", "run-e30ee60")
	run, err := ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := observe.Screen{Width: 800, Height: 600, Depth: 24}
	if run.Env.Screen != want || run.Env.Backend != "local" || run.Outcome != Success {
		t.Fatalf("environment %+v, outcome %s; want screen %v on local, success", run.Env, run.Outcome, want)
	}
	if err := run.Env.Screen.Validate(); err != nil {
		t.Errorf("the recorded screen does not validate: %v", err)
	}

	raw, err := os.ReadFile(filepath.Join(dir, RunFile))
	if err != nil {
		t.Fatal(err)
	}
	var old struct {
		Env struct {
			Screen json.RawMessage `json:"screen"`
		} `json:"environment"`
	}
	if err := json.Unmarshal(raw, &old); err != nil {
		t.Fatal(err)
	}
	now, err := json.Marshal(run.Env.Screen)
	if err != nil {
		t.Fatal(err)
	}
	var was, is map[string]any
	if err := json.Unmarshal(old.Env.Screen, &was); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(now, &is); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(was, is) {
		t.Errorf("the screen is written as %s, was %s", now, old.Env.Screen)
	}
}
