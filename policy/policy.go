// Package policy is the gate between a controller's chosen action and the
// sandbox: a policy file of ordered rules, each matching an action's kind,
// the element it acts on (an accessibility selector, the element under
// the pointer or the focused one), a screen region or the text it types,
// with a decision — allow, ask or deny — and a default. A rule marked
// sensitive is asked every time: no flag or standing grant answers it.
//
// The package decides; the session core (package session) applies the
// decision before the action runs, for every actor, and asks an Approver
// when the decision is ask.
//
//	default: allow
//	rules:
//	  - name: deleting asks
//	    kind: [click, press]
//	    target: {role: push button, name: "/^Delete/"}
//	    decision: ask
//	    sensitive: true
//	  - name: no passwords typed
//	    kind: type
//	    text: "/hunter2/"
//	    decision: deny
//	mask:
//	  - name: account balance
//	    target: {role: label, name: "/^Balance/"}
//	  - name: the ad banner
//	    region: [0, 440, 640, 480]
//
// Mask rules paint what they match on every frame that leaves the
// session core (package mask), beside the fields masked without a rule.
// Without an accessibility tree (no --a11y, or a backend without one) a
// target can match nothing: only kind, region and text rules apply.
package policy

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/suggest"
	"github.com/codegirl-games/agentbox/internal/yamlwalk"
	"github.com/codegirl-games/agentbox/mask"
	"github.com/codegirl-games/agentbox/observe"
)

// ErrInvalid is the class of every error about a policy file.
var ErrInvalid = errors.New("invalid policy")

// Decision is what a rule decides.
type Decision string

// The decisions.
const (
	Allow Decision = "allow"
	Ask   Decision = "ask"
	Deny  Decision = "deny"
)

var decisions = []string{string(Allow), string(Ask), string(Deny)}

// Press is the kind a rule names to match every way of pressing an
// element: a click, a mouse button pressed or released, a drag's ends,
// and the keyboard's activation (Return, KP_Enter or space pressed, or
// typed as "\n" or " ", while the element has the focus). A rule of kind
// click matches the same presses: a button activated from the keyboard
// is clicked by another way.
const Press = "press"

// DefaultMaxAsks bounds the asks of one episode when the policy does not
// say (max_asks): past it, every ask is denied without asking, so that a
// controller cannot flood the person who answers.
const DefaultMaxAsks = 20

// MaxRules bounds a policy's rules.
const MaxRules = 1000

// Rule is one rule of a policy. Every condition it gives must hold for it
// to match; a rule without conditions matches every action.
type Rule struct {
	// Name names the rule in results, the trace and prompts (default
	// "rule N", N from 1).
	Name string `json:"name"`
	// Line is the rule's line in the file.
	Line int `json:"line,omitempty"`
	// Kinds are the action kinds it matches (and Press); empty: every kind.
	Kinds []string `json:"kind,omitempty"`
	// Target matches the element the action acts on, or an ancestor of it.
	Target *action.Selector `json:"target,omitempty"`
	// Region matches an action acting at a point inside it (screen pixels
	// [x0, y0, x1, y1)).
	Region *action.Rect `json:"region,omitempty"`
	// Text matches a type action's text: exact, a glob with * and ?, or
	// /regex/ (a regex matches anywhere in the text unless anchored).
	Text      string   `json:"text,omitempty"`
	Decision  Decision `json:"decision"`
	Sensitive bool     `json:"sensitive,omitempty"`

	target *observe.Matcher
	text   func(string) bool
}

// Policy is a parsed policy file.
type Policy struct {
	// File names the file it was read from, for messages.
	File    string   `json:"file,omitempty"`
	Default Decision `json:"default"`
	Rules   []Rule   `json:"rules"`
	// MaxAsks bounds the asks of an episode (DefaultMaxAsks).
	MaxAsks int `json:"max_asks"`
	// Mask are the rules of what the screens show painted over.
	Mask []mask.Rule `json:"mask,omitempty"`
}

// Load reads and parses the policy file at path.
func Load(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return Parse(path, data)
}

var (
	topFields  = []string{"default", "rules", "max_asks", "mask"}
	maskFields = []string{"name", "target", "region"}
	ruleFields = []string{"name", "kind", "target", "region", "text", "decision", "sensitive"}
	selFields  = []string{"id", "role", "name", "index", "ancestor"}
)

// kindNames are the names a rule's kind may take.
func kindNames() []string {
	out := []string{Press}
	for _, k := range action.Kinds {
		out = append(out, string(k))
	}
	return out
}

// Parse parses a policy (YAML, or JSON, which YAML reads too) strictly:
// unknown fields (with a "did you mean"), fields given twice, an unknown
// kind, role or decision, a pattern that does not compile are errors
// naming file:line.
func Parse(file string, data []byte) (*Policy, error) {
	w := yamlwalk.Walker{File: file, Class: ErrInvalid}
	root, err := w.Root(data, "a policy is a mapping with default and rules")
	if err != nil {
		return nil, err
	}
	p := &Policy{File: file, Default: Allow, MaxAsks: DefaultMaxAsks}
	err = w.Mapping(root, "a policy", topFields, func(k, v *yaml.Node) error {
		switch k.Value {
		case "default":
			d, err := decision(w, k, v)
			p.Default = d
			return err
		case "max_asks":
			var n int
			if v.Kind != yaml.ScalarNode || v.Decode(&n) != nil || n < 0 || n > 10000 {
				return w.Field(k, v, "must be a whole number from 0 to 10000")
			}
			p.MaxAsks = n
			return nil
		case "rules":
			var err error
			p.Rules, err = parseList(w, k, v, "rules", "rule", parseRule)
			return err
		case "mask":
			var err error
			p.Mask, err = parseList(w, k, v, "mask rules (each a target or a region)", "mask rule", parseMask)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	names := make([]named, 0, len(p.Rules)+len(p.Mask))
	for _, r := range p.Rules {
		names = append(names, named{r.Name, r.Line, "rule name %q is used twice (first at line %d): results name rules, so names must differ"})
	}
	if err := uniqueNames(w, names); err != nil {
		return nil, err
	}
	names = names[:0]
	for _, r := range p.Mask {
		names = append(names, named{r.Name, r.Line, "mask rule name %q is used twice (first at line %d)"})
	}
	if err := uniqueNames(w, names); err != nil {
		return nil, err
	}
	return p, nil
}

// parseList reads a list field (rules, mask) of at most MaxRules items,
// each by parse, in a walker naming the item ("rule 3").
func parseList[T any](w yamlwalk.Walker, k, v *yaml.Node, what, item string, parse func(yamlwalk.Walker, *yaml.Node, int) (T, error)) ([]T, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, w.Field(k, v, "must be a list of %s", what)
	}
	if len(v.Content) > MaxRules {
		return nil, w.Field(k, v, "has %d rules; at most %d", len(v.Content), MaxRules)
	}
	out := make([]T, 0, len(v.Content))
	for i, n := range v.Content {
		r, err := parse(w.In(fmt.Sprintf("%s %d", item, i+1)), n, i+1)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// named is a rule's name and line, with the message of a second use.
type named struct {
	name string
	line int
	msg  string
}

// uniqueNames refuses a name used twice, at its second line.
func uniqueNames(w yamlwalk.Walker, names []named) error {
	seen := map[string]int{}
	for _, n := range names {
		if l, ok := seen[n.name]; ok {
			return w.Errorf(n.line, n.msg, n.name, l)
		}
		seen[n.name] = n.line
	}
	return nil
}

func decision(w yamlwalk.Walker, k, v *yaml.Node) (Decision, error) {
	s, err := w.Text(k, v)
	if err != nil {
		return "", err
	}
	if !slices.Contains(decisions, s) {
		return "", w.Field(k, v, "%q is not a decision%s (allow, ask or deny)", s, suggest.Hint(s, decisions))
	}
	return Decision(s), nil
}

// parseMask reads a mask rule: a name, and a target or a region.
func parseMask(w yamlwalk.Walker, n *yaml.Node, num int) (mask.Rule, error) {
	name := fmt.Sprintf("mask %d", num)
	if n.Kind != yaml.MappingNode {
		return mask.Rule{}, w.Errorf(n.Line, "a mask rule is a mapping with a target or a region")
	}
	var target *action.Selector
	var region *action.Rect
	err := w.Mapping(n, "a mask rule", maskFields, func(k, v *yaml.Node) error {
		switch k.Value {
		case "name":
			s, err := w.Text(k, v)
			if err != nil {
				return err
			}
			if s = strings.TrimSpace(s); s == "" || len(s) > 200 {
				return w.Field(k, v, "must be 1 to 200 characters")
			}
			name = s
		case "target":
			sel, err := selector(w, k, v, 0)
			if err != nil {
				return err
			}
			target = sel
		case "region":
			r, err := parseRegion(w, k, v)
			if err != nil {
				return err
			}
			region = r
		}
		return nil
	})
	if err != nil {
		return mask.Rule{}, err
	}
	r, err := mask.NewRule(name, target, region)
	if err != nil {
		return r, w.Errorf(n.Line, "%v", err)
	}
	r.Line = n.Line
	return r, nil
}

// parseRegion reads [x0, y0, x1, y1] in screen pixels.
func parseRegion(w yamlwalk.Walker, k, v *yaml.Node) (*action.Rect, error) {
	var rect []int
	if v.Kind != yaml.SequenceNode || v.Decode(&rect) != nil || len(rect) != 4 {
		return nil, w.Field(k, v, "must be [x0, y0, x1, y1] in screen pixels")
	}
	if rect[0] < 0 || rect[1] < 0 || rect[2] <= rect[0] || rect[3] <= rect[1] {
		return nil, w.Field(k, v, "%v is empty or negative: [x0, y0, x1, y1] with x1 > x0 ≥ 0 and y1 > y0 ≥ 0", rect)
	}
	return &action.Rect{rect[0], rect[1], rect[2], rect[3]}, nil
}

func parseRule(w yamlwalk.Walker, n *yaml.Node, num int) (Rule, error) {
	r := Rule{Name: fmt.Sprintf("rule %d", num), Line: n.Line}
	if n.Kind != yaml.MappingNode {
		return r, w.Errorf(n.Line, "a rule is a mapping with a decision")
	}
	var hasDecision bool
	err := w.Mapping(n, "a rule", ruleFields, func(k, v *yaml.Node) error {
		switch k.Value {
		case "name":
			s, err := w.Text(k, v)
			if err != nil {
				return err
			}
			if s = strings.TrimSpace(s); s == "" || len(s) > 200 {
				return w.Field(k, v, "must be 1 to 200 characters")
			}
			r.Name = s
		case "kind":
			kinds, err := textList(w, k, v)
			if err != nil {
				return err
			}
			known := kindNames()
			for i, kd := range kinds {
				if !slices.Contains(known, kd) {
					return w.Errorf(yamlwalk.ItemLine(v, i), "field %q: unknown action kind %q%s (kinds: %s)", k.Value, kd, suggest.Hint(kd, known), strings.Join(known, ", "))
				}
			}
			r.Kinds = kinds
		case "target":
			sel, err := selector(w, k, v, 0)
			if err != nil {
				return err
			}
			m, err := observe.CompileSelector(*sel)
			if err != nil {
				return w.Field(k, v, "%v", err)
			}
			r.Target, r.target = sel, m
		case "region":
			rect, err := parseRegion(w, k, v)
			r.Region = rect
			return err
		case "text":
			s, err := w.Text(k, v)
			if err != nil {
				return err
			}
			m, err := textMatcher(s)
			if err != nil {
				return w.Field(k, v, "%v", err)
			}
			r.Text, r.text = s, m
		case "decision":
			d, err := decision(w, k, v)
			if err != nil {
				return err
			}
			r.Decision, hasDecision = d, true
		case "sensitive":
			if v.Kind != yaml.ScalarNode || v.Decode(&r.Sensitive) != nil {
				return w.Field(k, v, "must be true or false")
			}
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	switch {
	case !hasDecision && r.Sensitive:
		r.Decision = Ask
	case !hasDecision:
		return r, w.Errorf(n.Line, "a rule needs a decision (allow, ask or deny)")
	case r.Sensitive && r.Decision != Ask:
		return r, w.Errorf(n.Line, "sensitive: true means asked every time; its decision must be ask, not %s", r.Decision)
	}
	if r.Text != "" && len(r.Kinds) > 0 && !slices.Contains(r.Kinds, string(action.Type)) {
		return r, w.Errorf(n.Line, "text matches what a type action types, but kind %v has no type", r.Kinds)
	}
	return r, nil
}

// textList reads a string or a list of strings.
func textList(w yamlwalk.Walker, k, v *yaml.Node) ([]string, error) {
	if v.Kind == yaml.ScalarNode {
		s, err := w.Text(k, v)
		return []string{s}, err
	}
	var out []string
	if v.Kind != yaml.SequenceNode || v.Decode(&out) != nil || len(out) == 0 {
		return nil, w.Field(k, v, "must be a kind or a list of kinds")
	}
	return out, nil
}

// selector reads a target strictly, as an action's target is read, and
// refuses a role AT-SPI does not have.
func selector(w yamlwalk.Walker, k, v *yaml.Node, depth int) (*action.Selector, error) {
	if v.Kind != yaml.MappingNode {
		return nil, w.Field(k, v, "must be a selector: a mapping of %s", strings.Join(selFields, ", "))
	}
	if depth > 8 {
		return nil, w.Field(k, v, "ancestors nest deeper than 8")
	}
	var s action.Selector
	err := w.Mapping(v, "a selector", selFields, func(fk, fv *yaml.Node) error {
		switch fk.Value {
		case "ancestor":
			a, err := selector(w, fk, fv, depth+1)
			s.Ancestor = a
			return err
		case "index":
			var n int
			if fv.Kind != yaml.ScalarNode || fv.Decode(&n) != nil {
				return w.Field(fk, fv, "must be a whole number")
			}
			s.Index = &n
			return nil
		}
		t, err := w.Text(fk, fv)
		if err != nil {
			return err
		}
		switch fk.Value {
		case "id":
			s.ID = t
		case "name":
			s.Name = t
		case "role":
			if !observe.KnownRole(t) {
				return w.Field(fk, fv, "unknown role %q%s (AT-SPI's roles, such as push button, text, check box, menu item)", t, roleHint(t))
			}
			s.Role = t
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if s.Index != nil {
		return nil, w.Field(k, v, "index has no meaning in a policy: a rule matches every element its selector matches")
	}
	if err := s.Check(); err != nil {
		return nil, w.Field(k, v, "%v", err)
	}
	return &s, nil
}

// textMatcher matches typed text: /regex/ anywhere in the text (unless
// anchored), else as window titles match (exact, glob).
func textMatcher(s string) (func(string) bool, error) {
	if s == "" {
		return nil, fmt.Errorf("must not be empty")
	}
	return action.TitleMatcher(s)
}

// NeedsTree reports whether a rule names a target: only then is the
// accessibility tree read at an action.
func (p *Policy) NeedsTree() bool {
	for i := range p.Rules {
		if p.Rules[i].Target != nil {
			return true
		}
	}
	return false
}

// Describe renders the policy for a run's header: "policy FILE: N rules,
// default D" (and its mask rules).
func (p *Policy) Describe() string {
	s := fmt.Sprintf("policy %s: %d rules, default %s", p.File, len(p.Rules), p.Default)
	if len(p.Mask) > 0 {
		s += fmt.Sprintf(", %d mask rules", len(p.Mask))
	}
	return s
}

// roleHint is the "did you mean" of an unknown role: the closest role, or
// else the roles with a word close to the last word given ("buton": push
// button, radio button, …).
func roleHint(r string) string {
	n := observe.NormRole(r)
	if h := suggest.Hint(n, observe.Roles); h != "" {
		return h
	}
	words := strings.Fields(n)
	if len(words) == 0 {
		return ""
	}
	var vocab []string
	for _, role := range observe.Roles {
		for _, w := range strings.Fields(role) {
			if !slices.Contains(vocab, w) {
				vocab = append(vocab, w)
			}
		}
	}
	best := suggest.Best(words[len(words)-1], vocab)
	if best == "" {
		return ""
	}
	var out []string
	for _, role := range observe.Roles {
		if slices.Contains(strings.Fields(role), best) {
			out = append(out, role)
		}
	}
	if len(out) > 4 {
		out = append(out[:4], "…")
	}
	return " (did you mean " + strings.Join(out, ", ") + "?)"
}
