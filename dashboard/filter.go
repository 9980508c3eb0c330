package dashboard

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/store"
	"github.com/codegirl-games/agentbox/trace"
)

// Outcomes are the --outcome words a filter takes: a run's outcome (or
// incomplete, for a run never finalised) and an eval's result.
var Outcomes = []string{
	string(trace.Success), string(trace.Failure), string(trace.Error), string(trace.Interrupted), "incomplete",
	"passed", "failed", "infrastructure",
}

// form is a page's filter as given (kept to fill the form and the links).
type form struct {
	App, Agent, Outcome, Task, Eval, Since, Until string
	Page                                          int
}

// filterError names the parameter that is wrong.
type filterError struct {
	param, value, want string
}

func (e *filterError) Error() string {
	return fmt.Sprintf("filter %s=%q: %s", e.param, e.value, e.want)
}

// parseFilter reads a page's filter from its query: app, agent, task
// (text contained), outcome (one of Outcomes), eval (a directory or an
// eval's ID), since and until (a date, a time, or a duration ago), page.
func parseFilter(q url.Values, now time.Time) (form, store.Filter, error) {
	f := form{App: q.Get("app"), Agent: q.Get("agent"), Outcome: q.Get("outcome"), Task: q.Get("task"), Eval: q.Get("eval"),
		Since: q.Get("since"), Until: q.Get("until"), Page: 1}
	sf := store.Filter{App: f.App, Agent: f.Agent, Task: f.Task, Outcome: f.Outcome, Episodes: true}
	if f.Outcome != "" && !contains(Outcomes, f.Outcome) {
		return f, sf, &filterError{"outcome", f.Outcome, "want one of " + strings.Join(Outcomes, ", ")}
	}
	var err error
	if sf.Since, err = parseTime("since", f.Since, now); err != nil {
		return f, sf, err
	}
	if sf.Until, err = parseTime("until", f.Until, now); err != nil {
		return f, sf, err
	}
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1e6 {
			return f, sf, &filterError{"page", v, "want a page number from 1"}
		}
		f.Page = n
	}
	if f.Eval != "" {
		sf.Eval = f.Eval
		if filepath.IsAbs(f.Eval) {
			sf.Eval = filepath.Clean(f.Eval)
		} else if fi, err := os.Stat(f.Eval); err == nil && fi.IsDir() {
			sf.Eval, _ = filepath.Abs(f.Eval)
		}
	}
	return f, sf, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// parseTime reads since and until: a date (2026-11-29, local midnight), a
// time (RFC 3339, or 2026-11-29T20:00 as a browser's datetime-local sends
// it, local), or a duration ago (36h, 7d).
func parseTime(param, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if n, ok := strings.CutSuffix(v, "d"); ok {
		if d, err := strconv.Atoi(n); err == nil && d >= 0 {
			return now.AddDate(0, 0, -d), nil
		}
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02", "2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02 15:04:05"} {
		if t, err := time.ParseInLocation(layout, v, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, &filterError{param, v, "want a date (2026-11-29), a time (2026-11-29T20:00:00Z) or a duration ago (36h, 7d)"}
}

// query is the form as a query string (page p; 0 leaves it out).
func (f form) query(p int) string {
	q := url.Values{}
	for _, kv := range [][2]string{{"app", f.App}, {"agent", f.Agent}, {"outcome", f.Outcome}, {"task", f.Task}, {"eval", f.Eval}, {"since", f.Since}, {"until", f.Until}} {
		if kv[1] != "" {
			q.Set(kv[0], kv[1])
		}
	}
	if p > 1 {
		q.Set("page", strconv.Itoa(p))
	}
	return q.Encode()
}

// any reports whether the form filters anything.
func (f form) any() bool {
	return f.App != "" || f.Agent != "" || f.Outcome != "" || f.Task != "" || f.Eval != "" || f.Since != "" || f.Until != ""
}
