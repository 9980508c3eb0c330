package eval

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment/guestenv/guestenvtest"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/session"
)

// TestTaskClock: a task's clock (clock, clock_step) is its episodes',
// over eval's --clock; a task without one has eval's.
func TestTaskClock(t *testing.T) {
	dir := t.TempDir()
	suite := "tasks:\n" +
		"  - {name: timed, target: app, agent: idle, clock: virtual, clock_step: 50ms}\n" +
		"  - {name: wall, target: app, agent: idle, clock: wall}\n" +
		"  - {name: plain, target: app, agent: idle}\n"
	s, err := Load(writeFile(t, dir, "suite.yaml", suite))
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

// TestTaskPolicy: a task's policy (policy: FILE, relative to the suite)
// gates its episodes over eval's --policy, and one that names elements
// starts the accessibility bus; a policy that does not parse is the
// suite's error at the task's line, naming the policy's own.
func TestTaskPolicy(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string { return writeFile(t, dir, name, text) }
	write("gate.yaml", "rules:\n  - {name: no-delete, decision: deny, target: {role: push button, name: Delete}}\n")
	path := write("suite.yaml", "tasks:\n  - {name: gated, target: app, agent: idle, policy: gate.yaml}\n  - {name: plain, target: app, agent: idle}\n")
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	evalPolicy, err := policy.Parse("eval.yaml", []byte("rules:\n  - {decision: deny, kind: [type]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Policy: evalPolicy}
	gated, err := episodeConfig(s.Tasks[0], &app.Bundle{}, o)
	if err != nil {
		t.Fatal(err)
	}
	if gated.Policy != s.Tasks[0].Policy || gated.Policy == nil || !gated.Env.A11y {
		t.Errorf("the gated task's episode: policy %v (want the task's %v), a11y %v", gated.Policy, s.Tasks[0].Policy, gated.Env.A11y)
	}
	plain, err := episodeConfig(s.Tasks[1], &app.Bundle{}, o)
	if err != nil {
		t.Fatal(err)
	}
	if plain.Policy != evalPolicy || plain.Env.A11y {
		t.Errorf("the plain task's episode: policy %v (want eval's), a11y %v", plain.Policy, plain.Env.A11y)
	}

	write("bad.yaml", "rules:\n  - {decision: perhaps}\n")
	bad := write("bad-suite.yaml", "tasks:\n  - name: a\n    target: app\n    agent: idle\n    policy: bad.yaml\n")
	_, err = Load(bad)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "bad-suite.yaml:5: task 1: field \"policy\"") || !strings.Contains(err.Error(), "bad.yaml:2") {
		t.Errorf("a bad task policy: %v", err)
	}
}

// TestManifestPolicy: a task's app manifest's policy (its field policy)
// is read before the first episode — one that does not parse is an error
// naming the task and the file, and nothing runs.
func TestManifestPolicy(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) { writeFile(t, dir, name, text) }
	write("app/agentbox.json", `{"command": "xterm", "policy": "gate.yaml"}`)
	write("app/gate.yaml", "rules:\n  - {kind: clik, decision: deny}\n")
	write("suite.yaml", "tasks:\n  - {name: gated, target: app, agent: idle}\n")
	s, err := Load(filepath.Join(dir, "suite.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	created := 0
	b := &guestenvtest.Backend{New: func() *guestenvtest.Guest { created++; return &guestenvtest.Guest{} }}
	sum, err := Run(t.Context(), s, Options{Backend: b, Out: filepath.Join(dir, "out"), RunID: "t", Parallel: 1})
	if err == nil || !strings.Contains(err.Error(), "task gated: the app manifest's policy") || !strings.Contains(err.Error(), "gate.yaml:2") {
		t.Fatalf("Run: %v, %+v; want the manifest's policy refused", err, sum)
	}
	if created != 0 {
		t.Errorf("%d sandboxes created", created)
	}
}

// writeFile writes text to name below dir (its directories made) and
// returns its path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
