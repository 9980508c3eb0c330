// Package demo is the deterministic agent of the mover demo: it holds a key,
// waits one second, and succeeds only if the green square's pixel centroid
// moved at least 100 px to the right. It exists to test the whole system
// without a model.
package demo

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/observe"
)

func init() {
	agent.Register("demo", func(opts agent.Options) (agent.Agent, error) { return New(opts) })
}

// Agent is the demo agent.
type Agent struct {
	key      string
	hold     time.Duration
	minMove  float64
	phase    int
	looks    int
	start    Centroid
	moved    float64
	verdict  string
	succeeds bool
	failed   string // the first of its actions that failed, and why
}

// New makes a demo agent. Options: key (default Right: the key to hold —
// Left breaks the demo on purpose), hold_ms (default 1000), min_px (100).
func New(opts agent.Options) (*Agent, error) {
	if err := agent.CheckOptions(opts, "key", "hold_ms", "min_px"); err != nil {
		return nil, err
	}
	a := &Agent{key: "Right", hold: time.Second, minMove: 100}
	if k, ok := opts["key"]; ok {
		if err := action.Validate(action.Action{Kind: action.KeyDown, Key: k}, action.DefaultLimits(1, 1)); err != nil {
			return nil, fmt.Errorf("option key: want one key name such as Right or Left: %w", err)
		}
		a.key = k
	}
	if v, ok := opts["hold_ms"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 60000 {
			return nil, fmt.Errorf("option hold_ms: want 0–60000, got %q", v)
		}
		a.hold = time.Duration(n) * time.Millisecond
	}
	if v, ok := opts["min_px"]; ok {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
			return nil, fmt.Errorf("option min_px: want a number, got %q", v)
		}
		a.minMove = n
	}
	return a, nil
}

// Decide implements agent.Agent. An action of its own that failed ends
// the demo as a failure (after releasing the key, if it was held).
func (a *Agent) Decide(_ context.Context, obs *observe.Observation) (agent.Decision, error) {
	if l := obs.Last; l != nil && !l.OK && a.failed == "" {
		a.failed = fmt.Sprintf("%s failed: %s", a.lastAction(), l.Error)
	}
	if a.failed != "" && a.phase != 2 {
		// Nothing is held (the key went down in phase 1 and is released
		// in phase 3, which still runs after a failed wait).
		return done(false, a.failed), nil
	}
	a.phase++
	switch a.phase {
	case 1:
		c := GreenCentroid(obs.Screen)
		if c.N == 0 {
			// The window can be up before its first frame is drawn: look
			// again for a while, as a person would.
			if a.looks < 20 {
				a.looks++
				a.phase--
				return agent.Decision{Action: action.Action{Kind: action.Wait, MS: 100}, Message: "no green square yet; waiting for the app to draw"}, nil
			}
			return done(false, "no green square on the screen after 2 s"), nil
		}
		a.start = c
		return agent.Decision{
			Action:  action.Action{Kind: action.KeyDown, Key: a.key},
			Message: fmt.Sprintf("green square at (%.0f, %.0f); holding %s", math.Round(c.X), math.Round(c.Y), a.key),
		}, nil
	case 2:
		return agent.Decision{
			Action:  action.Action{Kind: action.Wait, MS: int(a.hold / time.Millisecond)},
			Message: fmt.Sprintf("waiting %v with %s held", a.hold, a.key),
		}, nil
	case 3:
		c := GreenCentroid(obs.Screen)
		switch {
		case c.N == 0:
			a.verdict = "the green square is gone"
		default:
			// Judged and told in whole pixels, each end rounded the same
			// way (half away from zero, not %.0f's half to even), so the
			// numbers of the verdict add up.
			x0, x1 := math.Round(a.start.X), math.Round(c.X)
			a.moved = x1 - x0
			a.succeeds = a.moved >= a.minMove
			a.verdict = fmt.Sprintf("the square moved %+.0f px (from x=%.0f to x=%.0f; need ≥ %s)", a.moved, x0, x1, strconv.FormatFloat(a.minMove, 'f', -1, 64))
		}
		return agent.Decision{
			Action:  action.Action{Kind: action.KeyUp, Key: a.key},
			Message: a.verdict + "; releasing " + a.key,
		}, nil
	default:
		return done(a.succeeds, a.verdict), nil
	}
}

// lastAction names the action of the previous phase.
func (a *Agent) lastAction() string {
	switch a.phase {
	case 1:
		return "holding " + a.key
	case 2:
		return "the wait"
	case 3:
		return "releasing " + a.key
	}
	return "waiting for the app to draw"
}

func done(ok bool, msg string) agent.Decision {
	return agent.Decision{Action: action.Action{Kind: action.Done, Success: &ok, Message: msg}, Message: msg}
}

// Centroid is the mean position of N matching pixels.
type Centroid struct {
	X, Y float64
	N    int
}

// IsGreen matches the mover's square: clearly green (g > 180, r < 80,
// b < 80).
func IsGreen(r, g, b uint8) bool { return g > 180 && r < 80 && b < 80 }

// GreenCentroid finds the centroid of the mover's green square.
func GreenCentroid(f *observe.Frame) Centroid {
	if f == nil {
		return Centroid{}
	}
	x, y, n := f.Centroid(IsGreen)
	return Centroid{X: x, Y: y, N: n}
}
