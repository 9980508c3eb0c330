package eval

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/session"
)

// TestTaskClock: a task's clock (clock, clock_step) is its episodes',
// over eval's --clock; a task without one has eval's.
func TestTaskClock(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "suite.yaml")
	suite := "tasks:\n" +
		"  - {name: timed, target: app, agent: idle, clock: virtual, clock_step: 50ms}\n" +
		"  - {name: wall, target: app, agent: idle, clock: wall}\n" +
		"  - {name: plain, target: app, agent: idle}\n"
	if err := os.WriteFile(path, []byte(suite), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	evalClock := session.Clock{Virtual: true, Step: 7 * time.Millisecond}
	for i, want := range []session.Clock{
		{Virtual: true, Step: 50 * time.Millisecond},
		{},
		evalClock,
	} {
		task := s.Tasks[i]
		cfg, err := episodeConfig(task, &app.Bundle{}, Options{Clock: evalClock})
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Clock.Virtual != want.Virtual || cfg.Clock.Step != want.Step {
			t.Errorf("task %s: the episode's clock %+v, want %+v", task.Name, cfg.Clock, want)
		}
	}
}
