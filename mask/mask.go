// Package mask decides which rectangles of a screenshot are painted over
// before the frame leaves the session core — to an agent, the trace, the
// live page, the API or a video — and paints them:
//
//   - elements whose role is a password field ("password text");
//   - elements whose name or text holds a vault value, or a card number
//     (13 to 19 digits, spaces or dashes between groups, passing Luhn's
//     check), and entry fields named as one-time codes ("one-time code",
//     "OTP", "verification code", "2FA", "security code");
//   - the policy's mask rules: an accessibility selector (every element
//     it matches) or a screen region.
//
// Elements are found in the accessibility tree, so every rule but a
// region needs --a11y; regions apply without it. The package is pure:
// the session core reads the tree and calls Rects and Paint.
package mask

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
)

// Rule is one of a policy's mask rules: a selector or a region (one of
// the two).
type Rule struct {
	Name   string           `json:"name"`
	Line   int              `json:"line,omitempty"`
	Target *action.Selector `json:"target,omitempty"`
	Region *action.Rect     `json:"region,omitempty"`

	target *observe.Matcher
}

// NewRule checks and compiles a rule.
func NewRule(name string, target *action.Selector, region *action.Rect) (Rule, error) {
	r := Rule{Name: name, Target: target, Region: region}
	switch {
	case (target == nil) == (region == nil):
		return r, fmt.Errorf("a mask rule names a target or a region (one of the two)")
	case target != nil:
		m, err := observe.CompileSelector(*target)
		if err != nil {
			return r, err
		}
		r.target = m
	case region[2] <= region[0] || region[3] <= region[1] || region[0] < 0 || region[1] < 0:
		return r, fmt.Errorf("region %v is empty or negative", *region)
	}
	return r, nil
}

// Masker holds what to mask for one episode. The zero Masker (and a nil
// one) masks nothing.
type Masker struct {
	rules  []Rule
	values []string
	auto   bool
}

// New makes a masker of the policy's rules and the vault's values; auto
// adds the password, card number and one-time code fields. Values shorter
// than 4 bytes are not searched for on screen (they would match
// everywhere; the vault's redaction of text still replaces them).
func New(rules []Rule, values []string, auto bool) *Masker {
	m := &Masker{rules: rules, auto: auto}
	for _, v := range values {
		if len(v) >= 4 {
			m.values = append(m.values, v)
		}
	}
	return m
}

// Active reports whether the masker can mask anything.
func (m *Masker) Active() bool {
	return m != nil && (m.auto || len(m.rules) > 0 || len(m.values) > 0)
}

// NeedsTree reports whether a rule needs the accessibility tree (all but
// regions).
func (m *Masker) NeedsTree() bool {
	if m == nil {
		return false
	}
	if m.auto || len(m.values) > 0 {
		return true
	}
	for _, r := range m.rules {
		if r.target != nil {
			return true
		}
	}
	return false
}

// Why says why a rectangle is masked (for the trace: the reason, never
// the text).
type Why string

// The reasons.
const (
	WhyPassword Why = "password field"
	WhySecret   Why = "vault value"
	WhyCard     Why = "card number"
	WhyCode     Why = "one-time code field"
	WhyRule     Why = "rule"
)

// Area is one rectangle to paint, clipped to the screen.
type Area struct {
	Rect action.Rect `json:"rect"`
	Why  Why         `json:"why"`
	Rule string      `json:"rule,omitempty"`
}

// Rects returns the areas of a w×h screen to paint, given its tree (nil
// when none was read: then only regions apply).
func (m *Masker) Rects(t *observe.Tree, w, h int) []Area {
	if !m.Active() {
		return nil
	}
	var out []Area
	add := func(r action.Rect, why Why, rule string) {
		r = clip(r, w, h)
		if r.Dx() > 0 && r.Dy() > 0 {
			out = append(out, Area{Rect: r, Why: why, Rule: rule})
		}
	}
	for _, r := range m.rules {
		if r.Region != nil {
			add(*r.Region, WhyRule, r.Name)
		}
	}
	if t == nil {
		return out
	}
	for i := range t.Elements {
		e := &t.Elements[i]
		if e.Bounds == nil || e.Role == "application" {
			continue
		}
		if why, ok := m.sensitive(e); ok {
			add(*e.Bounds, why, "")
			continue
		}
		for _, r := range m.rules {
			if r.target != nil && r.target.Match(t, i) {
				add(*e.Bounds, WhyRule, r.Name)
				break
			}
		}
	}
	return out
}

// sensitive reports whether an element is masked by itself (the automatic
// reasons and the vault's values).
func (m *Masker) sensitive(e *observe.Element) (Why, bool) {
	for _, v := range m.values {
		if strings.Contains(e.Name, v) || strings.Contains(e.Text, v) {
			return WhySecret, true
		}
	}
	if !m.auto {
		return "", false
	}
	switch {
	case e.Role == "password text":
		return WhyPassword, true
	case HasCardNumber(e.Text) || HasCardNumber(e.Name):
		return WhyCard, true
	case entryRoles[e.Role] && codeName.MatchString(e.Name):
		return WhyCode, true
	}
	return "", false
}

var entryRoles = map[string]bool{"text": true, "entry": true, "spin button": true, "password text": true}

// codeName matches the names of one-time code fields.
var codeName = regexp.MustCompile(`(?i)\b(one[- ]?time|otp|verification code|2fa|two[- ]factor|security code|auth(entication)? code|cvc|cvv)\b`)

// cardRun matches 13 to 19 digits with single spaces or dashes between
// groups.
var cardRun = regexp.MustCompile(`\d(?:[ -]?\d){12,18}`)

// HasCardNumber reports whether s holds a card number: a run of 13 to 19
// digits (spaces or dashes between groups allowed) passing Luhn's check.
func HasCardNumber(s string) bool {
	if len(s) < 13 {
		return false
	}
	for _, run := range cardRun.FindAllString(s, -1) {
		digits := strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return r
			}
			return -1
		}, run)
		if luhn(digits) {
			return true
		}
	}
	return false
}

// luhn reports whether the digits pass Luhn's check.
func luhn(d string) bool {
	sum := 0
	double := false
	for i := len(d) - 1; i >= 0; i-- {
		n := int(d[i] - '0')
		if double {
			n *= 2
			if n > 9 {
				n -= 9
			}
		}
		sum += n
		double = !double
	}
	return sum%10 == 0
}

func clip(r action.Rect, w, h int) action.Rect {
	r[0], r[1] = max(r[0], 0), max(r[1], 0)
	r[2], r[3] = min(r[2], w), min(r[3], h)
	return r
}

// Colour is what a masked area is painted with: opaque dark grey.
var Colour = [4]byte{0x30, 0x30, 0x30, 0xff}

// Paint returns f with the areas painted: a copy (f is left as it is:
// the environment may keep it), its hash that of the painted pixels. With
// no areas it returns f.
func Paint(f *observe.Frame, areas []Area) *observe.Frame {
	if f == nil || len(areas) == 0 {
		return f
	}
	pix := make([]byte, len(f.Pix))
	copy(pix, f.Pix)
	stride := 4 * f.Width
	for _, a := range areas {
		r := clip(a.Rect, f.Width, f.Height)
		if r.Dx() <= 0 || r.Dy() <= 0 {
			continue
		}
		row := pix[r[1]*stride+4*r[0] : r[1]*stride+4*r[2]]
		for i := 0; i < len(row); i += 4 {
			copy(row[i:i+4], Colour[:])
		}
		for y := r[1] + 1; y < r[3]; y++ {
			copy(pix[y*stride+4*r[0]:y*stride+4*r[2]], row)
		}
	}
	return &observe.Frame{Width: f.Width, Height: f.Height, Pix: pix, Hash: xxhash.Sum64(pix) ^ maskedSalt}
}

// maskedSalt keeps a painted frame's hash apart from any unpainted
// frame's (the guest hashes packed pixels; this hashes RGBA).
const maskedSalt = 0x6d61736b65640000 // "masked"
