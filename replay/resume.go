package replay

import (
	"context"
	"fmt"
	"io"
	"maps"

	"github.com/codegirl-games/agentbox/agent"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// ResumeAgent continues a crashed run (agentbox resume): it replays the
// recording's steps up to Upto (its last completed step) with a replay
// agent, compares the screen at the seam (step Upto+1) with the recorded
// one when the recording has it, and from there hands every decision to
// Next, the run's own agent. A divergence ends the run as a replay's
// does (done, unsuccessful, reason diverged) unless Force, which goes on
// and lists it in Forced.
type ResumeAgent struct {
	// Next is the agent that goes on after the seam.
	Next agent.Agent
	// Force goes on past divergences.
	Force bool
	// Replayed, when set, is called with each replayed step and the
	// observation it was replayed at (a script's remembered frames).
	Replayed func(rec *trace.Step, obs *observe.Observation)
	// Seam, when set, is called once, at the seam, before Next decides
	// (a script is positioned there); an error ends the run.
	Seam func() error

	rep    *Agent
	src    *trace.Trace
	upto   int
	seam   *trace.Step // the recording's step Upto+1, when it has one
	last   int         // the last step decided
	handed bool

	// Rehearsed counts the replayed steps a model agent decided again
	// from the recording (agent.Rehearser).
	Rehearsed int

	// Forced lists the divergences Force went past.
	Forced []string
	// Divergence is the divergence that ended the run (nil: none did).
	Divergence *Divergence
}

// NewResumeAgent makes the agent of a resume of src that joins after step
// upto (trace.LastCompleted).
func NewResumeAgent(src *trace.Trace, upto int, rules Rules, timing Timing, next agent.Agent) *ResumeAgent {
	src = episodeOnly(src)
	head := *src
	head.Steps = nil
	var seam *trace.Step
	for i := range src.Steps {
		switch st := src.Steps[i]; {
		case st.Step <= upto:
			head.Steps = append(head.Steps, st)
		case st.Step == upto+1:
			seam = &src.Steps[i]
		}
	}
	head.Final = nil
	return &ResumeAgent{Next: next, rep: NewAgent(&head, rules, timing), src: src, upto: upto, seam: seam}
}

// Upto is the last recorded step the resume replays.
func (r *ResumeAgent) Upto() int { return r.upto }

// Replay is the replay agent of the steps before the seam (its
// comparisons, how many it replayed).
func (r *ResumeAgent) Replay() *Agent { return r.rep }

// SetPeek lets the replay look at the screen between steps (Session.Peek),
// as a replay does.
func (r *ResumeAgent) SetPeek(p func(context.Context) (*observe.Frame, environment.State, error)) {
	r.rep.Peek = p
}

// Start implements agent.Starter: Next gets the task (an exec agent's
// program starts, told it resumes).
func (r *ResumeAgent) Start(ctx context.Context, task agent.Task) error {
	if s, ok := r.Next.(agent.Starter); ok {
		return s.Start(ctx, task)
	}
	return nil
}

// Close implements agent.Closer.
func (r *ResumeAgent) Close() error {
	_ = r.rep.Close()
	if c, ok := r.Next.(agent.Closer); ok {
		return c.Close()
	}
	return nil
}

// WantsTree implements agent.TreeWanter: Next's, from the seam on.
func (r *ResumeAgent) WantsTree() bool {
	if w, ok := r.Next.(agent.TreeWanter); ok && r.last >= r.upto {
		return w.WantsTree()
	}
	return false
}

// SetProgress implements agent.ProgressSetter for Next.
func (r *ResumeAgent) SetProgress(w io.Writer) {
	if p, ok := r.Next.(agent.ProgressSetter); ok {
		p.SetProgress(w)
	}
}

// Decide implements agent.Agent.
func (r *ResumeAgent) Decide(ctx context.Context, obs *observe.Observation) (agent.Decision, error) {
	r.last = obs.Step
	if r.handed {
		return r.Next.Decide(ctx, obs)
	}
	if obs.Step <= r.upto {
		return r.replayStep(ctx, obs)
	}
	// The seam: the last replayed step's comparison, then this screen's
	// against the recording's (its intent was written, its result not).
	if d, err := r.rep.settle(ctx); err != nil {
		return agent.Decision{}, err
	} else if d != nil {
		if dec, stop := r.diverged(d); stop {
			return dec, nil
		}
	}
	if r.seam != nil && r.seam.Observation != nil {
		r.rep.start(obs, r.seam.Observation, false)
		if d, err := r.rep.settle(ctx); err != nil {
			return agent.Decision{}, err
		} else if d != nil {
			if dec, stop := r.diverged(d); stop {
				return dec, nil
			}
		}
	}
	if r.Seam != nil {
		if err := r.Seam(); err != nil {
			return agent.Decision{}, fmt.Errorf("resume at step %d: %w", obs.Step, err)
		}
	}
	r.handed = true
	return r.Next.Decide(ctx, obs)
}

// replayStep replays one recorded step: the replay agent's decision, with
// the recording's meta (a script's position, so that this trace can be
// resumed in turn).
func (r *ResumeAgent) replayStep(ctx context.Context, obs *observe.Observation) (agent.Decision, error) {
	d, err := r.rep.Decide(ctx, obs)
	if err != nil {
		return d, err
	}
	rec := r.rep.byStep[obs.Step]
	if d.Reason == agent.ReasonDiverged && r.rep.Divergence != nil {
		dec, stop := r.diverged(r.rep.Divergence)
		if stop {
			return dec, nil
		}
		// Forced: the recorded action all the same.
		r.rep.Divergence = nil
		if rec == nil || rec.Action == nil {
			return d, nil
		}
		r.rep.Replayed++
		d = agent.Decision{Action: *rec.Action, Message: "replayed (forced past a divergence)"}
	}
	if rec != nil {
		if rec.Decision != nil && rec.Decision.Meta != nil {
			d.Meta = maps.Clone(rec.Decision.Meta)
		}
		if files, err := r.rehearse(ctx, obs, rec); err != nil {
			return agent.Decision{}, err
		} else if files != nil {
			d.Files = files
		}
		if r.Replayed != nil {
			r.Replayed(rec, obs)
		}
	}
	if d.Meta == nil {
		d.Meta = map[string]any{}
	}
	d.Meta["resumed"] = "replayed"
	return d, nil
}

// MaxExchange bounds a recorded step's exchange.json that a model agent
// rehearses.
const MaxExchange = 64 << 20

// rehearse has a model agent (agent.Rehearser) decide the replayed step
// rec again on obs, its requests answered by the step's recorded
// exchanges, so that its conversation is the recorded one at the seam.
// It returns the agent's files (the exchanges again, for this trace:
// a resumed run can be resumed in turn). The rehearsed decision must be
// the recorded action: another one means the history was not rebuilt.
func (r *ResumeAgent) rehearse(ctx context.Context, obs *observe.Observation, rec *trace.Step) (map[string][]byte, error) {
	rh, ok := r.Next.(agent.Rehearser)
	if !ok || rec.Action == nil || (rec.Actor != "" && rec.Actor != trace.ActorAgent) {
		return nil, nil
	}
	var doc []byte
	if rec.Decision != nil {
		if p := rec.Decision.Files[ExchangeFile]; p != "" {
			b, err := trace.ReadFile(r.src.Dir, p, MaxExchange)
			if err != nil {
				return nil, fmt.Errorf("resume: step %d's recorded model exchanges: %w", rec.Step, err)
			}
			doc = b
		}
	}
	if err := rh.Rehearse(doc); err != nil {
		return nil, fmt.Errorf("resume: step %d: %w", rec.Step, err)
	}
	d, err := r.Next.Decide(ctx, obs)
	if err2 := rh.Rehearsed(); err == nil {
		err = err2
	}
	if err != nil {
		return nil, fmt.Errorf("resume: rebuilding the agent's conversation at step %d: %w", rec.Step, err)
	}
	if got, want := d.Action.String(), rec.Action.String(); got != want {
		return nil, fmt.Errorf("resume: rebuilding the agent's conversation at step %d: it decided %s, the recording %s", rec.Step, got, want)
	}
	r.Rehearsed++
	return d.Files, nil
}

// ExchangeFile is the name under which a model agent attaches a step's
// exchanges (trace.Decision.Files).
const ExchangeFile = "exchange.json"

// diverged is what a divergence does: end the run (stop) or, forced, be
// listed and let it go on.
func (r *ResumeAgent) diverged(d *Divergence) (agent.Decision, bool) {
	if !r.Force {
		r.Divergence = d
		return d.decision(), true
	}
	r.Forced = append(r.Forced, d.Message)
	return agent.Decision{}, false
}

// WriteDivergence saves the divergence that ended the run as a replay
// does (recorded, replayed, diff and side by side under DIR/replay/).
func (r *ResumeAgent) WriteDivergence(dir string, rules Rules) error {
	d := r.Divergence
	if d == nil || d.want == nil {
		return nil
	}
	return writeDivergence(dir, r.src, d, rules)
}
