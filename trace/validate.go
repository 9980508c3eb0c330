package trace

import (
	"bytes"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
)

// Validate checks that a trace read back is whole and consistent, and
// returns what is wrong (nil: nothing). A finalised trace must say so in
// run.json, with an outcome and its exit code; its steps are numbered
// from 1 without a gap, each with its result (but a last done, and the
// last step of a run that ended with an environment error or crashed); run.json's
// steps is the last step; every screenshot referenced is on disk and is a
// whole PNG; actions.jsonl holds one line per step with a valid action;
// resumed_from, when present, names a trace and a step before this run's
// last.
func Validate(tr *Trace) []string {
	var bad []string
	add := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	r := tr.Run
	switch {
	case r.Status != StatusComplete:
		add("run.json: status %q, not %q", r.Status, StatusComplete)
	case r.Outcome == "":
		add("run.json: no outcome")
	case r.ExitCode != r.Outcome.ExitCode():
		add("run.json: exit_code %d, but outcome %s is %d", r.ExitCode, r.Outcome, r.Outcome.ExitCode())
	}
	if tr.TornTail {
		add("steps.jsonl: a torn last line")
	}
	last, valid := 0, 0
	for i, st := range tr.Steps {
		if st.Step != last+1 {
			add("steps.jsonl: step %d follows step %d", st.Step, last)
		}
		last = st.Step
		done := st.Action != nil && st.Action.Kind == "done"
		// The last step may lack its result when it is a done, or when
		// the run ended there for want of a place to write it (an
		// environment error: a full disk) or agentbox died (crashed).
		cut := i == len(tr.Steps)-1 && r.Outcome == Error && (r.Reason == ReasonEnvironment || r.Reason == ReasonCrashed)
		if st.Result == nil && !(done && i == len(tr.Steps)-1) && !cut && st.Invalid == "" && st.Action != nil {
			add("steps.jsonl: step %d has no result", st.Step)
		}
		if st.Action != nil && st.Invalid == "" {
			valid++
		}
	}
	if r.Status == StatusComplete && r.Steps != last {
		add("run.json: steps %d, but the last step recorded is %d", r.Steps, last)
	}
	lost := map[string]bool{}
	for _, l := range r.Lost {
		lost[l.Path] = true
	}
	var missing []string
	for _, m := range tr.Missing {
		if !lost[m] { // a file the trace says it lost is not missing
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		add("%d screenshots referenced are not on disk (first: %s)", len(missing), missing[0])
	}
	for _, s := range tr.Refused {
		add("screenshot refused: %s", s)
	}
	seen := map[string]bool{}
	for _, rec := range tr.Records {
		if rec.Observation != nil {
			for i, e := range rec.Observation.Activity {
				if why := e.Problem(); why != "" {
					add("steps.jsonl: step %d: activity %d: %s", rec.Step, i+1, why)
				}
			}
		}
		o := rec.Observation
		if o == nil || o.Screenshot == "" || seen[o.Screenshot] || !tr.HasScreenshot(o.Screenshot) {
			continue
		}
		seen[o.Screenshot] = true
		data, err := ReadFile(tr.Dir, o.Screenshot, 64<<20)
		if err == nil {
			_, err = png.DecodeConfig(bytes.NewReader(data))
		}
		if err != nil {
			add("%s: %v", o.Screenshot, err)
		}
	}
	if data, err := os.ReadFile(filepath.Join(tr.Dir, ActionsFile)); err != nil {
		add("%s: %v", ActionsFile, err)
	} else if recs, torn, err := ReadRecords(bytes.NewReader(data)); err != nil || torn {
		add("%s: unreadable (torn %v): %v", ActionsFile, torn, err)
	} else if len(recs) != valid {
		add("%s: %d lines for %d steps with an action", ActionsFile, len(recs), valid)
	}
	if rf := r.ResumedFrom; rf != nil {
		switch {
		case rf.Trace == "":
			add("run.json: resumed_from names no trace")
		case rf.Step < 0 || (r.Status == StatusComplete && rf.Step > last):
			add("run.json: resumed_from step %d, but this run has %d steps", rf.Step, last)
		}
	}
	return bad
}
