package session

import (
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/keysym"
	"github.com/codegirl-games/agentbox/internal/vault"
	"github.com/codegirl-games/agentbox/observe"
)

// The run's vault (Config.Vault): type_secret actions are typed with a
// secret's value, looked up here as the action is performed, and every
// piece of text the app produces — output, window titles, the
// accessibility tree, action results — has the values replaced with
// [secret:NAME] where it enters the session, before the trace, the
// listeners (live page, API, MCP) or the agent get it.

// redaction is the sink's redactor with one stream per output stream, so
// that a value split between two chunks of output is still replaced.
type redaction struct {
	r       *vault.Redactor
	mu      sync.Mutex // guards streams; not ranked: nothing is taken under it
	streams map[observe.Stream]*vault.Stream
}

func newRedaction(v *vault.Vault) *redaction {
	r := v.Redactor()
	if r == nil {
		return nil
	}
	return &redaction{r: r, streams: map[observe.Stream]*vault.Stream{}}
}

// output returns what of a stream's chunk can be passed on, redacted.
func (x *redaction) output(stream observe.Stream, data []byte) []byte {
	if x == nil {
		return data
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	st := x.streams[stream]
	if st == nil {
		st = x.r.Stream()
		x.streams[stream] = st
	}
	return st.Write(data)
}

// flush returns what the streams held back: the app has exited.
func (x *redaction) flush() map[observe.Stream][]byte {
	if x == nil {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	out := map[observe.Stream][]byte{}
	for name, st := range x.streams {
		if b := st.Flush(); len(b) > 0 {
			out[name] = b
		}
	}
	return out
}

func (x *redaction) str(s string) string {
	if x == nil {
		return s
	}
	return x.r.String(s)
}

// windows returns ws with the titles redacted (a copy when one changed).
func (x *redaction) windows(ws []observe.Window) []observe.Window {
	if x == nil {
		return ws
	}
	var out []observe.Window
	for i, w := range ws {
		if t := x.r.String(w.Title); t != w.Title {
			if out == nil {
				out = append([]observe.Window(nil), ws...)
			}
			out[i].Title = t
		}
	}
	if out == nil {
		return ws
	}
	return out
}

// tree redacts the elements' names and texts in place (the tree is the
// session's own copy).
func (x *redaction) tree(t *observe.Tree) {
	if x == nil || t == nil {
		return
	}
	for i := range t.Elements {
		e := &t.Elements[i]
		e.Name, e.Text = x.r.String(e.Name), x.r.String(e.Text)
	}
	t.Note = x.r.String(t.Note)
}

// result redacts what an action's result carries of the app's text.
func (x *redaction) result(res *action.Result) {
	if x == nil || res == nil {
		return
	}
	res.Error = x.r.String(res.Error)
	if res.Target != nil {
		res.Target.Name = x.r.String(res.Target.Name)
	}
}

// err redacts an error's text, keeping what it wraps for errors.Is.
func (x *redaction) err(err error) error {
	if x == nil || err == nil {
		return err
	}
	if msg := x.r.String(err.Error()); msg != err.Error() {
		return &redactedError{msg, err}
	}
	return err
}

type redactedError struct {
	msg   string
	cause error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.cause }

// network redacts a connection's names.
func (x *redaction) network(ev observe.NetEvent) observe.NetEvent {
	if x == nil {
		return ev
	}
	ev.Dest, ev.SNI, ev.Reason = x.r.String(ev.Dest), x.r.String(ev.SNI), x.r.String(ev.Reason)
	return ev
}

// checkSecret refuses a type_secret naming no secret of the vault (an
// invalid step: a failed result naming the secret, the run goes on).
func (s *Session) checkSecret(a action.Action) error {
	if a.Kind != action.TypeSecret || s.cfg.Vault.Has(a.Secret) {
		return nil
	}
	if s.cfg.Vault.Len() == 0 {
		return &action.Error{Kind: a.Kind, Field: "secret", Msg: fmt.Sprintf("no secret %s: this run has no vault (--vault)", a.Secret)}
	}
	return &action.Error{Kind: a.Kind, Field: "secret", Msg: fmt.Sprintf("no secret %s in the vault", a.Secret)}
}

// unseal turns a type_secret into the type action the sandbox performs,
// with the value; the result is non-nil when it cannot be typed (a
// failed result that names the secret and shows nothing of its value).
// The returned action must not be recorded or shown.
func (s *Session) unseal(a action.Action) (action.Action, *action.Result) {
	if a.Kind != action.TypeSecret {
		return a, nil
	}
	val, ok := s.cfg.Vault.Value(a.Secret)
	if !ok { // checked before the step was recorded; the vault does not change
		return a, &action.Result{Error: fmt.Sprintf("type_secret: no secret %s in the vault", a.Secret)}
	}
	if n := utf8.RuneCountInString(val); !utf8.ValidString(val) || n > s.limits.MaxText {
		return a, &action.Result{Error: fmt.Sprintf("type_secret: secret %s cannot be typed: its value is not valid UTF-8 or longer than %d characters", a.Secret, s.limits.MaxText)}
	}
	for _, r := range val {
		if _, err := keysym.ForRune(r); err != nil {
			return a, &action.Result{Error: fmt.Sprintf("type_secret: secret %s cannot be typed: it holds a character no key types", a.Secret)}
		}
	}
	return action.Action{Kind: action.Type, Text: val, DelayMS: a.DelayMS, Target: a.Target}, nil
}

// activity redacts what the observer recorded of the app's words: its
// command lines and paths (the events are the session's own copy).
func (x *redaction) activity(evs []observe.ActivityEvent) []observe.ActivityEvent {
	if x == nil {
		return evs
	}
	for i := range evs {
		e := &evs[i]
		for j := range e.Argv {
			e.Argv[j] = x.r.String(e.Argv[j])
		}
		e.Path, e.From = x.r.String(e.Path), x.r.String(e.From)
	}
	return evs
}
