package session

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/plural"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// Bounds of the episode's end: before_collect's steps with the copying
// out, and the grader.
const (
	collectBound = 2 * time.Minute
	gradeBound   = 5 * time.Minute
)

// EventCollectFailed is the trace event of a collection that could not
// happen (the sandbox had ended): data error.
const EventCollectFailed = "collect_failed"

// inputInfos lists the staged input files for run.json.
func inputInfos(in *app.Inputs, sums map[string]string) []trace.FileInfo {
	var out []trace.FileInfo
	for _, f := range in.Files {
		if sum, ok := sums[f.Rel]; ok {
			out = append(out, trace.FileInfo{Path: f.Rel, Size: f.Size, SHA256: sum})
		}
	}
	return out
}

// collect runs the task's before_collect steps and copies its files out
// of the sandbox into the trace's files/, recording them in run.json. It
// runs when the episode ends, whatever the outcome, before the teardown;
// a sandbox that has died is recorded as such.
func (s *Session) collect(ctx context.Context) (failed *End) {
	c := s.cfg.Collect
	if c.Empty() {
		return nil
	}
	env := s.environment()
	t := time.Now()
	defer func() { s.timing("collect", time.Since(t)) }()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), collectBound)
	defer cancel()
	patterns := make([]string, 0, len(c.Patterns))
	for _, p := range c.Patterns {
		rel, err := app.CollectPattern(p)
		if err != nil { // checked when the task was read
			s.collectFailed(fmt.Errorf("collect: %w", err))
			return
		}
		patterns = append(patterns, rel)
	}
	col, ok := env.(environment.Collector)
	switch {
	case env == nil:
		s.collectFailed(fmt.Errorf("no sandbox: it was not created"))
		return
	case !ok:
		s.collectFailed(fmt.Errorf("the %s backend cannot collect files", env.Info().Backend))
		return
	}
	if l, ok := env.(environment.Liveness); ok {
		select {
		case <-l.Done():
			s.collectFailed(fmt.Errorf("the sandbox had ended"))
			return
		default:
		}
	}
	if f, ok := env.(environment.Freezer); ok && s.isFrozen() {
		_ = f.Thaw(cctx) // a frozen app cannot save its file
	}
	failed = s.beforeCollect(cctx, env, c.Before)
	got, err := col.Collect(cctx, patterns, c.Limits, filepath.Join(s.tw.Dir(), trace.FilesDir))
	files := make([]trace.FileInfo, 0, len(got.Files))
	for _, f := range got.Files {
		files = append(files, trace.FileInfo{Path: f.Path, Size: f.Size, SHA256: f.SHA256})
	}
	refused := make([]trace.RefusedFile, 0, len(got.Refused))
	for _, r := range got.Refused {
		refused = append(refused, trace.RefusedFile{Path: r.Path, Reason: r.Reason})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	if err != nil {
		s.collectFailed(err)
	}
	_ = s.tw.Update(func(run *trace.Run) {
		run.Files = files
		run.FilesRefused = append(run.FilesRefused, refused...)
	})
	fmt.Fprintf(s.cfg.Progress, "agentbox: collected %s into %s (%d refused)\n", plural.S(len(files), "file"), filepath.Join(s.tw.Dir(), trace.FilesDir), len(refused))
	return failed
}

// isFrozen reports whether the app is frozen while the agent decides.
func (s *Session) isFrozen() bool {
	s.fz.Lock()
	defer s.fz.Unlock()
	return s.frozenNow
}

// collectFailed records that nothing could be collected, and why.
func (s *Session) collectFailed(err error) {
	msg := err.Error()
	fmt.Fprintf(s.cfg.Progress, "agentbox: the task's files could not be collected: %s\n", termsafe.Text(msg))
	s.tw.Record(trace.Record{Type: trace.TypeEvent, Event: EventCollectFailed, Data: map[string]any{"error": msg}})
	_ = s.tw.Update(func(run *trace.Run) {
		for _, p := range s.cfg.Collect.Patterns {
			run.FilesRefused = append(run.FilesRefused, trace.RefusedFile{Path: p, Reason: "not collected: " + msg})
		}
	})
}

// EventCollectCheck is the trace event of a before_collect expect step:
// data {step, check, ok, message}.
const EventCollectCheck = "collect_check"

// beforeCollect performs the task's before_collect steps, each recorded
// as a step of the actor collect. An action that fails is recorded and
// the next step runs; a wait_for that is not met in time or an expect
// that does not hold ends the steps, and its End (failure, check_failed,
// naming the step) is returned for the episode. They are numbered after
// the episode's steps and its final observation (which takes the number
// after the last step), and are not counted among the episode's steps.
func (s *Session) beforeCollect(ctx context.Context, env environment.Environment, steps []app.CollectStep) *End {
	if len(steps) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	step := s.steps + 1 // the final observation's
	for i, st := range steps {
		step++
		if st.Check == app.StepExpect {
			ok, msg := expectHolds(ctx, env, st)
			s.tw.Record(trace.Record{Type: trace.TypeEvent, Step: step, Actor: trace.ActorCollect, Event: EventCollectCheck,
				Data: map[string]any{"step": step, "check": st.String(), "ok": ok, "message": msg}})
			if !ok {
				return s.collectCheckFailed(i, st, msg)
			}
			continue
		}
		a := st.Action
		rec := trace.Record{Type: trace.TypeStep, Step: step, Actor: trace.ActorCollect, Action: &a}
		if err := s.tw.Record(rec); err != nil {
			return nil
		}
		s.tell(Event{Kind: EventStep, Step: step, Actor: trace.ActorCollect, Action: &a})
		t := time.Now()
		var res action.Result
		var err error
		if a.Kind == action.Wait && a.Until == "" {
			select {
			case <-time.After(time.Duration(a.MS) * time.Millisecond):
			case <-ctx.Done():
				err = ctx.Err()
			}
			res = action.Result{OK: err == nil, ElapsedUS: time.Since(t).Microseconds()}
		} else {
			res, err = env.Act(ctx, a)
		}
		if err != nil {
			res = action.Result{OK: false, Error: err.Error(), ElapsedUS: time.Since(t).Microseconds()}
		}
		s.tw.Record(trace.Record{Type: trace.TypeResult, Step: step, Result: &res, DurationMS: msOf(time.Since(t))})
		s.tell(Event{Kind: EventResult, Step: step, Result: &res})
		if !res.OK {
			fmt.Fprintf(s.cfg.Progress, "agentbox: before_collect step %d (%s): %s\n", step, termsafe.Line(st.String()), termsafe.Line(res.Error))
			if st.Check == app.StepWaitFor {
				return s.collectCheckFailed(i, st, res.Error)
			}
		}
		if ctx.Err() != nil {
			return nil
		}
	}
	return nil
}

// collectCheckFailed is the End of a before_collect check (the i-th
// step, 0-based) that did not hold.
func (s *Session) collectCheckFailed(i int, st app.CollectStep, msg string) *End {
	m := fmt.Sprintf("before_collect step %d (%s) did not hold: %s", i+1, st.String(), msg)
	if st.Check == app.StepExpect {
		fmt.Fprintf(s.cfg.Progress, "agentbox: %s\n", termsafe.Line(m))
	}
	return &End{Outcome: trace.Failure, Reason: trace.ReasonCheckFailed, Message: m}
}

// expectHolds checks an expect step against the desktop as it is.
func expectHolds(ctx context.Context, env environment.Environment, st app.CollectStep) (bool, string) {
	_, state, err := env.Observe(ctx)
	if err != nil {
		return false, "the desktop could not be read: " + err.Error()
	}
	switch st.Expect {
	case app.ExpectWindow:
		match, err := action.TitleMatcher(st.Title)
		if err != nil { // checked when the task was read
			return false, err.Error()
		}
		var titles []string
		for _, w := range state.Windows {
			if match(w.Title) {
				return true, fmt.Sprintf("window %q", w.Title)
			}
			titles = append(titles, strconv.Quote(w.Title))
		}
		if len(titles) == 0 {
			return false, "no window is open"
		}
		return false, "no window's title matches; the windows: " + strings.Join(titles, ", ")
	case app.ExpectRunning:
		if state.Running {
			return true, "the app runs"
		}
		return false, "the app has exited" + exitText(state.Exit)
	case app.ExpectExited:
		if state.Running {
			return false, "the app still runs"
		}
		if st.Code != nil && (state.Exit == nil || state.Exit.Code != *st.Code) {
			return false, "the app has exited" + exitText(state.Exit) + fmt.Sprintf(", not with code %d", *st.Code)
		}
		return true, "the app has exited" + exitText(state.Exit)
	}
	return false, fmt.Sprintf("unknown expect %q", st.Expect) // checked when the task was read
}

// exitText says how the app exited: " (code 1)", " (signal 9)", or "".
func exitText(e *observe.Exit) string {
	switch {
	case e == nil:
		return ""
	case e.Signal != "":
		return fmt.Sprintf(" (signal %s)", e.Signal)
	}
	return fmt.Sprintf(" (code %d)", e.Code)
}

// collected is what collection recorded in run.json.
func (s *Session) collected() ([]trace.FileInfo, []trace.RefusedFile) {
	run := s.tw.Run()
	return run.Files, run.FilesRefused
}

// grade runs the grader, after the teardown, bounded in time.
func (s *Session) grade(ctx context.Context) *trace.Grade {
	if s.cfg.Grader == nil {
		return nil
	}
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), gradeBound)
	defer cancel()
	t := time.Now()
	done := make(chan trace.Grade, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- trace.Grade{Outcome: trace.GradeInfrastructure, Message: fmt.Sprintf("the grader panicked: %v", p)}
			}
		}()
		done <- s.cfg.Grader.Grade(gctx, filepath.Join(s.tw.Dir(), trace.FilesDir), s.tw.Dir())
	}()
	var g trace.Grade
	select {
	case g = <-done:
	case <-gctx.Done():
		g = trace.Grade{Outcome: trace.GradeInfrastructure, Message: fmt.Sprintf("the grader did not finish within %v", gradeBound)}
	}
	d := time.Since(t)
	s.timing("grade", d)
	if g.MS == 0 {
		g.MS = msOf(d)
	}
	return &g
}
