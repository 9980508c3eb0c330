package action

import (
	"fmt"
	"regexp"
	"strings"
)

// Selector picks one element of the live tree: by its ID, or by role and
// name (exact, a glob with * and ?, or /regex/: the rules of window-title
// patterns, TitleMatcher), optionally below an ancestor that matches a
// selector of its own. Several matches are an error unless Index picks one
// (0 is the first in reading order).
type Selector struct {
	ID       string    `json:"id,omitempty"`
	Role     string    `json:"role,omitempty"`
	Name     string    `json:"name,omitempty"`
	Index    *int      `json:"index,omitempty"`
	Ancestor *Selector `json:"ancestor,omitempty"`
}

// String renders the selector for messages: `{role: "push button", name: "OK"}`.
func (s Selector) String() string {
	var parts []string
	if s.ID != "" {
		parts = append(parts, fmt.Sprintf("id: %q", s.ID))
	}
	if s.Role != "" {
		parts = append(parts, fmt.Sprintf("role: %q", s.Role))
	}
	if s.Name != "" {
		parts = append(parts, fmt.Sprintf("name: %q", s.Name))
	}
	if s.Index != nil {
		parts = append(parts, fmt.Sprintf("index: %d", *s.Index))
	}
	if s.Ancestor != nil {
		parts = append(parts, "ancestor: "+s.Ancestor.String())
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// maxSelectorDepth bounds nested ancestors.
const maxSelectorDepth = 8

// Check reports what is wrong with a selector: it names nothing, a
// pattern does not compile, an index is negative, ancestors nest too deep.
func (s Selector) Check() error { return s.check(0) }

func (s Selector) check(depth int) error {
	if depth > maxSelectorDepth {
		return fmt.Errorf("ancestors nest deeper than %d", maxSelectorDepth)
	}
	if s.ID == "" && s.Role == "" && s.Name == "" {
		return fmt.Errorf("a selector needs id, role or name")
	}
	if s.ID != "" && !validID(s.ID) {
		return fmt.Errorf("id %q is not an element id (such as 1.7/12)", s.ID)
	}
	if _, err := TitleMatcher(s.Name); err != nil {
		return fmt.Errorf("name: %w", err)
	}
	if s.Index != nil && *s.Index < 0 {
		return fmt.Errorf("index must be 0 or more, got %d", *s.Index)
	}
	if s.Ancestor != nil {
		if err := s.Ancestor.check(depth + 1); err != nil {
			return fmt.Errorf("ancestor: %w", err)
		}
	}
	return nil
}

// idPattern is the form of element IDs: "1.7/12" for AT-SPI's usual
// object paths (/org/a11y/atspi/accessible/12 of the connection :1.7),
// "1.7:/some/other/path" for any other.
var idPattern = regexp.MustCompile(`^[0-9]+\.[0-9]+(/[A-Za-z0-9_]+|:(/[A-Za-z0-9_]+)+)$`)

func validID(id string) bool { return len(id) <= 256 && idPattern.MatchString(id) }

// Resolved is the element an action's target or mark named, as found at
// the moment of the action, and the point the action used.
type Resolved struct {
	ID     string `json:"id"`
	Role   string `json:"role"`
	Name   string `json:"name,omitempty"`
	Bounds *Rect  `json:"bounds,omitempty"`
	Point  *Point `json:"point,omitempty"`
	// Focused says, for type, whether the element had the keyboard focus
	// before the text was typed, and how it got it ("grab_focus", "click").
	Focus string `json:"focus,omitempty"`
}
