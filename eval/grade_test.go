package eval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

// TestLoadGrade: a task's grade is parsed with the suite (its errors name
// the suite's line, its host paths resolve beside the suite) and set as
// the episodes' Grader; a script's header may carry it instead, not both.
func TestLoadGrade(t *testing.T) {
	path := suiteDir(t, "tasks:\n  - name: a\n    target: app\n    agent: idle\n    grade:\n      - {command: [./check.sh]}\n      - {table: Documents/s.ods, cell: Sheet1.B10, equals: 1234}\n")
	dir := filepath.Dir(path)
	if err := os.WriteFile(filepath.Join(dir, "check.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	g := s.Tasks[0].Grade
	if g == nil || len(g.Checks) != 2 || g.Checks[0].Command[0] != filepath.Join(dir, "check.sh") || g.Checks[1].Sheet != "Sheet1" {
		t.Fatalf("grade %+v", g)
	}
	cfg, err := episodeConfig(s.Tasks[0], appBundle(t, s.Tasks[0]), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Grader != session.Grader(g) {
		t.Errorf("the episode's Grader is %v, want the task's grade", cfg.Grader)
	}
	if cfg.Env.Observe {
		t.Error("a grade without observer checks turned the observer on")
	}

	// A grade that checks the observer's activity turns the observer on.
	path = suiteDir(t, "tasks:\n  - name: a\n    target: app\n    agent: idle\n    grade:\n      - {process: 'sh -c *', exit: 0}\n")
	if s, err = Load(path); err != nil {
		t.Fatal(err)
	}
	if cfg, err = episodeConfig(s.Tasks[0], appBundle(t, s.Tasks[0]), Options{}); err != nil {
		t.Fatal(err)
	}
	if !cfg.Env.Observe {
		t.Error("a grade with a process check: the episode's observer is off")
	}

	for _, tt := range []struct{ name, suite, want string }{
		{"unknown field", "tasks:\n  - name: a\n    target: app\n    agent: idle\n    grade:\n      - {exists: a, wieght: 2}\n", `suite.yaml:6: task 1: grade check 1: unknown field "wieght" (did you mean weight?)`},
		{"both", "tasks:\n  - name: a\n    target: app\n    script: graded.yaml\n    grade:\n      - {exists: a}\n", `grade is given both here and in`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := suiteDir(t, tt.suite)
			graded := play + "grade:\n  - exists: b\n"
			if err := os.WriteFile(filepath.Join(filepath.Dir(path), "graded.yaml"), []byte(graded), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Load(path); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}

// TestCategorizeGrade: with a grade, the grade decides whether the task
// passed; without one, the episode's outcome.
func TestCategorizeGrade(t *testing.T) {
	for _, tt := range []struct {
		outcome trace.Outcome
		reason  string
		grade   string
		want    string
	}{
		{trace.Success, "", "", Passed},
		{trace.Failure, "", "", Failed},
		{trace.Success, "", trace.GradeVerified, Passed},
		{trace.Failure, "", trace.GradeVerified, Passed},
		{trace.Success, "", trace.GradeIncorrect, Failed},
		{trace.Success, "", trace.GradeMalformed, Failed},
		{trace.Success, "", trace.GradeInfrastructure, Infrastructure},
		{trace.Interrupted, "", trace.GradeVerified, Interrupted},
		// An episode whose sandbox or app failed (the app never started,
		// so nothing was collected) is infrastructure, not a wrong answer;
		// an agent that broke is its own failure (the examples' suite
		// counted an app_start error as failed: grade_incorrect).
		{trace.Error, trace.ReasonAppStart, trace.GradeIncorrect, Infrastructure},
		{trace.Error, trace.ReasonAppStart, trace.GradeMalformed, Infrastructure},
		{trace.Error, trace.ReasonAppStart, trace.GradeVerified, Passed},
		{trace.Error, trace.ReasonAgent, trace.GradeIncorrect, Failed},
	} {
		r := session.Result{Outcome: tt.outcome, Reason: tt.reason}
		if tt.grade != "" {
			r.Grade = &trace.Grade{Outcome: tt.grade}
		}
		if got := categorize(r); got != tt.want {
			t.Errorf("%s (%s) graded %q: %s, want %s", tt.outcome, tt.reason, tt.grade, got, tt.want)
		}
	}
}

func appBundle(t *testing.T, task *Task) *app.Bundle {
	t.Helper()
	b, err := app.Load(task.Target, app.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
