package session

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/vault"
	"github.com/codegirl-games/agentbox/mask"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/trace"
)

// Masked screens (package mask): every frame the session hands out — to
// the agent, the trace, a watcher (Peek), a reset's first observation —
// is painted first. A governed run (a vault or a policy) masks password
// fields, card numbers, one-time code fields and the vault's values
// wherever the accessibility tree shows them, and the policy's mask rules.
// Only the environment's own frame, inside this process between the
// capture and the paint, holds the unmasked pixels.

// peekMaskAge is how old the areas a watcher's frame is painted with may
// be before Peek reads the tree again (a live page looks up to 50 times
// a second; a tree read costs milliseconds).
const peekMaskAge = 250 * time.Millisecond

// maskState is the areas of the last paint and when they were found.
type maskState struct {
	areas []mask.Area
	at    time.Time
}

// newMasker makes the episode's masker (nil when the run is not governed).
func newMasker(p *policy.Policy, v *vault.Vault) *mask.Masker {
	if p == nil && v == nil {
		return nil
	}
	var rules []mask.Rule
	if p != nil {
		rules = p.Mask
	}
	var values []string
	for _, n := range v.Names() {
		if val, ok := v.Value(n); ok {
			values = append(values, val)
		}
	}
	return mask.New(rules, values, true)
}

// maskNote is what the run's header says of masking, "" when there is
// none.
func (s *Session) maskNote() string {
	if !s.masker.Active() {
		return ""
	}
	if s.masker.NeedsTree() && !s.cfg.Env.A11y {
		return "masking: only the policy's regions (password fields, card numbers, one-time codes, the vault's values and selectors are found in the accessibility tree: give --a11y)"
	}
	return "masking: password fields, card numbers, one-time codes, the vault's values and the policy's mask rules are painted over on every screen"
}

// paint masks f for handing out. fresh reads the tree now (an
// observation); else the last areas are used while younger than
// peekMaskAge (a watcher's look). It returns the raw tree it read (nil if
// none), for the step's own tree. A tree that cannot be read is no hole:
// the last areas are painted; only a failed guest ends the step.
func (s *Session) paint(ctx context.Context, f *observe.Frame, fresh bool) (*observe.Frame, *observe.Tree, []mask.Area, error) {
	if f == nil || !s.masker.Active() {
		return f, nil, nil, nil
	}
	last := s.maskLast.Load()
	if !fresh && last != nil && time.Since(last.at) < peekMaskAge {
		return mask.Paint(f, last.areas), nil, last.areas, nil
	}
	var t *observe.Tree
	if s.masker.NeedsTree() && s.cfg.Env.A11y {
		if acc, ok := s.environment().(environment.Accessible); ok {
			tr, err := acc.Tree(ctx, s.cfg.TreeLimits)
			switch {
			case err == nil:
				t = tr
			case errors.Is(err, environment.ErrGuest) || ctx.Err() != nil:
				return nil, nil, nil, fmt.Errorf("the tree for masking: %w", err)
			case last != nil:
				return mask.Paint(f, last.areas), nil, last.areas, nil
			}
		}
	}
	areas := s.masker.Rects(t, f.Width, f.Height)
	s.maskLast.Store(&maskState{areas: areas, at: time.Now()})
	return mask.Paint(f, areas), t, areas, nil
}

// maskedAreas is the trace's record of what a paint covered.
func maskedAreas(areas []mask.Area) []trace.MaskedArea {
	if len(areas) == 0 {
		return nil
	}
	out := make([]trace.MaskedArea, len(areas))
	for i, a := range areas {
		out[i] = trace.MaskedArea{Rect: a.Rect, Why: string(a.Why), Rule: a.Rule}
	}
	return out
}

// maskHolder is embedded in Session: the masker and its last areas
// (shared by the step's observations and watchers' looks).
type maskHolder struct {
	masker   *mask.Masker
	maskLast atomic.Pointer[maskState]
}
