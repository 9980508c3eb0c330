package observe

import (
	"fmt"
	"strings"
)

// ActivityFound is what a search of the trusted observer's activity found
// (FindWritten, FindProcess): the scripts' checks and the grader's share it.
type ActivityFound struct {
	// Event is the first matching event; nil: none matched.
	Event *ActivityEvent
	// N counts the events of the kind searched, Last is the last of them.
	N    int
	Last *ActivityEvent
	// Unknown is a process whose command line matched but whose exit
	// status the observer did not see (FindProcess with an exit code).
	Unknown *ActivityEvent
}

// FindWritten looks for a file (not a directory) written below the home
// whose path relative to the home (without "~/") match accepts.
func FindWritten(act []ActivityEvent, match func(rel string) bool) ActivityFound {
	var f ActivityFound
	for i, e := range act {
		if e.Kind != ActFile || e.Dir || !e.Has(OpWritten) {
			continue
		}
		f.N++
		f.Last = &act[i]
		if rel, ok := strings.CutPrefix(e.Path, "~/"); ok && match(rel) {
			f.Event = &act[i]
			return f
		}
	}
	return f
}

// FindProcess looks for a process whose command line (its argv joined by
// spaces) match accepts: one seen running, or with exit one seen ending
// with that code.
func FindProcess(act []ActivityEvent, match func(argv string) bool, exit *int) ActivityFound {
	kind := ActExec
	if exit != nil {
		kind = ActExit
	}
	var f ActivityFound
	for i, e := range act {
		if e.Kind != kind {
			continue
		}
		f.N++
		f.Last = &act[i]
		if !match(strings.Join(e.Argv, " ")) {
			continue
		}
		if exit == nil || e.Exit != nil && e.Exit.Signal == "" && e.Exit.Code == *exit {
			f.Event = &act[i]
			return f
		}
		if e.Exit == nil {
			f.Unknown = &act[i]
		}
	}
	return f
}

// Seen says what the observer recorded when nothing matched: how many
// events of the kind (what: "files written", "processes"), the last, a
// matching process whose status was not seen, and what was left out.
func (f ActivityFound) Seen(act []ActivityEvent, what string) string {
	seen := fmt.Sprintf("%d %s, none matching", f.N, what)
	if f.Last != nil {
		seen += "; the last: " + f.Last.String()
	}
	var unseen, lost int64
	for _, e := range act {
		switch e.Kind {
		case ActUnseen:
			unseen += e.N
		case ActOverflow:
			lost++
		}
	}
	if unseen > 0 {
		seen += fmt.Sprintf("; %d short-lived processes or threads unseen", unseen)
	}
	if lost > 0 {
		seen += fmt.Sprintf("; %d overflow events (some activity was not recorded)", lost)
	}
	if f.Unknown != nil {
		seen += "; " + f.Unknown.String() + " (its status was not seen: the observer polls)"
	}
	return seen
}
