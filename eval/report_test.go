package eval

import (
	"bytes"
	"encoding/xml"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/trace"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update ./eval/ writes it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what was rendered (go test -update rewrites it after a deliberate change)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// finished is a summary of a suite run with one episode in every category,
// messages with characters XML escapes, and a task with no episode left.
func finished() *Summary {
	suite := &Suite{Name: "nightly", Tasks: []*Task{{Name: "login"}, {Name: "checkout"}, {Name: "unused"}}}
	started := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	s := &Summary{Format: "agentbox-eval", Version: 1, Suite: suite.Name, File: "nightly.yaml", RunID: "eval-1", Parallel: 2,
		Started: started, Ended: started.Add(83 * time.Second), DurationMS: 83000}
	s.Episodes = []Episode{
		{Task: "login", N: 1, Category: Passed, Outcome: trace.Success, Reason: trace.ReasonDone, Message: "done", Steps: 12, DurationMS: 4200, Trace: "login/001"},
		{Task: "login", N: 2, Category: Failed, Outcome: trace.Failure, Reason: trace.ReasonCheckFailed, Message: `step 3: expected "Welcome" <b> & more`, Steps: 3, DurationMS: 1500.5, Trace: "login/002"},
		{Task: "login", N: 3, Category: Malformed, Outcome: trace.Error, Reason: trace.ReasonMalformed, Message: "3 malformed answers", Steps: 0, DurationMS: 900, Trace: "login/003"},
		{Task: "checkout", N: 1, Category: Infrastructure, Outcome: trace.Error, Reason: trace.ReasonEnvironment, Message: "no Docker daemon", DurationMS: 12, Trace: "checkout/001"},
		{Task: "checkout", N: 2, Category: Interrupted, Outcome: trace.Interrupted, Reason: trace.ReasonSignal, Message: "Ctrl-C", Steps: 7, DurationMS: 3000, Trace: "checkout/002"},
		{Task: "checkout", N: 3, Category: Skipped, Trace: "checkout/003"},
	}
	s.aggregate(suite)
	return s
}

// TestJUnitGolden: the JUnit XML of a summary, byte for byte
// (testdata/junit.xml), and it reads back with the counts CI tools show.
func TestJUnitGolden(t *testing.T) {
	x, err := finished().JUnit()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "junit.xml", x)
	var back junitSuites
	if err := xml.Unmarshal(x, &back); err != nil {
		t.Fatalf("the JUnit XML does not parse: %v", err)
	}
	if back.Tests != 6 || back.Failures != 1 || back.Errors != 2 || back.Skipped != 2 || len(back.Suites) != 3 {
		t.Errorf("tests %d failures %d errors %d skipped %d suites %d; want 6 1 2 2 3", back.Tests, back.Failures, back.Errors, back.Skipped, len(back.Suites))
	}
	if m := back.Suites[0].Cases[1].Failure.Message; m != `step 3: expected "Welcome" <b> & more` {
		t.Errorf("failure message read back as %q", m)
	}
}

// TestPrintTableGolden: the per-task table eval prints at the end
// (testdata/table.txt).
func TestPrintTableGolden(t *testing.T) {
	var b bytes.Buffer
	finished().PrintTable(&b)
	golden(t, "table.txt", b.Bytes())
	// One duration format in the mean time column (it mixed 2.2s, 1.51s
	// and 0s), and passed of the episodes that ran.
	for _, want := range []string{" 2.20s ", " 1.51s ", " 0.00s ", "  1/5 ", "  0/2 "} {
		if !bytes.Contains(b.Bytes(), []byte(want)) {
			t.Errorf("no %q in the table:\n%s", want, b.Bytes())
		}
	}
}

func TestAggregate(t *testing.T) {
	s := finished()
	login, checkout, unused := s.Tasks[0], s.Tasks[1], s.Tasks[2]
	if login.Episodes != 3 || login.Passed != 1 || login.Failed != 1 || login.Malformed != 1 || login.PassRate != 1.0/3 {
		t.Errorf("login: %+v", login)
	}
	if login.MeanSteps != 5 || login.MeanDurationMS != (4200+1500.5+900)/3 {
		t.Errorf("login means: %v steps, %v ms", login.MeanSteps, login.MeanDurationMS)
	}
	// The skipped episode never ran: it counts, but not in the means.
	if checkout.Episodes != 3 || checkout.Skipped != 1 || checkout.Interrupted != 1 || checkout.MeanSteps != 3.5 {
		t.Errorf("checkout: %+v", checkout)
	}
	if len(checkout.Reasons) != 2 || checkout.Reasons[trace.ReasonEnvironment] != 1 || checkout.Reasons[trace.ReasonSignal] != 1 {
		t.Errorf("checkout reasons %v", checkout.Reasons)
	}
	if unused.Episodes != 0 || unused.PassRate != 0 || unused.Reasons != nil {
		t.Errorf("a task without episodes: %+v", unused)
	}
	if s.Totals.Episodes != 6 || s.Totals.Passed != 1 || s.Totals.Infrastructure != 1 {
		t.Errorf("totals %+v", s.Totals)
	}
	// The pass rate is of the episodes that ran: the skipped one is no
	// failure (1 passed of the 5 that ran).
	if s.Totals.PassRate != 1.0/5 || checkout.PassRate != 0 {
		t.Errorf("pass rates: total %v, checkout %v; want 0.2 and 0", s.Totals.PassRate, checkout.PassRate)
	}
}

func TestExitCode(t *testing.T) {
	for _, tt := range []struct {
		name   string
		totals TaskSummary
		want   int
	}{
		{"all passed", TaskSummary{Episodes: 2, Passed: 2}, 0},
		{"a failure", TaskSummary{Episodes: 2, Passed: 1, Failed: 1}, 1},
		{"a malformed agent", TaskSummary{Episodes: 2, Passed: 1, Malformed: 1}, 1},
		{"only infrastructure", TaskSummary{Episodes: 2, Passed: 1, Infrastructure: 1}, 3},
		{"a failure and infrastructure", TaskSummary{Episodes: 2, Failed: 1, Infrastructure: 1}, 1},
		{"interrupted", TaskSummary{Episodes: 2, Failed: 1, Interrupted: 1}, 130},
		{"never ran", TaskSummary{Episodes: 2, Passed: 1, Skipped: 1}, 130},
	} {
		if got := (&Summary{Totals: tt.totals}).ExitCode(); got != tt.want {
			t.Errorf("%s: exit %d, want %d", tt.name, got, tt.want)
		}
	}
}
