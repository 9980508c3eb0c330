package observe

import (
	"fmt"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/action"
)

// MaxInterventionActions bounds the actions an Intervention lists; the
// rest are counted in More.
const MaxInterventionActions = 50

// Intervention says that a person took control of the app (at the live
// page) after the controller's previous observation and handed it back:
// what they did, and how the screen differs from the one the controller
// saw last. It comes with the controller's next observation.
type Intervention struct {
	// By names who took control ("a person at the live page", a viewer's
	// name).
	By string `json:"by,omitempty"`
	// Actions are the person's actions in order (at most
	// MaxInterventionActions); More counts those not listed.
	Actions []action.Action `json:"actions"`
	More    int             `json:"more,omitempty"`
	// FirstStep and LastStep are the trace's steps the person took (0
	// when they took none).
	FirstStep int `json:"first_step,omitempty"`
	LastStep  int `json:"last_step,omitempty"`
	// DurationMS is how long the person had control.
	DurationMS int64 `json:"duration_ms"`
	// ScreenChanged says whether the screen differs from the one the
	// controller saw last; Changed is the smallest rectangle holding every
	// pixel that differs (nil when none does, or when there was no earlier
	// screen to compare with).
	ScreenChanged bool         `json:"screen_changed"`
	Changed       *action.Rect `json:"changed,omitempty"`
}

// Steps counts the person's actions.
func (iv *Intervention) Steps() int { return len(iv.Actions) + iv.More }

// String says it in one paragraph, for a model's prompt or a log line.
func (iv *Intervention) String() string {
	var b strings.Builder
	who := iv.By
	if who == "" {
		who = "a person"
	}
	d := (time.Duration(iv.DurationMS) * time.Millisecond).Round(100 * time.Millisecond)
	switch n := iv.Steps(); n {
	case 0:
		fmt.Fprintf(&b, "%s took control for %v and handed it back without acting.", who, d)
	default:
		acts := make([]string, len(iv.Actions))
		for i, a := range iv.Actions {
			acts[i] = a.String()
		}
		more := ""
		if iv.More > 0 {
			more = fmt.Sprintf(", and %d more", iv.More)
		}
		plural := "s"
		if n == 1 {
			plural = ""
		}
		fmt.Fprintf(&b, "%s took control for %v and performed %d action%s: %s%s.", who, d, n, plural, strings.Join(acts, "; "), more)
	}
	switch {
	case iv.Changed != nil:
		r := iv.Changed
		fmt.Fprintf(&b, " The screen changed within (%d,%d)-(%d,%d) since you last saw it.", r[0], r[1], r[2], r[3])
	case iv.ScreenChanged:
		b.WriteString(" The screen changed since you last saw it.")
	default:
		b.WriteString(" The screen is as you last saw it.")
	}
	return b.String()
}

// ChangedRect is the smallest rectangle holding every pixel that differs
// between two frames of the same size; ok is false when they differ in
// size (every pixel counts as changed then, and r is the whole of b).
func ChangedRect(a, b *Frame) (r action.Rect, changed, ok bool) {
	if a == nil || b == nil {
		return action.Rect{}, a != b, false
	}
	if a.Width != b.Width || a.Height != b.Height || len(a.Pix) != len(b.Pix) {
		return action.Rect{0, 0, b.Width, b.Height}, true, false
	}
	if a.Hash != 0 && a.Hash == b.Hash {
		return action.Rect{}, false, true
	}
	w := a.Width
	x0, y0, x1, y1 := w, a.Height, -1, -1
	for y := 0; y < a.Height; y++ {
		ra, rb := a.Pix[4*y*w:4*(y+1)*w], b.Pix[4*y*w:4*(y+1)*w]
		if string(ra) == string(rb) {
			continue
		}
		if y < y0 {
			y0 = y
		}
		y1 = y
		for x := 0; x < w; x++ {
			if string(ra[4*x:4*x+4]) != string(rb[4*x:4*x+4]) {
				x0 = min(x0, x)
				break
			}
		}
		for x := w - 1; x >= 0; x-- {
			if string(ra[4*x:4*x+4]) != string(rb[4*x:4*x+4]) {
				x1 = max(x1, x)
				break
			}
		}
	}
	if y1 < 0 {
		return action.Rect{}, false, true
	}
	return action.Rect{x0, y0, x1 + 1, y1 + 1}, true, true
}
