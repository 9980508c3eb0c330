package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/trace"
)

// collectingBackend makes fakeEnvs that can collect (environment.Collector)
// and, with dead, whose sandbox has ended by the episode's end.
type collectingBackend struct {
	fakeBackend
	dead bool

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
		c.Collect = app.Collect{Patterns: []string{"~/Documents/*.txt"}, Before: []action.Action{{Kind: action.Key, Keys: "ctrl+s"}}}
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
