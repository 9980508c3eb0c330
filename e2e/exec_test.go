package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
)

// TestExecPythonAgent drives the mover with the shipped Python example
// agent (standard library only), through the JSON-lines protocol.
func TestExecPythonAgent(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage), testenv.Programs("python3"))
	agentPy := filepath.Join(testenv.RepoRoot(), "examples", "agents", "mover_agent.py")
	r := agentbox(t, "run", moverApp(t, ""), "--task", "Move the character right.", "--freeze-while-thinking",
		"--agent", "exec", "--", "python3", agentPy)
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	if !strings.Contains(r.stderr, "agent python3: task: 'Move the character right.'") {
		t.Errorf("the agent's stderr was not passed through:\n%s", r.stderr)
	}
	tr := openTrace(t, r.dir)
	if tr.Run.Agent.Name != "exec" || !strings.Contains(tr.Run.Agent.Options["command"], "mover_agent.py") {
		t.Errorf("agent = %+v", tr.Run.Agent)
	}
	if tr.Run.Timings["frozen"] <= 0 {
		t.Errorf("--freeze-while-thinking recorded no frozen time: %v", tr.Run.Timings)
	}
	for _, s := range tr.Steps {
		if s.Decision.FrozenMS <= 0 {
			t.Errorf("step %d: no frozen time", s.Step)
		}
	}
	assertNoContainers(t, tr.Run.ID)

	// The same agent with the input broken on purpose fails (exit 1).
	broken := t.TempDir()
	data, _ := os.ReadFile(agentPy)
	os.WriteFile(filepath.Join(broken, "left.py"), []byte(strings.ReplaceAll(string(data), `"key": "Right"`, `"key": "Left"`)), 0o644)
	r = agentbox(t, "run", moverApp(t, ""), "--agent", "exec", "--", "python3", filepath.Join(broken, "left.py"))
	if r.code != 1 || openTrace(t, r.dir).Run.Outcome != trace.Failure {
		t.Fatalf("want exit 1 with the key swapped:\n%s", r)
	}
}
