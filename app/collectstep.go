package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/codegirl-games/agentbox/action"
)

// before_collect's step kinds besides an action.
const (
	// StepWaitFor waits until a condition holds (the guest's wait until):
	// a window whose title matches, a still screen, a changed screen. One
	// that does not come within its timeout fails the episode.
	StepWaitFor = "wait_for"
	// StepExpect checks the desktop as it is: a window whose title
	// matches, the app running, the app exited. One that does not hold
	// fails the episode.
	StepExpect = "expect"
)

// What an expect step checks.
const (
	ExpectWindow  = "window"
	ExpectRunning = "running"
	ExpectExited  = "exited"
)

// DefaultCollectWaitMS is a before_collect wait_for's timeout when
// timeout_ms is not given (a script's wait_for has the same).
const DefaultCollectWaitMS = 10_000

// CollectStep is one before_collect step: an action (one that fails is
// recorded and the next step runs, as before an episode's end nothing
// else can be done about it), a wait_for or an expect (a check: one that
// does not hold is recorded, ends the steps, and fails the episode, its
// message naming the step).
type CollectStep struct {
	// Action is the step's action; a wait_for's is its wait until (Until,
	// Title, MS its timeout, StableMS).
	Action action.Action
	// Check is "" for an action, StepWaitFor or StepExpect.
	Check string
	// Expect is what an expect step checks (ExpectWindow: Title matches
	// a window's title; ExpectRunning; ExpectExited: with Code, that exit
	// code).
	Expect string
	Title  string
	Code   *int
}

// String renders the step for messages: "key ctrl+s", "wait_for window
// \"*saved*\"", "expect running".
func (c CollectStep) String() string {
	switch c.Check {
	case StepWaitFor:
		s := "wait_for " + waitForName(c.Action.Until)
		if c.Action.Title != "" {
			s += fmt.Sprintf(" %q", c.Action.Title)
		}
		return s
	case StepExpect:
		s := "expect " + c.Expect
		if c.Title != "" {
			s += fmt.Sprintf(" %q", c.Title)
		}
		if c.Code != nil {
			s += fmt.Sprintf(" (code %d)", *c.Code)
		}
		return s
	}
	return c.Action.String()
}

// waitFor are wait_for's conditions by name: a script's names
// (changed) and the wait action's (change).
var waitFor = map[string]action.Until{
	"window":  action.UntilWindow,
	"stable":  action.UntilStable,
	"changed": action.UntilChange,
	"change":  action.UntilChange,
}

func waitForName(u action.Until) string {
	if u == action.UntilChange {
		return "changed"
	}
	return string(u)
}

// collectStepFields are the fields each step kind takes besides its own.
var collectStepFields = map[string][]string{
	StepWaitFor + " window":          {"title", "timeout_ms"},
	StepWaitFor + " stable":          {"stable_ms", "timeout_ms"},
	StepWaitFor + " changed":         {"timeout_ms"},
	StepExpect + " " + ExpectWindow:  {"title"},
	StepExpect + " " + ExpectRunning: nil,
	StepExpect + " " + ExpectExited:  {"code"},
}

// parseCollectStep reads one before_collect step.
func parseCollectStep(m map[string]json.RawMessage) (CollectStep, error) {
	var verbs []string
	for _, v := range []string{"action", StepWaitFor, StepExpect} {
		if _, ok := m[v]; ok {
			verbs = append(verbs, v)
		}
	}
	if len(verbs) != 1 {
		return CollectStep{}, errors.New("want exactly one of action, wait_for or expect in a step, such as {action: key, keys: ctrl+s}, {wait_for: window, title: \"*saved*\", timeout_ms: 60000} or {expect: running}")
	}
	if verbs[0] == "action" {
		a, err := action.FromMap(m)
		if err == nil {
			err = action.Validate(a, action.DefaultLimits(1<<15, 1<<15))
		}
		return CollectStep{Action: a}, err
	}
	verb := verbs[0]
	var kind string
	if err := json.Unmarshal(m[verb], &kind); err != nil {
		return CollectStep{}, fmt.Errorf("%s: want a string, got %s", verb, m[verb])
	}
	if verb == StepWaitFor {
		if u, ok := waitFor[kind]; ok {
			kind = waitForName(u)
		}
	}
	allowed, ok := collectStepFields[verb+" "+kind]
	if !ok {
		var known []string
		for k := range collectStepFields {
			if v, name, _ := strings.Cut(k, " "); v == verb {
				known = append(known, name)
			}
		}
		sort.Strings(known)
		return CollectStep{}, fmt.Errorf("%s: unknown %q; known here: %s", verb, kind, strings.Join(known, ", "))
	}
	st := CollectStep{Check: verb}
	var title string
	var timeoutMS, stableMS int
	for name, raw := range m {
		if name == verb {
			continue
		}
		if !slices.Contains(allowed, name) {
			if len(allowed) == 0 {
				return st, fmt.Errorf("%s %s: unknown field %q; it takes none", verb, kind, name)
			}
			return st, fmt.Errorf("%s %s: unknown field %q; it takes %s", verb, kind, name, strings.Join(allowed, ", "))
		}
		var err error
		switch name {
		case "title":
			err = json.Unmarshal(raw, &title)
			if err == nil {
				_, err = action.TitleMatcher(title)
			}
		case "timeout_ms":
			err = json.Unmarshal(raw, &timeoutMS)
			if err == nil && timeoutMS <= 0 {
				err = errors.New("want a positive number of milliseconds")
			}
		case "stable_ms":
			err = json.Unmarshal(raw, &stableMS)
		case "code":
			var c int
			err = json.Unmarshal(raw, &c)
			st.Code = &c
		}
		if err != nil {
			return st, fmt.Errorf("%s %s: %s: %v", verb, kind, name, err)
		}
	}
	if kind == ExpectWindow && title == "" {
		return st, fmt.Errorf("%s window: title is required (a window title, a glob or /regex/)", verb)
	}
	if verb == StepExpect {
		st.Expect, st.Title = kind, title
		return st, nil
	}
	lim := action.DefaultLimits(1<<15, 1<<15)
	if timeoutMS == 0 {
		timeoutMS = DefaultCollectWaitMS
	}
	if timeoutMS > lim.MaxWaitMS {
		return st, fmt.Errorf("%s %s: timeout_ms: want at most %d, got %d", verb, kind, lim.MaxWaitMS, timeoutMS)
	}
	st.Action = action.Action{Kind: action.Wait, Until: waitFor[kind], Title: title, MS: timeoutMS, StableMS: stableMS}
	if err := action.Validate(st.Action, lim); err != nil {
		return st, fmt.Errorf("%s %s: %v", verb, kind, err)
	}
	return st, nil
}
