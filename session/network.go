package session

import (
	"strconv"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/netpolicy"
	"github.com/codegirl-games/agentbox/observe"
	"github.com/codegirl-games/agentbox/trace"
)

// maxPendingNet bounds the connections one observation shows the agent;
// older ones are dropped and counted (network.jsonl has them all).
const maxPendingNet = 100

var _ environment.NetRecorder = (*sink)(nil)

// Network implements environment.NetRecorder: the connection goes to
// network.jsonl and to the next observation.
func (s *sink) Network(ev observe.NetEvent) {
	ev = s.secrets.network(ev)
	s.tw.Network(ev)
	s.netMu.Lock()
	defer s.netMu.Unlock()
	s.netPending = append(s.netPending, ev)
	if n := len(s.netPending) - maxPendingNet; n > 0 {
		s.netSkipped += n
		s.netPending = append(s.netPending[:0], s.netPending[n:]...)
	}
}

// takeNetwork returns the connections since the previous call, with a
// limit event first that counts those not shown.
func (s *sink) takeNetwork() []observe.NetEvent {
	s.netMu.Lock()
	defer s.netMu.Unlock()
	evs := s.netPending
	if s.netSkipped > 0 {
		evs = append([]observe.NetEvent{{Time: time.Now(), Kind: "limit",
			Reason: strconv.Itoa(s.netSkipped) + " earlier connections not shown (network.jsonl has them)"}}, evs...)
		s.netSkipped = 0
	}
	s.netPending = nil
	return evs
}

// networkInfo is run.json's record of the sandbox's network policy; nil
// when it has none.
func networkInfo(p *netpolicy.Policy) *trace.NetworkInfo {
	if !p.Enabled() {
		return nil
	}
	d := p.WithDefaults()
	n := &trace.NetworkInfo{Allow: netpolicy.Texts(d.Allow), Forward: netpolicy.Texts(d.Forward), MaxBytes: d.MaxBytes, MaxConnRate: d.MaxConnRate}
	for name, a := range d.Hosts {
		if n.Resolve == nil {
			n.Resolve = map[string]string{}
		}
		n.Resolve[name] = a.String()
	}
	return n
}
