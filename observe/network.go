package observe

import (
	"strconv"
	"time"
)

// NetEvent is one connection the sandbox's app made or tried through the
// network agentbox gives it (--allow-net, --forward): a line of the
// trace's network.jsonl, and part of the next observation.
type NetEvent struct {
	// Time is when the connection (or request) began.
	Time time.Time `json:"time"`
	// Kind is "http" (a plain HTTP request through the proxy), "connect"
	// (a CONNECT tunnel: HTTPS), "forward" (a connection to a forwarded
	// host service) or "limit" (a limit bit; Reason says which).
	Kind string `json:"kind"`
	// Method is the HTTP method of a proxied request (CONNECT for tunnels).
	Method string `json:"method,omitempty"`
	// Dest is the host and port asked for; Addr the address connected to.
	Dest string `json:"dest,omitempty"`
	Addr string `json:"addr,omitempty"`
	// SNI is the server name of a tunnel's TLS ClientHello.
	SNI string `json:"sni,omitempty"`
	// Rule is the --allow-net rule (or the --forward) that let it through.
	Rule    string `json:"rule,omitempty"`
	Allowed bool   `json:"allowed"`
	// Reason says why it was denied or cut short.
	Reason string `json:"reason,omitempty"`
	// Status is the HTTP status the proxy answered a plain request with.
	Status int `json:"status,omitempty"`
	// BytesUp went from the sandbox to the destination, BytesDown back.
	BytesUp    int64   `json:"bytes_up"`
	BytesDown  int64   `json:"bytes_down"`
	DurationMS float64 `json:"duration_ms,omitempty"`
}

// Denied reports whether the connection was refused or cut by a limit.
func (e NetEvent) Denied() bool { return !e.Allowed }

// String is one line for people and models: "denied CONNECT evil.test:443
// (no --allow-net rule matches)", "allowed GET example.com:80 by
// example.com (1.2 kB up, 5 kB down)".
func (e NetEvent) String() string {
	if e.Kind == "limit" {
		return "limit: " + e.Reason
	}
	verb := "denied"
	if e.Allowed {
		verb = "allowed"
	}
	what := e.Method
	if e.Kind == "forward" {
		what = "forward"
	}
	s := verb + " " + what + " " + e.Dest
	if e.Allowed && e.Rule != "" {
		s += " by " + e.Rule
	}
	var notes []string
	if e.Reason != "" {
		notes = append(notes, e.Reason)
	}
	if e.BytesUp > 0 || e.BytesDown > 0 {
		notes = append(notes, strconv.FormatInt(e.BytesUp, 10)+" bytes up, "+strconv.FormatInt(e.BytesDown, 10)+" down")
	}
	if len(notes) > 0 {
		s += " ("
		for i, n := range notes {
			if i > 0 {
				s += "; "
			}
			s += n
		}
		s += ")"
	}
	return s
}
