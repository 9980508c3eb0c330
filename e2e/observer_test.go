package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// observedApp writes files and runs a child shell, with no window.
func observedApp(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	run := `#!/bin/sh
mkdir -p "$HOME/out"
echo report > "$HOME/out/report.txt"
sh -c 'echo child > "$HOME/out/child.txt"; sleep 2'
sleep 1
exit 0
`
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte(run), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command": "run.sh", "wait_for_window": false}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestObserverScript: a script's file_written and process checks turn the
// trusted observer on and pass against what a real app did; the trace
// holds the events on their steps and validates; the report shows them; a
// check that finds nothing fails the run saying what the observer saw.
func TestObserverScript(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	app := observedApp(t)
	r := agentbox(t, "run", app, "--script", writeScript(t, `task: the app saves a report and runs a child
steps:
  - {wait_for: file_written, path: "~/out/report.txt", timeout_ms: 60000}
  - {wait_for: process, argv: "sh -c *", timeout_ms: 60000}
  - {wait_for: file_written, path: "~/out/*.txt", timeout_ms: 60000}
  - {wait_for: exited, code: 0, timeout_ms: 60000}
  - {expect: process, argv: "*run.sh", exit: 0}
`))
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	tr := openTrace(t, r.dir)
	if tr.Run.Settings == nil || !tr.Run.Settings.Observe {
		t.Errorf("run.json settings: %+v, want observe", tr.Run.Settings)
	}
	if bad := trace.Validate(tr); len(bad) > 0 {
		t.Errorf("Validate: %v", bad)
	}
	var files, execs int
	for _, rec := range tr.Records {
		if rec.Observation == nil {
			continue
		}
		for _, e := range rec.Observation.Activity {
			switch {
			case e.Kind == observe.ActFile && strings.HasPrefix(e.Path, "~/out/") && e.SHA256 != "":
				files++
			case e.Kind == observe.ActExec:
				execs++
			}
		}
	}
	if files < 2 || execs < 2 {
		t.Errorf("steps.jsonl's activity: %d hashed files below ~/out, %d execs; want 2 and 2 or more", files, execs)
	}
	out := filepath.Join(t.TempDir(), "report.html")
	if rep := agentbox(t, "view", r.dir, "--out", out); rep.code != 0 {
		t.Fatalf("view: %s", rep)
	}
	html, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(html), "observer: file ~/out/report.txt") {
		t.Errorf("the report does not show the observer's events (%v)", err)
	}
	assertNoContainers(t, tr.Run.ID)

	// A miss says what was seen.
	r = agentbox(t, "run", app, "--script", writeScript(t, `steps:
  - {wait_for: exited, timeout_ms: 60000}
  - {expect: file_written, path: "~/nothing.txt"}
`))
	if r.code == 0 || !strings.Contains(r.stdout, `(expect file_written, line 3) failed: expected a file matching ~/nothing.txt written; seen`) ||
		!strings.Contains(r.stdout, "none matching") {
		t.Fatalf("want a failed check naming what the observer saw:\n%s", r)
	}
}

// TestObserverGrade: a --grade spec with file_written and process checks
// turns the trusted observer on by itself (the script checks nothing of
// it) and grades what a real app did; a pattern that nothing matched is
// incorrect, naming what was seen.
func TestObserverGrade(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	app := observedApp(t)
	sc := writeScript(t, `steps:
  - {wait_for: exited, code: 0, timeout_ms: 60000}
`)
	spec := filepath.Join(t.TempDir(), "grade.yaml")
	if err := os.WriteFile(spec, []byte(`- file_written: "~/out/*.txt"
- process: "sh -c *"
- {process: "*run.sh", exit: 0}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := agentbox(t, "run", app, "--script", sc, "--grade", spec)
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	tr := openTrace(t, r.dir)
	if tr.Run.Grade == nil || tr.Run.Grade.Outcome != trace.GradeVerified {
		t.Fatalf("grade: %+v, want verified\n%s", tr.Run.Grade, r)
	}
	assertNoContainers(t, tr.Run.ID)

	if err := os.WriteFile(spec, []byte("- file_written: \"~/out/*.ods\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = agentbox(t, "run", app, "--script", sc, "--grade", spec)
	tr = openTrace(t, r.dir)
	if g := tr.Run.Grade; g == nil || g.Outcome != trace.GradeIncorrect || !strings.Contains(g.Message, "none matching; the last: file ~/out/") {
		t.Fatalf("grade: %+v, want incorrect naming what was written\n%s", g, r)
	}
}
