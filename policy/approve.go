package policy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/termsafe"
)

// Request is one ask, the question to whoever answers asks: may this action run?
type Request struct {
	// ID names the ask within its episode ("1", "2", …).
	ID    string `json:"id"`
	Step  int    `json:"step"`
	Actor string `json:"actor"`
	// Action is the action asked about.
	Action action.Action `json:"action"`
	// Rule names the rule that asks; Sensitive says it is asked every
	// time (an answer "always" is taken as a plain yes).
	Rule      string `json:"rule"`
	Sensitive bool   `json:"sensitive,omitempty"`
	// Element describes the element it acts on, when known.
	Element string `json:"element,omitempty"`
	// Screenshot is the path of a screenshot cropped around where it
	// acts (empty when none was written).
	Screenshot string `json:"screenshot,omitempty"`
}

// Answer is the answer to an ask.
type Answer struct {
	Allow bool
	// Always grants the rule for the rest of the episode (never for a
	// sensitive rule).
	Always bool
	// By says who answered ("tty", "live:NAME", "api", "deny").
	By string
	// Note says why, for an answer no person gave ("timed out").
	Note string
}

// Approver answers asks. Approve blocks until an answer, or until ctx
// ends (the ask's timeout): then the ask is denied.
type Approver interface {
	Approve(ctx context.Context, a Request) (Answer, error)
}

// The names of the approvers --approve takes.
const (
	ApproveTTY  = "tty"
	ApproveDeny = "deny"
	ApproveLive = "live"
	ApproveAPI  = "api"
)

// DenyAll denies every ask without asking anyone (CI's default).
type DenyAll struct{}

// Approve denies.
func (DenyAll) Approve(context.Context, Request) (Answer, error) {
	return Answer{By: ApproveDeny, Note: "--approve deny"}, nil
}

// TTY asks on a terminal: the action, the rule, the element and the
// cropped screenshot's path, then a line: y (yes), n (no), a (always,
// for a rule that is not sensitive). One ask at a time.
type TTY struct {
	mu    sync.Mutex
	out   io.Writer
	lines chan string
	once  sync.Once
	in    io.Reader
}

// NewTTY asks on out and reads answers from in.
func NewTTY(in io.Reader, out io.Writer) *TTY {
	return &TTY{in: in, out: out, lines: make(chan string)}
}

func (t *TTY) start() {
	t.once.Do(func() {
		go func() {
			sc := bufio.NewScanner(t.in)
			for sc.Scan() {
				t.lines <- sc.Text()
			}
			close(t.lines)
		}()
	})
}

// Approve asks and waits for an answer (or ctx).
func (t *TTY) Approve(ctx context.Context, a Request) (Answer, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.start()
	fmt.Fprintf(t.out, "\nagentbox: policy rule %q asks: step %d, %s wants to %s\n", termsafe.Line(a.Rule), a.Step, a.Actor, termsafe.Line(a.Action.String()))
	if a.Element != "" {
		fmt.Fprintf(t.out, "  on %s\n", termsafe.Line(a.Element))
	}
	if a.Screenshot != "" {
		fmt.Fprintf(t.out, "  screenshot: %s\n", a.Screenshot)
	}
	choices := "[y]es / [n]o / [a]lways for this rule"
	if a.Sensitive {
		choices = "[y]es / [n]o (sensitive: asked every time)"
	}
	fmt.Fprintf(t.out, "  allow? %s: ", choices)
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(t.out, "\n  no answer in time: denied")
			return Answer{By: ApproveTTY, Note: "timed out"}, nil
		case l, ok := <-t.lines:
			if !ok {
				fmt.Fprintln(t.out, "\n  the terminal closed: denied")
				return Answer{By: ApproveTTY, Note: "the terminal closed"}, nil
			}
			switch strings.ToLower(strings.TrimSpace(l)) {
			case "y", "yes":
				return Answer{Allow: true, By: ApproveTTY}, nil
			case "n", "no":
				return Answer{By: ApproveTTY}, nil
			case "a", "always":
				if !a.Sensitive {
					return Answer{Allow: true, Always: true, By: ApproveTTY}, nil
				}
			}
			fmt.Fprintf(t.out, "  %s: ", choices)
		}
	}
}

// Waiting is an Approver whose asks wait for an answer given from
// elsewhere — a client of agentbox serve, a person at the live page — by
// the ask's ID. The zero Waiting is ready to use; By names who answers
// in an ask that times out.
type Waiting struct {
	By      string
	mu      sync.Mutex
	pending map[string]chan Answer
}

// Approve implements Approver: it waits for Answer with a's ID, or until
// ctx ends (the ask's timeout: denied).
func (w *Waiting) Approve(ctx context.Context, a Request) (Answer, error) {
	ch := make(chan Answer, 1)
	w.mu.Lock()
	if w.pending == nil {
		w.pending = map[string]chan Answer{}
	}
	w.pending[a.ID] = ch
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.pending, a.ID)
		w.mu.Unlock()
	}()
	select {
	case ans := <-ch:
		return ans, nil
	case <-ctx.Done():
		return Answer{By: w.By, Note: "no answer in time"}, nil
	}
}

// Answer delivers the answer to the ask id; false when no such ask waits
// (answered, timed out, or never asked).
func (w *Waiting) Answer(id string, ans Answer) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch, ok := w.pending[id]
	if !ok {
		return false
	}
	delete(w.pending, id)
	ch <- ans
	return true
}
