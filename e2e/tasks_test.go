package e2e

// The example tasks (examples/tasks): real applications of the office
// image, each task a pair of play-tests graded by the private grader — a
// solution that must grade verified and a wrong attempt that must grade
// incorrect.

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/eval"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
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

// TestExampleTasks: `agentbox eval examples/tasks/suite.yaml` on each
// backend, two episodes at a time — on Docker with the office image, on
// the local backend with the host's applications (scripts/deps.sh test
// installs the image's packages: the list is images/Dockerfile.office's)
// and the image's LibreOffice settings written into each sandbox's home:
// every solution grades verified (its script passing) and every wrong
// attempt incorrect (never malformed or infrastructure). It logs the
// suite's episodes per minute on each.
func TestExampleTasks(t *testing.T) {
	testenv.Require(t, testenv.Slow("the example tasks on LibreOffice, GIMP, Mousepad and Chromium"))
	_, pairs := exampleTaskPairs(t)
	bin := testenv.Build(t, "./cmd/agentbox")
	t.Run("docker", func(t *testing.T) {
		requireCurrentImage(t, testenv.OfficeImage)
		runExampleTasks(t, bin, pairs, "--backend", "docker", "--image", testenv.OfficeImage)
	})
	t.Run("local", func(t *testing.T) {
		requireLocal(t)
		testenv.Require(t, testenv.Programs("localc", "lowriter", "loimpress", "mousepad", "gimp", "chromium"))
		runExampleTasks(t, bin, pairs, "--backend", "local")
	})
}

// runExampleTasks runs the example suite with the backend's flags and
// checks every pair's grades.
func runExampleTasks(t *testing.T, bin string, pairs map[string][2]*eval.Task, backend ...string) {
	out := filepath.Join(t.TempDir(), "eval")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
	defer cancel()
	args := append([]string{"eval", exampleTasks}, backend...)
	args = append(args, "--memory", "2g", "--parallel", "2", "--out", out,
		// GIMP and LibreOffice start in 3–5 s on an idle machine and took
		// over a minute, the default, beside the whole suite on two busy
		// cores: the start and the window are given time, the tasks not.
		"--start-timeout", "4m", "--ready-timeout", "3m")
	cmd := exec.CommandContext(ctx, bin, args...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	r := result{stdout: so.String(), stderr: se.String(), dir: out}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("agentbox eval: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatalf("%v\n%s", err, r)
	}
	var sum eval.Summary
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatal(err)
	}
	got := map[string]eval.Episode{}
	for _, e := range sum.Episodes {
		got[e.Task] = e
	}
	failed := map[string]bool{} // the tasks whose episodes did not do as they should
	for _, name := range slices.Sorted(maps.Keys(pairs)) {
		for _, c := range []struct {
			task, grade string
		}{{name + "-solution", trace.GradeVerified}, {name + "-wrong", trace.GradeIncorrect}} {
			e, ok := got[c.task]
			switch {
			case !ok:
				t.Errorf("%s: no episode", c.task)
				failed[c.task] = true
			case e.Grade != c.grade:
				t.Errorf("%s: grade %q (%s, %s: %s; trace %s): want %s", c.task, e.Grade, e.Category, e.Reason, e.Message, filepath.Join(out, e.Trace), c.grade)
				failed[c.task] = true
			case e.Outcome != trace.Success && c.grade == trace.GradeVerified:
				t.Errorf("%s: verified, but the solution's script did not pass: %s %s: %s", c.task, e.Outcome, e.Reason, e.Message)
				failed[c.task] = true
			case c.grade == trace.GradeIncorrect:
				// The wrong attempt's script passed (it did all it meant
				// to: an edit that did not land is no wrong answer); only
				// the grade failed it. Eval's reason is the grade's, so
				// the script's is read from the trace.
				if run := openTrace(t, filepath.Join(out, e.Trace)).Run; run.Reason != trace.ReasonDone {
					t.Errorf("%s: incorrect, but its script did not pass: %s %s: %s", c.task, run.Outcome, run.Reason, run.Message)
					failed[c.task] = true
				}
			}
		}
	}
	// Every wrong attempt fails, so eval exits 1; any other code is a
	// usage or infrastructure error.
	if r.code != 1 {
		t.Errorf("eval exited %d: want 1 (the wrong attempts fail)\n%s", r.code, r)
	}
	if t.Failed() {
		t.Logf("eval's output:\n%s", r)
		// The failed episodes' traces, kept for a person to read (CI
		// keeps the artifacts; the test's own directory goes with it).
		keep := filepath.Join(artifacts(t), t.Name())
		for task := range failed {
			if e, ok := got[task]; ok {
				if err := os.CopyFS(filepath.Join(keep, task), os.DirFS(filepath.Join(out, e.Trace))); err != nil {
					t.Logf("keeping %s's trace: %v", task, err)
				}
			}
		}
		t.Logf("the failed episodes' traces: %s", keep)
	}
	t.Logf("%d episodes in %s, 2 at a time: %.1f episodes per minute",
		len(sum.Episodes), elapsed.Round(time.Second), float64(len(sum.Episodes))/elapsed.Minutes())
}
