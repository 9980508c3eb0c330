package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportOSWorld: the importer's fixtures make a suite, its side
// directory and its report, with the counts on stderr; bad input is a
// usage error naming the problem, and a directory with nothing
// convertible exits 1 without a suite.
func TestImportOSWorld(t *testing.T) {
	fixtures := filepath.Join("..", "importer", "osworld", "testdata")
	tasks, cache := filepath.Join(fixtures, "tasks"), filepath.Join(fixtures, "cache")
	out := filepath.Join(t.TempDir(), "ow.yaml")
	var so, se bytes.Buffer
	if code := Main([]string{"import", "osworld", tasks, "--files", cache, "--out", out}, &so, &se); code != 0 {
		t.Fatalf("exit %d: %s", code, se.String())
	}
	for _, want := range []string{"converted 8 of 24 tasks; not converted: 16", "unknown function:", "needs the network:", "several apps:", "needs GNOME:", "report: ", "agentbox eval " + out + " --agent NAME"} {
		if !strings.Contains(se.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, se.String())
		}
	}
	for _, p := range []string{out, filepath.Join(filepath.Dir(out), "ow.import.yaml"), filepath.Join(filepath.Dir(out), "ow.d", "calc-sum-column", "app", "agentbox.json")} {
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}

	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "a.json"), []byte("{\n  \"id\": 1,,\n}"), 0o644)
	none := t.TempDir()
	os.WriteFile(filepath.Join(none, "a.json"), []byte(`{"id": "x", "instruction": "x", "related_apps": ["vlc"], "evaluator": {"func": "compare_audio_file"}}`), 0o644)
	noneOut := filepath.Join(t.TempDir(), "none.yaml")
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{tasks, "--files", cache, "--out", out}, ExitUsage, "already exists (give --force to replace it)"},
		{[]string{filepath.Join(bad, "missing"), "--out", filepath.Join(bad, "s.yaml")}, ExitUsage, "no such file or directory"},
		{[]string{bad, "--out", filepath.Join(bad, "s.yaml")}, ExitUsage, "a.json:2:11: invalid character ','"},
		{[]string{tasks, "--files", filepath.Join(bad, "nope"), "--out", filepath.Join(bad, "s.yaml")}, ExitUsage, "--files"},
		{[]string{tasks}, ExitUsage, "--out SUITE is required"},
		{[]string{none, "--out", noneOut}, ExitFailure, "no task of " + none + " could be converted"},
	} {
		so.Reset()
		se.Reset()
		code := Main(append([]string{"import", "osworld"}, tt.args...), &so, &se)
		if code != tt.code || !strings.Contains(se.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d with %q", tt.args, code, se.String(), tt.code, tt.want)
		}
	}
	if _, err := os.Stat(noneOut); !os.IsNotExist(err) {
		t.Errorf("a suite was written with no task: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(noneOut), "none.import.yaml")); err != nil {
		t.Errorf("no report of the tasks not converted: %v", err)
	}
}

// TestEvalAgentFlags: an imported suite's tasks name no agent: eval says
// which task and that --agent gives one; --agent-opt needs --agent.
func TestEvalAgentFlags(t *testing.T) {
	dir := t.TempDir()
	suite := filepath.Join(dir, "s.yaml")
	os.WriteFile(suite, []byte("tasks:\n  - name: calc\n    target: xterm\n    task: Do it.\n"), 0o644)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"eval", suite}, `task "calc": no agent: give the task a script or an agent, or run the suite with --agent NAME`},
		{[]string{"eval", suite, "--agent-opt", "k=v"}, "--agent-opt needs --agent"},
		{[]string{"eval", suite, "--agent", "idle", "--agent-opt", "novalue"}, `--agent-opt "novalue": want KEY=VALUE`},
		{[]string{"eval", suite, "--agent", "no-such-agent"}, "no-such-agent"},
	} {
		var so, se bytes.Buffer
		if code := Main(append(tt.args, "--out", filepath.Join(dir, "out")), &so, &se); code != ExitUsage || !strings.Contains(se.String(), tt.want) {
			t.Errorf("%v: exit %d, %q; want %d with %q", tt.args, code, se.String(), ExitUsage, tt.want)
		}
	}
}
