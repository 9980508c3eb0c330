package grade

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// activityTrace writes a trace directory whose run.json says observe (or
// not) and whose steps record act.
func activityTrace(t *testing.T, observed bool, act ...observe.ActivityEvent) string {
	t.Helper()
	dir := t.TempDir()
	run, err := json.Marshal(trace.Run{Format: trace.Format, Version: trace.Version, Settings: &trace.Settings{Observe: observed}})
	if err != nil {
		t.Fatal(err)
	}
	var steps []byte
	for i, e := range act {
		line, err := json.Marshal(trace.Record{Type: trace.TypeStep, Step: i, Observation: &trace.Observation{Activity: []observe.ActivityEvent{e}}})
		if err != nil {
			t.Fatal(err)
		}
		steps = append(append(steps, line...), '\n')
	}
	write(t, dir, map[string][]byte{trace.RunFile: run, trace.StepsFile: steps})
	return dir
}

func TestActivityChecks(t *testing.T) {
	act := []observe.ActivityEvent{
		{Kind: observe.ActExec, PID: 10, Argv: []string{"sh", "-c", "echo hi > out/a.txt"}},
		{Kind: observe.ActFile, Path: "~/out/a.txt", Ops: []string{observe.OpWritten}},
		{Kind: observe.ActFile, Path: "~/out", Dir: true, Ops: []string{observe.OpWritten}},
		{Kind: observe.ActExit, PID: 10, Argv: []string{"sh", "-c", "echo hi > out/a.txt"}, Exit: &observe.Exit{Code: 2}},
		{Kind: observe.ActExit, PID: 11, Argv: []string{"/app/run.sh"}},
	}
	for _, tt := range []struct {
		name, spec string
		observed   bool
		ok         bool
		class      string
		detail     string
	}{
		{"written", "- file_written: ~/out/*.txt\n", true, true, "", "out/a.txt"},
		{"written deep", "- file_written: ~/**/a.txt\n", true, true, "", ""},
		{"not written", "- file_written: ~/out/*.ods\n", true, false, trace.GradeIncorrect, "1 files written, none matching; the last: "},
		{"process ran", "- process: sh -c *\n", true, true, "", "sh -c"},
		{"process regex", "- process: /^sh .*a\\.txt$/\n", true, true, "", ""},
		{"process not run", "- process: python3 *\n", true, false, trace.GradeIncorrect, "1 processes, none matching; the last: "},
		{"exit code", "- {process: sh -c *, exit: 2}\n", true, true, "", ""},
		{"wrong exit code", "- {process: sh -c *, exit: 0}\n", true, false, trace.GradeIncorrect, "2 processes, none matching"},
		{"exit not seen", "- {process: /app/run.sh, exit: 0}\n", true, false, trace.GradeIncorrect, "its status was not seen"},
		{"observer off", "- file_written: ~/out/*.txt\n", false, false, trace.GradeInfrastructure, "run with --observe"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := activityTrace(t, tt.observed, act...)
			spec := loadSpec(t, t.TempDir(), tt.spec)
			if !spec.NeedsObserver() {
				t.Error("NeedsObserver false")
			}
			g := spec.Grade(t.Context(), dir+"/files", dir)
			c := g.Checks[0]
			if c.OK != tt.ok || c.Class != tt.class || !strings.Contains(c.Detail, tt.detail) {
				t.Errorf("got ok %v class %q detail %q; want ok %v class %q detail containing %q", c.OK, c.Class, c.Detail, tt.ok, tt.class, tt.detail)
			}
		})
	}
	if s := loadSpec(t, t.TempDir(), "- exists: a.txt\n"); s.NeedsObserver() {
		t.Error("an exists check: NeedsObserver true")
	}
}

func TestActivityParseErrors(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"fine", "grade:\n  - file_written: ~/out/*.txt\n  - {process: 'sh -c *', exit: 0, name: child}\n", ""},
		{"not below home", "grade:\n  - file_written: out/*.txt\n", `suite.yaml:2: task 1: grade check 1: field "file_written": want a path below the home starting with ~/`},
		{"bad glob", "grade:\n  - file_written: '~/out/[x'\n", `suite.yaml:2: task 1: grade check 1: field "file_written": `},
		{"empty argv", "grade:\n  - process: ''\n", `suite.yaml:2: task 1: grade check 1: field "process": want the command line`},
		{"bad regex", "grade:\n  - process: '/(/'\n", `field "process": want the command line, a glob or /regex/`},
		{"exit out of range", "grade:\n  - {process: sh, exit: 256}\n", `suite.yaml:2: task 1: grade check 1: field "exit": an exit code is a whole number between 0 and 255, got 256`},
		{"exit not a number", "grade:\n  - {process: sh, exit: zero}\n", `field "exit": an exit code is a whole number`},
		{"exit on file_written", "grade:\n  - {file_written: ~/a, exit: 0}\n", `unknown field "exit"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseYAML(t, t.TempDir(), tt.in)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := ParseJSON("grade", []byte(`[{"process":"sh -c *","exit":1.5}]`), Options{NoHost: true}); err == nil || !strings.Contains(err.Error(), `grade: check 1: field "exit"`) {
		t.Errorf("JSON exit 1.5: %v", err)
	}
}
