// Package agent defines the decision-maker: anything that turns an
// observation into the next action. Agents never see Docker or X11; they get
// pixels, the desktop's windows and the app's output, and answer with
// backend-neutral actions.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/suggest"
	"github.com/codegirl-games/agentbox/observe"
)

// Decision is an agent's answer to one observation.
type Decision struct {
	Action action.Action
	// Message is the agent's own words about the decision (recorded).
	Message string
	// Meta is recorded with the step: model, token usage, raw exchanges.
	Meta map[string]any
	// Reason, for an unsuccessful done, says why the run ends (recorded as
	// the run's reason): ReasonCheckFailed, ReasonActionFailed,
	// ReasonDiverged; empty means the
	// agent gave up.
	Reason string
	// Files are written into the trace next to the step (raw model
	// exchanges, with images replaced by references to the screenshots);
	// the step's record lists where. Keys are short names such as
	// "request.json".
	Files map[string][]byte
}

// ErrMalformed is wrapped by an agent's error when its decision-maker kept
// answering with something that is not a valid action (after being told
// what was wrong a bounded number of times). The run ends with outcome
// error and reason malformed_answer.
var ErrMalformed = errors.New("malformed answer")

// ReasonCheckFailed is the Reason of a done that ends the run because a
// check did not hold.
const ReasonCheckFailed = "check_failed"

// ReasonActionFailed is the Reason of a done that ends the run because an
// action the agent was bound to see succeed failed (a script's step that
// is not optional).
const ReasonActionFailed = "action_failed"

// ReasonDiverged is the Reason of a done that ends a replay because the
// screen differs from the recording.
const ReasonDiverged = "diverged"

// Agent decides one action at a time. Decide is called from one goroutine.
type Agent interface {
	Decide(ctx context.Context, obs *observe.Observation) (Decision, error)
}

// Task is what an agent is asked to do, given once before the first step.
type Task struct {
	Text          string
	Width, Height int // the screen
	MaxSteps      int
}

// Starter is implemented by agents that want the task before the first
// observation.
type Starter interface {
	Start(ctx context.Context, task Task) error
}

// Closer is implemented by agents holding resources (processes, clients).
// The session closes the agent when its run ends (after the loop, while
// the sandbox is torn down), so stopping an agent program is part of the
// run; whoever made the agent may close it again: Close must be safe to
// call more than once.
type Closer interface {
	Close() error
}

// Preflighter is implemented by agents that depend on something outside
// agentbox (a model API). Preflight checks, with one cheap request, that
// it answers and takes the credentials, so that a wrong URL or a refused
// key ends the command before any sandbox is created. An error wrapping
// ErrUnreachable means nothing answered (an infrastructure error, exit 3);
// any other error is a configuration error (exit 2).
type Preflighter interface {
	Preflight(ctx context.Context) error
}

// ErrUnreachable is wrapped by a Preflight error when the agent's service
// did not answer at all (connection refused, no route, timeout).
var ErrUnreachable = errors.New("the agent's service is unreachable")

// ProgressSetter is implemented by agents that have something to tell the
// user while they decide (a model request that failed and is retried).
// Whoever runs the agent hands it a writer before the run (the CLI: its
// stderr); the agent writes whole lines to it, from Decide's goroutine.
type ProgressSetter interface {
	SetProgress(w io.Writer)
}

// TreeWanter is implemented by agents that want the accessibility tree
// with some observations only (the script agent, before a check about
// an element). WantsTree is asked before each observation; the tree is
// read only when the sandbox has its accessibility bus.
type TreeWanter interface {
	WantsTree() bool
}

// Rehearser is implemented by agents whose state is a conversation with
// a model (openai, openai-chat, anthropic). agentbox resume continues a
// crashed run with its recorded history this way: at every replayed step
// the agent is given that step's recorded exchanges (Rehearse: the
// exchange.json its decision attached, nil when it made no request) and
// decides again on the replayed observation, its model requests answered
// from the recording instead of the service; Rehearsed ends the step and
// says whether the requests were the recorded ones. The agent's history
// is then what it was when the run stopped, and its next request (at the
// seam) carries it.
type Rehearser interface {
	Rehearse(recorded []byte) error
	Rehearsed() error
}

// Options are an agent's settings from the command line (--agent-opt k=v).
type Options map[string]string

// Factory makes an agent from its options. It must reject unknown options
// with an error that names them.
type Factory func(opts Options) (Agent, error)

var (
	mu        sync.RWMutex
	factories = map[string]Factory{}
)

// Register makes an agent available by name; it panics on duplicates.
func Register(name string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := factories[name]; dup {
		panic("agent: Register called twice for " + name)
	}
	factories[name] = f
}

// Names lists registered agents, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	names := make([]string, 0, len(factories))
	for n := range factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// New makes the named agent.
func New(name string, opts Options) (Agent, error) {
	mu.RLock()
	f, ok := factories[name]
	mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("unknown agent %q%s (known: %s)", name, suggest.Hint(name, Names()), strings.Join(Names(), ", "))
	}
	a, err := f(opts)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", name, err)
	}
	return a, nil
}

// CheckOptions returns an error naming the first option not in known.
func CheckOptions(opts Options, known ...string) error {
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		found := false
		for _, kn := range known {
			if k == kn {
				found = true
			}
		}
		if !found {
			if len(known) == 0 {
				return fmt.Errorf("unknown option %q: this agent takes no options", k)
			}
			return fmt.Errorf("unknown option %q (known: %s)", k, strings.Join(known, ", "))
		}
	}
	return nil
}
