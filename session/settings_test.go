package session

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/trace"
)

// TestSettingsRecorded: run.json's settings say how the loop ran —
// --freeze-while-thinking and --max-rate too, 0 (no bound) as 0, not as
// absent.
func TestSettingsRecorded(t *testing.T) {
	for _, c := range []struct {
		freeze bool
		rate   float64
	}{{true, 5}, {false, 0}, {false, 1000}} {
		done := &scripted{steps: []agent.Decision{{Action: action.Action{Kind: action.Done}}}}
		_, tr := runFake(t, &fakeBackend{}, done, func(cfg *Config) { cfg.MaxRate = c.rate },
			func(l *Loop) { l.FreezeWhileThinking = c.freeze })
		s := tr.Run.Settings
		if s == nil || s.FreezeWhileThinking != c.freeze || s.MaxRate == nil || *s.MaxRate != c.rate {
			t.Errorf("freeze %v, rate %v: settings %+v", c.freeze, c.rate, s)
		}
	}
}

// unsettledBackend's screen never stops changing: a stable settle waits
// until its cap and is not met.
type unsettledBackend struct{ *fakeBackend }

func (b unsettledBackend) Create(ctx context.Context, cfg environment.Config) (environment.Environment, error) {
	e, err := b.fakeBackend.Create(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return unsettledEnv{e.(*fakeEnv)}, nil
}

type unsettledEnv struct{ *fakeEnv }

func (e unsettledEnv) Act(ctx context.Context, a action.Action) (action.Result, error) {
	if a.Kind == action.Wait && a.Until == action.UntilStable {
		met := false
		return action.Result{OK: false, Met: &met, Error: "wait until stable: not met"}, nil
	}
	return e.fakeEnv.Act(ctx, a)
}

// TestSettleCapRecorded: a stable settle that hit its cap says so on the
// observation (settle_capped); one that was met does not (the control).
func TestSettleCapRecorded(t *testing.T) {
	settle, err := ParseSettle("stable")
	if err != nil || settle.Duration != DefaultStable || DefaultStable != 200*time.Millisecond || StableCap != 2*time.Second {
		t.Fatalf("stable = %+v, %v; want the default the docs give, 200ms, capped at 2s", settle, err)
	}
	for _, c := range []struct {
		backend environment.Backend
		capped  bool
	}{{unsettledBackend{&fakeBackend{}}, true}, {&fakeBackend{}, false}} {
		dir := filepath.Join(t.TempDir(), "trace")
		ag := &scripted{steps: []agent.Decision{{Action: action.Action{Kind: action.Wait, MS: 1}}, {Action: action.Action{Kind: action.Done}}}}
		if _, err := Run(t.Context(), Config{RunID: "test", Backend: c.backend, TraceDir: dir, Settle: settle,
			App: &app.Bundle{Target: "mover", Manifest: app.Manifest{Command: "mover"}}}, Loop{Agent: ag}); err != nil {
			t.Fatal(err)
		}
		tr, err := trace.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Steps) < 2 || tr.Steps[1].Observation.SettleCapped != c.capped {
			t.Errorf("%T: the observation after the settle says capped %v, want %v", c.backend, len(tr.Steps) >= 2 && tr.Steps[1].Observation.SettleCapped, c.capped)
		}
	}
}

// TestConfigHasNoLoopFields: the episode's configuration holds nothing
// only Run's agent loop uses — an agent, the session-opened hook — so
// that Open's callers (serve, MCP) cannot set one that does nothing. Those
// are Loop's.
func TestConfigHasNoLoopFields(t *testing.T) {
	agentType := reflect.TypeFor[agent.Agent]()
	hookType := reflect.TypeFor[func(*Session)]()
	for f := range reflect.TypeFor[Config]().Fields() {
		if f.Type == agentType || f.Type == hookType || f.Name == "FreezeWhileThinking" {
			t.Errorf("session.Config.%s (%v) is the agent loop's: it belongs in session.Loop", f.Name, f.Type)
		}
	}
	for _, name := range []string{"Agent", "FreezeWhileThinking", "Opened"} {
		if _, ok := reflect.TypeFor[Loop]().FieldByName(name); !ok {
			t.Errorf("session.Loop has no %s", name)
		}
	}
}
