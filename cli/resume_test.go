package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/trace"
)

// crashedTrace writes a trace whose writer died: run.json running, no
// one holding writer.lock.
func crashedTrace(t *testing.T, agentName string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "crashed")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run := trace.Run{Format: trace.Format, Version: trace.Version, ID: "r", Status: trace.StatusRunning, Agent: trace.AgentInfo{Name: agentName}}
	data, _ := json.Marshal(run)
	for name, body := range map[string][]byte{trace.RunFile: data, trace.StepsFile: nil, trace.ActionsFile: nil} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestResumeRefuses: what resume does not continue is a usage error
// (exit 2) saying why, before anything starts.
func TestResumeRefuses(t *testing.T) {
	finished := crashedTrace(t, "script")
	if err := trace.MarkCrashed(finished); err != nil {
		t.Fatal(err)
	}
	run, _ := trace.ReadRun(finished)
	run.Reason, run.Outcome = trace.ReasonDone, trace.Success
	data, _ := json.Marshal(run)
	os.WriteFile(filepath.Join(finished, trace.RunFile), data, 0o644)

	live := filepath.Join(t.TempDir(), "live")
	w, err := trace.Create(live, trace.Run{ID: "live", Agent: trace.AgentInfo{Name: "script"}}, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Finish(nil)

	for _, c := range []struct {
		name, dir, want string
	}{
		{"a person", crashedTrace(t, "human"), "no agent (a person at the live page), which resume does not continue"},
		{"an unknown agent", crashedTrace(t, "oracle"), "agent oracle, which resume does not continue"},
		{"finished", finished, "finished (success); there is nothing to resume"},
		{"live", live, "still being written by a live agentbox"},
		{"not a trace", t.TempDir(), "not a trace directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var so, se bytes.Buffer
			code := Main([]string{"resume", c.dir}, &so, &se)
			if code != 2 || !strings.Contains(se.String(), c.want) {
				t.Fatalf("exit %d, want 2 saying %q:\n%s", code, c.want, se.String())
			}
		})
	}
}
