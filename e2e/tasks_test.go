package e2e

// The example tasks (examples/tasks): real applications of the office
// image, each task a pair of play-tests graded by the private grader — a
// solution that must grade verified and a wrong attempt that must grade
// incorrect.

import (
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/eval"
)

const exampleTasks = "../examples/tasks/suite.yaml"

// exampleTaskPairs loads the suite and returns its tasks by pair name:
// every task is NAME-solution or NAME-wrong, and every NAME has both.
func exampleTaskPairs(t *testing.T) (*eval.Suite, map[string][2]*eval.Task) {
	t.Helper()
	s, err := eval.Load(exampleTasks)
	if err != nil {
		t.Fatal(err)
	}
	pairs := map[string][2]*eval.Task{}
	for _, task := range s.Tasks {
		name, kind, ok := strings.Cut(task.Name, "-solution")
		i := 0
		if !ok || kind != "" {
			name, kind, ok = strings.Cut(task.Name, "-wrong")
			i = 1
		}
		if !ok || kind != "" {
			t.Fatalf("task %s: want NAME-solution or NAME-wrong", task.Name)
		}
		p := pairs[name]
		p[i] = task
		pairs[name] = p
	}
	for name, p := range pairs {
		if p[0] == nil || p[1] == nil {
			t.Errorf("task %s: want both %s-solution and %s-wrong", name, name, name)
		}
	}
	return s, pairs
}

// TestExampleTasksSuite: the suite loads, its tasks come in pairs over
// the six applications, each with a grade, inputs and something to
// collect, and nothing private (the grade's expected files, the scripts)
// lies in an app directory, which is staged into the sandbox.
func TestExampleTasksSuite(t *testing.T) {
	_, pairs := exampleTaskPairs(t)
	if len(pairs) < 8 {
		t.Errorf("%d tasks: want at least 8", len(pairs))
	}
	apps := map[string]bool{}
	for name, p := range pairs {
		for _, task := range p {
			if task == nil {
				continue
			}
			if task.Grade == nil {
				t.Errorf("%s: no grade", task.Name)
			}
			b, err := app.Load(task.Target, app.DefaultLimits)
			if err != nil {
				t.Fatalf("%s: %v", task.Name, err)
			}
			apps[b.Manifest.Command] = true
			files := task.TaskFiles(b)
			if len(files.Inputs) == 0 || files.Collect.Empty() {
				t.Errorf("%s: inputs %v, collect %v: want both", task.Name, files.Inputs, files.Collect.Patterns)
			}
			for _, f := range b.Files {
				if f.Rel != app.ManifestName && f.Rel != "." {
					t.Errorf("%s: the app directory stages %s: only %s belongs there", name, f.Rel, app.ManifestName)
				}
			}
			b.Close()
		}
	}
	for _, want := range []string{"localc", "lowriter", "loimpress", "mousepad", "gimp", "chromium"} {
		if !apps[want] {
			t.Errorf("no task runs %s", want)
		}
	}
}

// The run of the whole suite (every solution verified, every wrong attempt
// incorrect) is TestExampleTasks on branch h-tasks: impress-title's solution
// grades incorrect in about one run in four (LibreOffice takes the double
// click on the title for the subtitle), so it stays out of make test until
// its script is made reliable (examples/tasks/README.md, known limits).
