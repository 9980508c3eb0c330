package eval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/agent/llm"
	"github.com/codegirl-games/agentbox/agent/script"
	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/grade"
	"github.com/codegirl-games/agentbox/internal/plural"
	"github.com/codegirl-games/agentbox/internal/termsafe"
	"github.com/codegirl-games/agentbox/internal/vault"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/policy"
	"github.com/codegirl-games/agentbox/pool"
	"github.com/codegirl-games/agentbox/session"
	"github.com/codegirl-games/agentbox/trace"
)

// Options configure a suite run.
type Options struct {
	Backend  environment.Backend
	Parallel int
	// Episodes, when positive, overrides every task's episodes.
	Episodes int
	Out      string // receives summary.json, junit.xml and a trace per episode
	RunID    string
	// Resume continues the eval in Out (eval --resume): episodes whose
	// trace finished are kept as they are and counted, the others
	// (crashed, or never started) run again, and the summary is written
	// over them all as one eval.
	Resume bool
	// Env is the base sandbox configuration (image, limits, guest binary).
	Env      environment.Config
	Timeout  time.Duration // per episode, when the task says none
	MaxSteps int           // when the task says none
	LogCap   int64
	// FreezeWhileThinking freezes each app while its agent decides.
	FreezeWhileThinking bool
	// Policy gates every episode's actions (nil: none); Approver answers
	// its asks (nil: every ask denied). docs/policy.md.
	Policy   *policy.Policy
	Approver policy.Approver
	// MaxRate bounds each episode's actions per second.
	MaxRate float64
	// Tree and Marks are session.Config's: the tree at every step, marks
	// on the agents' screenshots.
	Tree, Marks bool
	// Vault holds the secrets every task's type_secret types (--vault).
	Vault *vault.Vault
	// AppEnv is added to every task's app environment (over the task's).
	AppEnv map[string]string
	// StartTimeout bounds creating each sandbox and launching its app;
	// ReadyTimeout, each app's window (zero: session's defaults, the
	// manifest's ready_timeout).
	StartTimeout, ReadyTimeout time.Duration
	// Settle is each episode's settle-before-screenshot mode.
	Settle session.Settle
	// Clock is each episode's app clock (eval --clock): a virtual clock
	// is checked against the backend and every task's app before the
	// first episode (an error wrapping session.ErrNoClock).
	Clock    session.Clock
	Progress io.Writer
	Terminal bool // live status line instead of one line per episode
	// Verbose prints every step of every episode to Progress, under the
	// episode's name.
	Verbose bool
	// Watch, when set, is told of each episode just before it starts (eval
	// --live: the live page): it may hook the session's configuration
	// (Listener) and loop (Opened), and returns what to call with the
	// result.
	Watch func(task string, episode int, cfg *session.Config, loop *session.Loop) func(session.Result)

	// Pool, when positive, keeps that many sandboxes warm per task's
	// sandbox (image, screen, limits, …): an episode then only launches its
	// app. PoolMax bounds them over all tasks (default 4×Pool). The pool's
	// sandboxes are removed when Run returns.
	Pool, PoolMax int
	// PoolLaunch launches each task's app ahead in its pooled sandboxes
	// (pool.Options.Launch).
	PoolLaunch bool
	// PoolStats, when set, is told the pool's counts when Run ends.
	PoolStats func(pool.Stats)

	// Relaunch starts each task's episodes after its first in the sandbox
	// of an earlier episode of the task, reset in place (eval --reset
	// relaunch; the backend must have the capability relaunch); a sandbox
	// that cannot be reset is replaced by a fresh one. The kept sandboxes
	// are removed when Run returns.
	Relaunch bool

	// Indexer, when set, indexes each episode's trace as it is written.
	Indexer trace.Indexer

	// ModelConcurrency, when positive, bounds the model requests in
	// flight over all parallel episodes (eval --model-concurrency): one
	// queue, one back-off on a 429 for all; each step records how long its
	// decision waited for a turn (queue_ms) apart from the model's time.
	ModelConcurrency int
	modelQueue       *llm.Queue

	notes   func(*Episode) io.Writer // where an episode's agent tells its waits
	pool    *pool.Pool
	claimed func() // an episode is past its claim on the pool
	claims  *claims
}

// Categories of an episode's result, as a grader would count them.
const (
	Passed         = "passed"         // success: verified
	Failed         = "failed"         // failure: incorrect (the agent or a check said no)
	Malformed      = "malformed"      // the agent broke (bad answers, crashed)
	Infrastructure = "infrastructure" // the sandbox, image, guest or app would not work
	Interrupted    = "interrupted"
	Skipped        = "skipped" // never started (the run was interrupted first)
)

// Episode is one run of one task.
type Episode struct {
	Task       string        `json:"task"`
	N          int           `json:"episode"`
	Category   string        `json:"category"`
	Outcome    trace.Outcome `json:"outcome,omitempty"`
	Reason     string        `json:"reason,omitempty"`
	Message    string        `json:"message,omitempty"`
	Steps      int           `json:"steps"`
	DurationMS float64       `json:"duration_ms"`
	Trace      string        `json:"trace,omitempty"` // relative to Out
	// Grade and Score are the private grader's outcome class and score
	// over the episode's files, when its task has a grade (the category
	// then follows the grade: verified passes).
	Grade   string   `json:"grade,omitempty"`
	Score   *float64 `json:"score,omitempty"`
	started time.Time
}

// TaskSummary aggregates a task's episodes.
type TaskSummary struct {
	Name           string         `json:"name"`
	Episodes       int            `json:"episodes"`
	Passed         int            `json:"passed"`
	Failed         int            `json:"failed"`
	Malformed      int            `json:"malformed"`
	Infrastructure int            `json:"infrastructure"`
	Interrupted    int            `json:"interrupted"`
	Skipped        int            `json:"skipped"`
	PassRate       float64        `json:"pass_rate"`
	MeanSteps      float64        `json:"mean_steps"`
	MeanDurationMS float64        `json:"mean_duration_ms"`
	Reasons        map[string]int `json:"reasons,omitempty"` // non-success reasons by kind
}

// Summary is summary.json.
type Summary struct {
	Format     string        `json:"format"` // agentbox-eval
	Version    int           `json:"version"`
	Suite      string        `json:"suite"`
	File       string        `json:"file"`
	RunID      string        `json:"run_id"`
	Parallel   int           `json:"parallel"`
	Started    time.Time     `json:"started"`
	Ended      time.Time     `json:"ended"`
	DurationMS float64       `json:"duration_ms"`
	Totals     TaskSummary   `json:"totals"`
	Tasks      []TaskSummary `json:"tasks"`
	Episodes   []Episode     `json:"episodes"`
	// ModelQueue is the queue of model calls all episodes shared (eval
	// --model-concurrency); absent without one.
	ModelQueue *ModelQueue `json:"model_queue,omitempty"`
}

// ExitCode is the process exit code for the summary: 0 all passed, 130
// interrupted, 1 any task failed or agent malformed, 3 only infrastructure
// errors.
func (s *Summary) ExitCode() int {
	t := s.Totals
	switch {
	case t.Interrupted > 0 || t.Skipped > 0:
		return 130
	case t.Failed > 0 || t.Malformed > 0:
		return 1
	case t.Infrastructure > 0:
		return 3
	}
	return 0
}

// categorize maps an outcome to a grader's category. With a grade, the
// grade decides (docs/tasks.md: a task passes when its grade is
// verified): incorrect and malformed files fail, a grader that could not
// judge is infrastructure; an interrupted episode stays interrupted. An
// episode the infrastructure ended (the app never started, the sandbox
// died) whose files do not grade verified is infrastructure too: what
// the files lack is not the agent's doing (an agent that broke is).
func categorize(r session.Result) string {
	if r.Grade != nil && r.Outcome != trace.Interrupted {
		infra := r.Outcome == trace.Error && r.Reason != trace.ReasonAgent && r.Reason != trace.ReasonMalformed
		switch r.Grade.Outcome {
		case trace.GradeVerified:
			return Passed
		case trace.GradeIncorrect, trace.GradeMalformed:
			if !infra {
				return Failed
			}
		}
		return Infrastructure
	}
	switch r.Outcome {
	case trace.Success:
		return Passed
	case trace.Failure:
		return Failed
	case trace.Interrupted:
		return Interrupted
	}
	if r.Reason == trace.ReasonAgent || r.Reason == trace.ReasonMalformed {
		return Malformed
	}
	return Infrastructure
}

// DefaultParallel is Options.Parallel's default, and eval's --parallel's.
const DefaultParallel = 1

// Run runs every episode of the suite and writes the summary. Cancelling
// ctx with session.ErrInterrupted stops scheduling, interrupts running
// episodes (their sandboxes are removed) and still writes the summary.
func Run(ctx context.Context, s *Suite, o Options) (*Summary, error) {
	if o.Parallel <= 0 {
		o.Parallel = DefaultParallel
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	if entries, _ := os.ReadDir(o.Out); len(entries) > 0 && !o.Resume {
		return nil, fmt.Errorf("%s exists and is not empty; choose a new directory (nothing was overwritten)", o.Out)
	}
	sum := &Summary{Format: SummaryFormat, Version: SummaryVersion, Suite: s.Name, File: s.File, RunID: o.RunID, Parallel: o.Parallel, Started: time.Now()}
	if o.ModelConcurrency > 0 {
		o.modelQueue = llm.NewQueue(o.ModelConcurrency)
	}

	// Episodes in round-robin order across tasks, so an early stop still
	// samples every task.
	var eps []*Episode
	counts := map[string]int{}
	for _, t := range s.Tasks {
		counts[t.Name] = t.Episodes
		if o.Episodes > 0 {
			counts[t.Name] = o.Episodes
		}
	}
	for n := 1; ; n++ {
		added := false
		for _, t := range s.Tasks {
			if n <= counts[t.Name] {
				eps = append(eps, &Episode{Task: t.Name, N: n, Category: Skipped})
				added = true
			}
		}
		if !added {
			break
		}
	}
	tasks := map[string]*Task{}
	bundles := map[string]*app.Bundle{}
	loaded := map[string]*app.Bundle{} // by target: tasks of one app share its files (a warm pool stages them ahead once)
	for _, t := range s.Tasks {
		tasks[t.Name] = t
		b := loaded[t.Target]
		if b == nil {
			var err error
			if b, err = app.Load(t.Target, app.DefaultLimits); err != nil {
				return nil, err
			}
			defer b.Close()
			loaded[t.Target] = b
		}
		bundles[t.Name] = b
		if t.Policy == nil && b.PolicyPath() != "" {
			var err error
			if t.manifestPolicy, err = policy.Load(b.PolicyPath()); err != nil {
				return nil, fmt.Errorf("task %s: the app manifest's policy: %w", t.Name, err)
			}
		}
		if err := session.CheckClock(t.clock(o), o.Backend, b); err != nil {
			return nil, fmt.Errorf("task %s: %w", t.Name, err)
		}
		in, err := app.LoadInputs(t.TaskFiles(b), b, app.DefaultLimits)
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", t.Name, err)
		}
		defer in.Close()
		t.inputs = in
	}

	if o.Relaunch && !environment.CapabilitiesOf(o.Backend).Relaunch {
		return nil, fmt.Errorf("--reset relaunch: the %s backend cannot reset a sandbox in place (it lacks the capability relaunch)", o.Backend.Name())
	}
	todo := eps
	if o.Resume {
		todo = nil
		kept := 0
		for _, ep := range eps {
			done, err := finishedEpisode(ep, o.Out)
			if err != nil {
				return nil, err
			}
			if done {
				kept++
				if ep.started.Before(sum.Started) {
					sum.Started = ep.started // the eval began with its first run
				}
				continue
			}
			todo = append(todo, ep)
		}
		fmt.Fprintf(o.Progress, "agentbox: resuming %s: %d of %d episodes finished, %d to run\n", termsafe.Line(o.Out), kept, len(eps), len(todo))
	}
	o.claims = newClaims(todo, o.Relaunch, o.Parallel)
	if o.Relaunch {
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			o.claims.close(cctx)
		}()
	}
	if o.Pool > 0 {
		pl, err := startPool(s, tasks, bundles, o)
		if err != nil {
			return nil, err
		}
		o.pool = pl
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := pl.Close(cctx); err != nil {
				fmt.Fprintf(o.Progress, "agentbox: %s\n", termsafe.Text(err.Error()))
			}
			if o.PoolStats != nil {
				o.PoolStats(pl.Stats())
			}
		}()
	}
	p := newProgress(o.Progress, o.Terminal, len(todo), o.Parallel)
	defer p.stop()
	o.notes = p.notes
	runEpisodes(ctx, todo, tasks, bundles, o, p)
	return finishSummary(sum, s, eps, o)
}

// runEpisodes runs eps, o.Parallel at a time, until ctx ends.
func runEpisodes(ctx context.Context, eps []*Episode, tasks map[string]*Task, bundles map[string]*app.Bundle, o Options, p *progress) {
	if o.pool != nil {
		// Once every episode has made its claim, what the pool holds is
		// no episode's: it is removed then, beside the episodes still
		// running, and refills no more.
		var claimed atomic.Int64
		var early sync.WaitGroup
		defer early.Wait()
		pl, total := o.pool, int64(len(eps))
		o.claimed = func() {
			if claimed.Add(1) == total {
				early.Go(func() {
					cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
					defer cancel()
					_ = pl.Close(cctx) // its error is Run's deferred Close's to report
				})
			}
		}
	}
	jobs := make(chan *Episode)
	var wg sync.WaitGroup
	for i := 0; i < o.Parallel; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ep := range jobs {
				p.started()
				runEpisode(ctx, ep, tasks[ep.Task], bundles[ep.Task], o)
				p.finished(ep)
			}
		}()
	}
schedule:
	for _, ep := range eps {
		select {
		case jobs <- ep:
		case <-ctx.Done():
			break schedule
		}
	}
	close(jobs)
	wg.Wait()
	p.stop()
}

// finishSummary aggregates eps into sum and writes it.
func finishSummary(sum *Summary, s *Suite, eps []*Episode, o Options) (*Summary, error) {
	sum.Ended = time.Now()
	sum.DurationMS = float64(sum.Ended.Sub(sum.Started).Microseconds()) / 1000
	if o.modelQueue != nil {
		served, waited := o.modelQueue.Stats()
		sum.ModelQueue = &ModelQueue{Concurrency: o.ModelConcurrency, Requests: served, WaitedMS: float64(waited.Microseconds()) / 1000}
	}
	sum.Episodes = make([]Episode, 0, len(eps))
	for _, ep := range eps {
		sum.Episodes = append(sum.Episodes, *ep)
	}
	sort.SliceStable(sum.Episodes, func(i, j int) bool {
		a, b := sum.Episodes[i], sum.Episodes[j]
		if a.Task != b.Task {
			return taskIndex(s, a.Task) < taskIndex(s, b.Task)
		}
		return a.N < b.N
	})
	sum.aggregate(s)
	if err := sum.write(o.Out); err != nil {
		return sum, err
	}
	return sum, nil
}

// startPool makes the warm pool and warms every task's sandbox.
func startPool(s *Suite, tasks map[string]*Task, bundles map[string]*app.Bundle, o Options) (*pool.Pool, error) {
	pl, err := pool.New(pool.Options{Size: o.Pool, Max: o.PoolMax, MaxKeys: max(len(s.Tasks), pool.DefaultMaxKeys), RunID: o.RunID + "-pool", Launch: o.PoolLaunch,
		Log: func(format string, args ...any) {
			fmt.Fprintf(o.Progress, "agentbox: %s\n", termsafe.Line(fmt.Sprintf(format, args...)))
		}})
	if err != nil {
		return nil, err
	}
	cfgs := map[string]session.Config{}
	for _, t := range s.Tasks {
		cfg, err := episodeConfig(tasks[t.Name], bundles[t.Name], o)
		if err != nil {
			continue // the episodes say so
		}
		cfgs[t.Name] = cfg
	}
	// What the episodes may take bounds each key before it is warmed.
	if err := o.claims.tellPool(pl, cfgs); err != nil {
		pl.Close(context.Background())
		return nil, err
	}
	for _, t := range s.Tasks {
		if cfg, ok := cfgs[t.Name]; ok {
			if err := pl.Warm(cfg); err != nil {
				pl.Close(context.Background())
				return nil, err
			}
		}
	}
	return pl, nil
}

func taskIndex(s *Suite, name string) int {
	for i, t := range s.Tasks {
		if t.Name == name {
			return i
		}
	}
	return len(s.Tasks)
}

func runEpisode(ctx context.Context, ep *Episode, t *Task, b *app.Bundle, o Options) {
	ep.started = time.Now()
	rel := filepath.Join(t.Name, fmt.Sprintf("%03d", ep.N))
	ep.Trace = filepath.ToSlash(rel)
	fail := func(cat string, err error) {
		ep.Category, ep.Outcome, ep.Reason, ep.Message = cat, trace.Error, trace.ReasonEnvironment, err.Error()
		ep.DurationMS = float64(time.Since(ep.started).Microseconds()) / 1000
	}
	// An episode that ends before its claim still counts as claimed: the
	// pool is told it will not come.
	malformed := func(err error) {
		o.claims.drop(t.Name)
		if o.claimed != nil {
			o.claimed()
		}
		fail(Malformed, err)
	}
	ag, err := t.newAgent()
	if err != nil {
		malformed(err)
		return
	}
	if qa, ok := ag.(llm.Queued); ok && o.modelQueue != nil {
		qa.SetQueue(o.modelQueue) // one limit over every episode's model calls
	}
	if ps, ok := ag.(agent.ProgressSetter); ok && o.notes != nil {
		ps.SetProgress(o.notes(ep))
	}
	cfg, err := episodeConfig(t, b, o)
	if err != nil {
		malformed(err)
		return
	}
	var progress io.Writer // with -v, the episode's steps under its name
	if o.Verbose && o.notes != nil {
		progress = o.notes(ep)
	}
	cfg.RunID = fmt.Sprintf("%s-%s-%03d", o.RunID, t.Name, ep.N)
	cfg.TraceDir = filepath.Join(o.Out, rel)
	cfg.Progress = progress
	handedBack := func() {}
	// The sandbox of an earlier episode of the task, reset in place (with
	// relaunch); the claim counted, which tells the pool.
	prepared, keep := o.claims.start(t.Name)
	cfg.Prepared = prepared
	if keep {
		var once sync.Once
		cfg.Keep = func(p *session.Prepared) { once.Do(func() { o.claims.put(t.Name, p) }) }
		// A sandbox that could not be reset is not handed to Keep.
		handedBack = func() { once.Do(func() { o.claims.put(t.Name, nil) }) }
	}
	if o.pool != nil {
		o.pool.TakeWait(ctx, &cfg) // a warm sandbox when the task's key has one (or one under way); else Run creates one cold
		if o.claimed != nil {
			o.claimed()
		}
	}
	loop := session.Loop{Agent: ag, FreezeWhileThinking: o.FreezeWhileThinking}
	finished := func(session.Result) {}
	if o.Watch != nil {
		finished = o.Watch(t.Name, ep.N, &cfg, &loop)
	}
	res, err := session.Run(ctx, cfg, loop)
	handedBack()
	finished(res)
	if c, ok := ag.(interface{ Close() error }); ok {
		c.Close()
	}
	if err != nil {
		fail(Infrastructure, err)
		return
	}
	ep.Category = categorize(res)
	ep.Outcome, ep.Reason, ep.Message, ep.Steps = res.Outcome, res.Reason, res.Message, res.Steps
	ep.DurationMS = float64(res.Duration.Microseconds()) / 1000
	if g := res.Grade; g != nil {
		ep.Grade, ep.Score = g.Outcome, &g.Score
		if g.Outcome != trace.GradeVerified {
			ep.Reason, ep.Message = "grade_"+g.Outcome, g.Message
		}
	}
	if errors.Is(context.Cause(ctx), session.ErrInterrupted) && res.Outcome == trace.Interrupted {
		ep.Category = Interrupted
	}
}

// episodeConfig is the session of one of t's episodes, without what
// differs per episode (run ID, agent, trace, progress).
func episodeConfig(t *Task, b *app.Bundle, o Options) (session.Config, error) {
	env := o.Env
	if t.Image != "" {
		env.Image = t.Image
	}
	if t.Screen != (observe.Screen{}) {
		env.Screen = t.Screen
	}
	// A task's own policy that names elements needs the tree, as a
	// script that names them does.
	env.A11y = env.A11y || t.A11y || t.scripted() && t.script.NeedsA11y() || t.Policy != nil && t.Policy.NeedsTree()
	env.Observe = env.Observe || t.Observe || t.scripted() && t.script.NeedsObserver() || t.Grade != nil && t.Grade.NeedsObserver()
	var err error
	if env.Network, err = t.network(o.Env.Network, &b.Manifest); err != nil {
		return session.Config{}, err
	}
	bundle := *b // per-episode copy: env and args may differ per task only
	if len(t.Env) > 0 || len(o.AppEnv) > 0 {
		bundle.Manifest.Env = map[string]string{}
		maps.Copy(bundle.Manifest.Env, b.Manifest.Env)
		maps.Copy(bundle.Manifest.Env, t.Env)
		maps.Copy(bundle.Manifest.Env, o.AppEnv)
	}
	timeout, maxSteps := t.Timeout, t.MaxSteps
	if timeout == 0 {
		timeout = o.Timeout
	}
	if maxSteps == 0 {
		maxSteps = o.MaxSteps
		if t.scripted() {
			maxSteps = script.MaxSteps
		}
	}
	name, actor := "script", trace.ActorScript
	opts := map[string]string{"file": t.Script}
	if !t.scripted() {
		name, actor, opts = t.Agent, trace.ActorAgent, t.Options
	}
	return session.Config{
		Backend:      o.Backend,
		Env:          env,
		App:          &bundle,
		AgentInfo:    trace.AgentInfo{Name: name, Options: opts},
		Actor:        actor,
		Task:         t.Task,
		Inputs:       t.inputs,
		Collect:      t.TaskFiles(b).Collect,
		MaxSteps:     maxSteps,
		Timeout:      timeout,
		LogCap:       o.LogCap,
		StartTimeout: o.StartTimeout,
		ReadyTimeout: o.ReadyTimeout,
		Policy:       t.policy(o),
		Approver:     o.Approver,
		MaxRate:      o.MaxRate,
		Clock:        t.clock(o),
		Tree:         o.Tree,
		Marks:        o.Marks,
		Settle:       o.Settle,
		Verbose:      o.Verbose,
		Grader:       grader(t.Grade),
		Indexer:      o.Indexer,
		Vault:        o.Vault,
	}, nil
}

// grader is a task's grade as the session's Grader (a nil Spec is no
// grader, not a typed nil).
func grader(g *grade.Spec) session.Grader {
	if g == nil {
		return nil
	}
	return g
}

func (s *Summary) aggregate(suite *Suite) {
	by := map[string]*TaskSummary{}
	for _, t := range suite.Tasks {
		ts := &TaskSummary{Name: t.Name, Reasons: map[string]int{}}
		by[t.Name] = ts
	}
	total := TaskSummary{Name: "total", Reasons: map[string]int{}}
	for _, ep := range s.Episodes {
		for _, ts := range []*TaskSummary{by[ep.Task], &total} {
			ts.Episodes++
			switch ep.Category {
			case Passed:
				ts.Passed++
			case Failed:
				ts.Failed++
			case Malformed:
				ts.Malformed++
			case Infrastructure:
				ts.Infrastructure++
			case Interrupted:
				ts.Interrupted++
			case Skipped:
				ts.Skipped++
			}
			if ep.Category != Passed && ep.Category != Skipped && ep.Reason != "" {
				ts.Reasons[ep.Reason]++
			}
			if ep.Category != Skipped {
				ts.MeanSteps += float64(ep.Steps)
				ts.MeanDurationMS += ep.DurationMS
			}
		}
	}
	for _, ts := range append(mapValues(by, suite), &total) {
		ran := ts.Episodes - ts.Skipped
		if ran > 0 {
			ts.MeanSteps /= float64(ran)
			ts.MeanDurationMS /= float64(ran)
		}
		if ran > 0 {
			// Of the episodes that ran: one skipped (an interrupted eval
			// never started it) neither passed nor failed.
			ts.PassRate = float64(ts.Passed) / float64(ran)
		}
		if len(ts.Reasons) == 0 {
			ts.Reasons = nil
		}
	}
	for _, t := range suite.Tasks {
		s.Tasks = append(s.Tasks, *by[t.Name])
	}
	s.Totals = total
}

func mapValues(m map[string]*TaskSummary, s *Suite) []*TaskSummary {
	var out []*TaskSummary
	for _, t := range s.Tasks {
		out = append(out, m[t.Name])
	}
	return out
}

// NotPassed says what did not pass, by kind and reason: "1 failed,
// 2 infrastructure (check_failed ×1, environment ×2)"; "" when all passed.
func (t TaskSummary) NotPassed() string {
	var kinds []string
	for _, k := range []struct {
		n    int
		name string
	}{{t.Failed, Failed}, {t.Malformed, Malformed}, {t.Infrastructure, Infrastructure}, {t.Interrupted, Interrupted}, {t.Skipped, Skipped}} {
		if k.n > 0 {
			kinds = append(kinds, fmt.Sprintf("%d %s", k.n, k.name))
		}
	}
	var reasons []string
	for r, n := range t.Reasons {
		reasons = append(reasons, fmt.Sprintf("%s ×%d", r, n))
	}
	sort.Strings(reasons)
	detail := strings.Join(kinds, ", ")
	if len(reasons) > 0 {
		detail += " (" + strings.Join(reasons, ", ") + ")"
	}
	return detail
}

// PrintTable writes the per-task summary table.
func (s *Summary) PrintTable(w io.Writer) {
	fmt.Fprintf(w, "\n%-20s %8s %9s %10s %10s  %s\n", "task", "passed", "pass rate", "mean steps", "mean time", "not passed, by kind")
	row := func(t TaskSummary) {
		detail := termsafe.Line(t.NotPassed())
		if detail == "" {
			detail = "-"
		}
		// passed is of the episodes that ran, as the pass rate; the
		// skipped are told with what did not pass.
		fmt.Fprintf(w, "%-20s %8s %8.0f%% %10.1f %10s  %s\n", termsafe.Line(t.Name), fmt.Sprintf("%d/%d", t.Passed, t.Episodes-t.Skipped),
			100*t.PassRate, t.MeanSteps, seconds(t.MeanDurationMS), detail)
	}
	for _, t := range s.Tasks {
		row(t)
	}
	if len(s.Tasks) > 1 {
		row(s.Totals)
	}
	fmt.Fprintf(w, "\n%s in %v at --parallel %d\n", plural.S(s.Totals.Episodes, "episode"), (time.Duration(s.DurationMS) * time.Millisecond).Round(100*time.Millisecond), s.Parallel)
}

// seconds is an episode's duration in the one format of eval's table and
// progress lines: seconds with two decimals (0.90s, 1.50s, 2.00s), never
// 900ms beside 1.5s and 2s.
func seconds(ms float64) string {
	return fmt.Sprintf("%.2fs", ms/1000)
}

// clock is the task's app clock: its own (clock, clock_step), else
// eval's --clock.
func (t *Task) clock(o Options) session.Clock {
	if t.Clock != nil {
		return *t.Clock
	}
	return o.Clock
}

// policy is the task's gate: its own (policy: FILE), else eval's
// --policy, else its app manifest's.
func (t *Task) policy(o Options) *policy.Policy {
	switch {
	case t.Policy != nil:
		return t.Policy
	case o.Policy != nil:
		return o.Policy
	}
	return t.manifestPolicy
}

// ModelQueue is summary.json's account of the queue of model calls.
type ModelQueue struct {
	// Concurrency is --model-concurrency: the requests in flight at most.
	Concurrency int `json:"concurrency"`
	// Requests is how many attempts went through it; WaitedMS how long
	// they waited for a turn in all (each step's queue_ms in its trace).
	Requests int64   `json:"requests"`
	WaitedMS float64 `json:"waited_ms"`
}

// finishedEpisode reads the trace of ep in an eval being resumed: a
// finished one fills ep (true); a crashed one, and one the infrastructure
// ended, is moved aside (to NNN.crashed-N, kept for agentbox resume or a
// look) and one that never started is left to run (false). A trace still being written is an
// error: another agentbox runs that eval.
func finishedEpisode(ep *Episode, out string) (bool, error) {
	rel := filepath.Join(ep.Task, fmt.Sprintf("%03d", ep.N))
	dir := filepath.Join(out, rel)
	run, err := trace.ReadRun(dir)
	if err != nil {
		if _, serr := os.Stat(filepath.Join(dir, trace.RunFile)); errors.Is(serr, os.ErrNotExist) {
			// Never started, or died before its run.json: start it afresh.
			return false, moveAside(dir)
		}
		return false, err
	}
	lv, err := trace.CheckLiveness(dir)
	if err != nil {
		return false, err
	}
	switch lv {
	case trace.Live, trace.Resuming:
		return false, fmt.Errorf("%s is being written by a live agentbox: is the eval still running?", dir)
	case trace.Crashed:
		if run.Status != trace.StatusComplete {
			if err := trace.MarkCrashed(dir); err != nil {
				return false, err
			}
		}
		return false, moveAside(dir)
	}
	res := session.Result{Outcome: run.Outcome, Reason: run.Reason, Message: run.Message, Steps: run.Steps, Grade: run.Grade}
	if categorize(res) == Infrastructure {
		// The infrastructure ended it (a sandbox that would not start, a
		// node lost or drained under it): it never had its run; it runs
		// again, its trace moved aside.
		return false, moveAside(dir)
	}
	ep.Trace = filepath.ToSlash(rel)
	ep.started = run.Started
	ep.Category = categorize(res)
	ep.Outcome, ep.Reason, ep.Message, ep.Steps, ep.DurationMS = run.Outcome, run.Reason, run.Message, run.Steps, run.DurationMS
	if g := run.Grade; g != nil {
		ep.Grade, ep.Score = g.Outcome, &g.Score
		if g.Outcome != trace.GradeVerified {
			ep.Reason, ep.Message = "grade_"+g.Outcome, g.Message
		}
	}
	return true, nil
}

// moveAside renames dir, when it exists, to the first free
// dir.crashed-N, so the episode's trace can be written anew.
func moveAside(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	for n := 1; n < 1000; n++ {
		to := fmt.Sprintf("%s.crashed-%d", dir, n)
		if _, err := os.Stat(to); errors.Is(err, os.ErrNotExist) {
			return os.Rename(dir, to)
		}
	}
	return fmt.Errorf("%s: no free name to move it aside", dir)
}
