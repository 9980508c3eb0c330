package environment

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Auto is the backend name that picks a backend for this machine: the first
// of the order given to Resolve that is registered and whose probe passes.
const Auto = "auto"

// AutoCandidates is the order in which Auto considers backends: order,
// the preference of whoever resolves Auto (the CLI: Docker when a daemon
// answers, else the local backend); empty, every registered backend, by
// name.
func AutoCandidates(order []string) []string {
	if len(order) > 0 {
		return order
	}
	return Backends()
}

// AutoProbeTimeout bounds each backend's probe when resolving Auto.
const AutoProbeTimeout = time.Second

// Prober is implemented by backends that can tell quickly (well within a
// second) whether they can run here: a daemon answers, a binary is
// installed. A backend without it counts as available.
type Prober interface {
	Probe(ctx context.Context) error
}

// Resolve makes the backend named name with opts. For Auto it probes the
// backends of AutoCandidates(order) in turn and returns the first available
// one; note then says what was chosen and why ("local (docker: no daemon
// answers …)"). An unknown name is an error that does not wrap
// ErrUnavailable; no available backend is one that does.
func Resolve(ctx context.Context, name string, order []string, opts Options) (b Backend, note string, err error) {
	if name != Auto {
		b, err := Lookup(name, opts)
		return b, "", err
	}
	var skipped []string
	order = AutoCandidates(order)
	for _, n := range order {
		b, err := Lookup(n, opts)
		if err != nil {
			continue // not compiled in
		}
		if p, ok := b.(Prober); ok {
			pctx, cancel := context.WithTimeout(ctx, AutoProbeTimeout)
			err = p.Probe(pctx)
			cancel()
			if err != nil {
				skipped = append(skipped, n+": "+oneLine(err))
				continue
			}
		}
		note = n
		if len(skipped) > 0 {
			note += " (" + strings.Join(skipped, "; ") + ")"
		}
		return b, note, nil
	}
	if len(order) == 0 {
		return nil, "", fmt.Errorf("%w: --backend auto: no backend is built in", ErrUnavailable)
	}
	if len(skipped) == 0 {
		return nil, "", fmt.Errorf("%w: --backend auto: none of %s is built in", ErrUnavailable, strings.Join(order, ", "))
	}
	return nil, "", fmt.Errorf("%w: --backend auto found no backend that can run here: %s; see `agentbox doctor`",
		ErrUnavailable, strings.Join(skipped, "; "))
}

// oneLine shortens an error for a one-line note: its first line without
// long parenthesised details, up to the first "; ".
func oneLine(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, ErrUnavailable.Error()+": ")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	var b strings.Builder
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			if depth == 0 {
				start = i
			}
			depth++
		case ')':
			if depth--; depth == 0 && i-start <= 40 {
				b.WriteString(s[start : i+1])
			}
			continue
		}
		if depth == 0 {
			b.WriteRune(r)
		}
	}
	s = strings.Join(strings.Fields(b.String()), " ")
	if i := strings.Index(s, "; "); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}
