package session

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// collectingBackend makes fakeEnvs that can collect (environment.Collector)
// and, with dead, whose sandbox has ended by the episode's end.
type collectingBackend struct {
	fakeBackend
	dead bool

	// windows are the desktop's windows (Observe's state; a wait until
	// window is met by them), besides the fake's.
	windows []observe.Window

	cmu      sync.Mutex
	patterns []string
	lim      app.CollectLimits
	calls    int
}

type collectingEnv struct {
	*fakeEnv
	b *collectingBackend
}

func (b *collectingBackend) Create(ctx context.Context, cfg environment.Config) (environment.Environment, error) {
	e, err := b.fakeBackend.Create(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &collectingEnv{fakeEnv: e.(*fakeEnv), b: b}, nil
}

func (e *collectingEnv) Done() <-chan struct{} {
	if e.b.dead {
		return closedChan()
	}
	return nil
}

func (e *collectingEnv) Observe(ctx context.Context) (*observe.Frame, environment.State, error) {
	f, st, err := e.fakeEnv.Observe(ctx)
	st.Windows = e.b.windows
	return f, st, err
}

func (e *collectingEnv) Act(ctx context.Context, a action.Action) (action.Result, error) {
	if a.Kind == action.Wait && a.Until == action.UntilWindow {
		match, err := action.TitleMatcher(a.Title)
		if err != nil {
			return action.Result{}, err
		}
		for _, w := range e.b.windows {
			if match(w.Title) {
				return action.Result{OK: true}, nil
			}
		}
		return action.Result{OK: false, Error: fmt.Sprintf("wait until window: not met within %dms", a.MS)}, nil
	}
	return e.fakeEnv.Act(ctx, a)
}

func closedChan() chan struct{} { c := make(chan struct{}); close(c); return c }

func (e *collectingEnv) Collect(_ context.Context, patterns []string, lim app.CollectLimits, dir string) (environment.Collected, error) {
	e.b.cmu.Lock()
	e.b.patterns, e.b.lim = patterns, lim
	e.b.calls++
	e.b.cmu.Unlock()
	if err := os.MkdirAll(filepath.Join(dir, "Documents"), 0o755); err != nil {
		return environment.Collected{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, "Documents", "out.txt"), []byte("done\n"), 0o644); err != nil {
		return environment.Collected{}, err
	}
	return environment.Collected{
		Files:   []environment.CollectedFile{{Path: "Documents/out.txt", Size: 5, SHA256: "abc"}},
		Refused: []environment.RefusedFile{{Path: "Documents/link", Reason: "a symbolic link (not followed)"}},
	}, nil
}

// gradeRecorder is a Grader that notes what it was given and whether the
// sandbox was gone by then.
type gradeRecorder struct {
	b                  *collectingBackend
	filesDir, traceDir string
	closedBefore       int
}

func (g *gradeRecorder) Grade(_ context.Context, filesDir, traceDir string) trace.Grade {
	g.filesDir, g.traceDir = filesDir, traceDir
	g.b.mu.Lock()
	g.closedBefore = g.b.closed
	g.b.mu.Unlock()
	return trace.Grade{Outcome: trace.GradeVerified, Score: 1}
}

func TestCollectAndGrade(t *testing.T) {
	b := &collectingBackend{}
	g := &gradeRecorder{b: b}
	done := &scripted{steps: []agent.Decision{{Action: action.Action{Kind: action.Done}}}}
	res, tr := runFake(t, &b.fakeBackend, done, func(c *Config) {
		c.Backend = b
		c.Collect = app.Collect{Patterns: []string{"~/Documents/*.txt"}, Before: []app.CollectStep{{Action: action.Action{Kind: action.Key, Keys: "ctrl+s"}}}}
		c.Grader = g
	})
	if b.calls != 1 || len(b.patterns) != 1 || b.patterns[0] != "Documents/*.txt" {
		t.Fatalf("Collect called %d times with %v, want once with Documents/*.txt", b.calls, b.patterns)
	}
	if got := tr.Run.Files; len(got) != 1 || got[0].Path != "Documents/out.txt" {
		t.Errorf("run.json files = %+v", got)
	}
	if got := tr.Run.FilesRefused; len(got) != 1 || got[0].Path != "Documents/link" {
		t.Errorf("run.json files_refused = %+v", got)
	}
	if len(res.Files) != 1 || res.Grade == nil || res.Grade.Outcome != trace.GradeVerified {
		t.Errorf("result files %+v, grade %+v", res.Files, res.Grade)
	}
	if tr.Run.Grade == nil || tr.Run.Grade.Outcome != trace.GradeVerified {
		t.Errorf("run.json grade = %+v", tr.Run.Grade)
	}
	if _, ok := tr.Run.Timings["grade"]; !ok {
		t.Errorf("no grade timing: %v", tr.Run.Timings)
	}
	if g.closedBefore != 1 {
		t.Errorf("the grader ran with %d sandboxes closed, want 1: after the teardown", g.closedBefore)
	}
	if g.filesDir != filepath.Join(g.traceDir, trace.FilesDir) {
		t.Errorf("grader given %s and %s", g.filesDir, g.traceDir)
	}
	var collectSteps []trace.Record
	for _, s := range tr.Steps {
		if s.Actor == trace.ActorCollect {
			collectSteps = append(collectSteps, s.Record)
		}
	}
	if len(collectSteps) != 1 || collectSteps[0].Action.Kind != action.Key {
		t.Errorf("collect steps = %+v, want the before_collect key", collectSteps)
	}
}

func TestCollectFromDeadSandbox(t *testing.T) {
	b := &collectingBackend{dead: true}
	g := &gradeRecorder{b: b}
	done := &scripted{steps: []agent.Decision{{Action: action.Action{Kind: action.Done}}}}
	_, tr := runFake(t, &b.fakeBackend, done, func(c *Config) {
		c.Backend = b
		c.Collect = app.Collect{Patterns: []string{"~/out.txt"}}
		c.Grader = g
	})
	if b.calls != 0 {
		t.Errorf("Collect called on a dead sandbox")
	}
	if got := tr.Run.FilesRefused; len(got) != 1 || got[0].Path != "~/out.txt" || !strings.Contains(got[0].Reason, "the sandbox had ended") {
		t.Errorf("files_refused = %+v, want ~/out.txt not collected: the sandbox had ended", got)
	}
	found := false
	for _, ev := range tr.Records {
		if ev.Event == EventCollectFailed {
			found = true
		}
	}
	if !found {
		t.Errorf("no %s event in the trace", EventCollectFailed)
	}
	if tr.Run.Grade == nil {
		t.Error("the grader was not called")
	}
}

// TestBeforeCollectChecks: before_collect's wait_for and expect steps. A
// check that holds lets the episode's ending stand; one that does not
// ends the steps, turns a success into a failure (check_failed) whose
// message names the step and what was seen, adds itself to a failure's
// message; the files are collected and graded either way.
func TestBeforeCollectChecks(t *testing.T) {
	steps := func(t *testing.T, js string) []app.CollectStep {
		t.Helper()
		var tf app.TaskFiles
		if err := tf.Set("before_collect", json.RawMessage(js)); err != nil {
			t.Fatal(err)
		}
		return tf.Collect.Before
	}
	giveUp := action.Action{Kind: action.Done, Success: new(bool)}
	for _, c := range []struct {
		name    string
		steps   string
		end     action.Action
		outcome trace.Outcome
		reason  string
		message string // a part of the run's message; "" for the agent's own
		recs    int    // the collect actor's records: steps and checks
	}{
		{"all hold", `[{"wait_for": "window", "title": "mover*"}, {"expect": "window", "title": "/^mover - saved$/"}, {"expect": "running"}, {"action": "key", "keys": "ctrl+s"}]`,
			action.Action{Kind: action.Done}, trace.Success, trace.ReasonDone, "", 4},
		{"expect window fails", `[{"action": "key", "keys": "ctrl+s"}, {"expect": "window", "title": "*saved as*"}, {"action": "key", "keys": "ctrl+q"}]`,
			action.Action{Kind: action.Done}, trace.Failure, trace.ReasonCheckFailed,
			`before_collect step 2 (expect window "*saved as*") did not hold: no window's title matches; the windows: "mover - saved"`, 2},
		{"wait_for window not met", `[{"wait_for": "window", "title": "Export*", "timeout_ms": 50}, {"expect": "running"}]`,
			action.Action{Kind: action.Done}, trace.Failure, trace.ReasonCheckFailed,
			`before_collect step 1 (wait_for window "Export*") did not hold: wait until window: not met within 50ms`, 1},
		{"expect exited fails", `[{"expect": "exited"}]`,
			action.Action{Kind: action.Done}, trace.Failure, trace.ReasonCheckFailed,
			`before_collect step 1 (expect exited) did not hold: the app still runs`, 1},
		{"a failure stands and says it", `[{"expect": "exited", "code": 3}]`,
			giveUp, trace.Failure, trace.ReasonGaveUp, `; and before_collect step 1 (expect exited (code 3)) did not hold: the app still runs`, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &collectingBackend{windows: []observe.Window{{ID: 1, Title: "mover - saved"}}}
			g := &gradeRecorder{b: b}
			ag := &scripted{steps: []agent.Decision{{Action: c.end}}}
			res, tr := runFake(t, &b.fakeBackend, ag, func(cfg *Config) {
				cfg.Backend = b
				cfg.Collect = app.Collect{Patterns: []string{"~/Documents/*.txt"}, Before: steps(t, c.steps)}
				cfg.Grader = g
			})
			if res.Outcome != c.outcome || res.Reason != c.reason || tr.Run.Outcome != c.outcome || tr.Run.Reason != c.reason {
				t.Errorf("result %s (%s), run.json %s (%s): want %s (%s); message %q", res.Outcome, res.Reason, tr.Run.Outcome, tr.Run.Reason, c.outcome, c.reason, res.Message)
			}
			if c.message != "" && (!strings.Contains(res.Message, c.message) || !strings.Contains(tr.Run.Message, c.message)) {
				t.Errorf("message %q (run.json %q): want it to contain %q", res.Message, tr.Run.Message, c.message)
			}
			if b.calls != 1 || res.Grade == nil {
				t.Errorf("collected %d times, grade %+v: want the files collected and graded", b.calls, res.Grade)
			}
			recs := 0
			for _, s := range tr.Steps {
				if s.Actor == trace.ActorCollect {
					recs++
				}
			}
			for _, e := range tr.Records {
				if e.Event == EventCollectCheck {
					recs++
				}
			}
			if recs != c.recs {
				t.Errorf("%d collect steps and checks in the trace, want %d", recs, c.recs)
			}
		})
	}
}

// finalGrader reads the trace's steps as the private grader does and notes
// the records it found there.
type finalGrader struct{ types []string }

func (g *finalGrader) Grade(_ context.Context, _, traceDir string) trace.Grade {
	f, err := os.Open(filepath.Join(traceDir, trace.StepsFile))
	if err != nil {
		return trace.Grade{Outcome: trace.GradeInfrastructure, Message: err.Error()}
	}
	defer f.Close()
	recs, _, err := trace.ReadRecords(f)
	if err != nil {
		return trace.Grade{Outcome: trace.GradeInfrastructure, Message: err.Error()}
	}
	for _, r := range recs {
		g.types = append(g.types, r.Type)
	}
	return trace.Grade{Outcome: trace.GradeVerified, Score: 1}
}

// TestCloseGradesLastObservation: a session closed from outside (serve's
// DELETE, a lease running out) records the observation nobody acted on
// before the grader runs, so the grader sees all the trace will hold.
func TestCloseGradesLastObservation(t *testing.T) {
	g := &finalGrader{}
	s, _ := openFake(t, &fakeBackend{}, func(c *Config) { c.Grader = g })
	if _, err := s.Observe(t.Context()); err != nil {
		t.Fatal(err)
	}
	res := s.Close(t.Context(), End{Outcome: trace.Interrupted, Reason: trace.ReasonSignal, Message: "closed by the client"})
	if res.Grade == nil || res.Grade.Outcome != trace.GradeVerified {
		t.Fatalf("grade = %+v", res.Grade)
	}
	if n := len(g.types); n == 0 || g.types[n-1] != trace.TypeFinal {
		t.Errorf("the grader saw records %v, want the last observation (%s) among them", g.types, trace.TypeFinal)
	}
}
