package grade

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/codegirl-games/agentbox/internal/collectfs"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// checkActivity runs a file_written or process check over what the
// trusted observer recorded in the trace's steps.
func checkActivity(c *Check, traceDir string) result {
	act, res, ok := readActivity(traceDir)
	if !ok {
		return res
	}
	var f observe.ActivityFound
	var what string
	if c.Kind == KindFileWritten {
		f = observe.FindWritten(act, func(rel string) bool { return collectfs.Matches(c.Pattern, rel) })
		what = "files written"
	} else {
		f = observe.FindProcess(act, c.argvMatch, c.Exit)
		what = "processes"
	}
	if f.Event != nil {
		return held("%s", f.Event.String())
	}
	return incorrect("%s", f.Seen(act, what))
}

// readActivity reads every observation's activity from the trace's
// steps. A trace recorded without the observer cannot judge: that is
// infrastructure, naming --observe.
func readActivity(traceDir string) ([]observe.ActivityEvent, result, bool) {
	run, err := trace.ReadRun(traceDir)
	if err != nil {
		return nil, infrastructure("the trace: %v", err), false
	}
	if run.Settings == nil || !run.Settings.Observe {
		return nil, infrastructure("the episode ran without the trusted observer, which this check reads; run with --observe"), false
	}
	f, err := os.Open(filepath.Join(traceDir, trace.StepsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, result{}, true // no step: nothing was seen
	}
	if err != nil {
		return nil, infrastructure("the trace's steps: %v", err), false
	}
	defer f.Close()
	recs, _, err := trace.ReadRecords(f)
	if err != nil {
		return nil, infrastructure("the trace's steps: %v", fmt.Errorf("%s: %w", trace.StepsFile, err)), false
	}
	var act []observe.ActivityEvent
	for _, r := range recs {
		if r.Observation != nil {
			act = append(act, r.Observation.Activity...)
		}
	}
	return act, result{}, true
}
