package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/eval"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/store"
	"github.com/codegirl-games/agentbox/trace"
)

// openLsStore opens the index for ls, or returns nil when there is none
// (off, not created yet) or it cannot be read: ls then reads the traces.
// A damaged or newer index is a warning that says how to recover.
func openLsStore(stderr io.Writer, f indexFlags) *store.Store {
	p, err := f.where()
	if err == nil && p == "" {
		return nil
	}
	if err == nil {
		if _, err = os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			return nil // nothing indexed yet; ls creates no index
		}
	}
	var s *store.Store
	if err == nil {
		s, err = store.Open(p)
	}
	if err != nil {
		fmt.Fprintf(stderr, "agentbox: warning: reading the traces instead of the index: %s\n", termsafe.Line(err.Error()))
		return nil
	}
	return s
}

// lsTime parses --since and --until: a date (local midnight), a time
// (RFC 3339, or "2006-01-02 15:04[:05]" local), or a duration ago ("36h",
// "7d").
func lsTime(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if n, ok := strings.CutSuffix(v, "d"); ok {
		if d, err := strconv.Atoi(n); err == nil && d >= 0 {
			return time.Now().AddDate(0, 0, -d), nil
		}
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return time.Now().Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02", "2006-01-02 15:04", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, v, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usageErrorf("ls: %s %q: want a date (2026-11-29), a time (2026-11-29T20:00:00Z) or a duration ago (36h, 7d)", flag, v)
}

func (f lsFilter) any() bool {
	return f.app != "" || f.agent != "" || f.outcome != "" || f.task != "" || f.eval != "" || !f.from.IsZero() || !f.to.IsZero()
}

func contains(s, sub string) bool {
	return sub == "" || strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// keep filters what the walk of dir found as the store's query would.
func (f lsFilter) keep(dir string, entries []lsEntry) []lsEntry {
	if !f.any() {
		return entries
	}
	var out []lsEntry
	for _, e := range entries {
		eval := e.Kind == lsEval
		switch {
		case f.eval != "" && (eval || e.Path == "."):
		case eval && (f.agent != "" || f.task != ""):
		case !contains(e.App, f.app), !eval && !contains(e.Agent, f.agent), !eval && !contains(e.Task, f.task):
		case f.outcome != "" && f.outcome != e.filterOutcome():
		case !f.from.IsZero() && e.Started.Before(f.from):
		case !f.to.IsZero() && !e.Started.Before(f.to):
		default:
			out = append(out, e)
		}
	}
	return out
}

// filterOutcome is the word --outcome matches.
func (e lsEntry) filterOutcome() string {
	switch {
	case e.Kind == lsEval:
		return e.Outcome
	case e.Status != trace.StatusComplete:
		return "incomplete"
	}
	return e.Outcome
}

// lsFromStore lists from the index what is under dir (all when dir is
// ""), with paths relative to dir (absolute without one). Entries whose
// trace or eval is gone from the disk are left out.
func lsFromStore(ctx context.Context, s *store.Store, dir string, f lsFilter) ([]lsEntry, error) {
	var under string
	if dir != "" {
		var err error
		if under, err = filepath.Abs(dir); err != nil {
			return nil, err
		}
	}
	sf := store.Filter{Under: under, App: f.app, Agent: f.agent, Task: f.task, Outcome: f.outcome, Since: f.from, Until: f.to}
	if f.eval != "" {
		sf.Eval = f.eval
		if fi, err := os.Stat(f.eval); err == nil && fi.IsDir() {
			sf.Eval, _ = filepath.Abs(f.eval)
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	rows, err := s.Query(ctx, sf)
	if err != nil {
		return nil, err
	}
	out := make([]lsEntry, 0, len(rows))
	for _, r := range rows {
		file := trace.RunFile
		if r.Kind == store.KindEval {
			file = eval.SummaryFile
		}
		if _, err := os.Stat(filepath.Join(r.Path, file)); err != nil {
			continue // removed since it was indexed (agentbox index forgets it)
		}
		p := r.Path
		if under != "" {
			if rel, err := filepath.Rel(under, r.Path); err == nil {
				p = rel
			}
		}
		e := lsEntry{Kind: r.Kind, Path: p, ID: r.ID, Status: r.Status, Outcome: r.Outcome, Reason: r.Reason, Steps: r.Steps,
			DurationMS: r.DurationMS, App: r.App, Agent: r.Agent, Sandbox: r.Sandbox, Task: r.Task, Started: r.Started}
		if r.Kind != store.KindEval {
			e.Liveness = liveness(r.Path, r.Status, r.Reason)
		}
		if r.Kind == store.KindEval {
			passed, episodes := r.Passed, r.Episodes
			e.Passed, e.Episodes = &passed, &episodes
		}
		out = append(out, e)
	}
	return out, nil
}
