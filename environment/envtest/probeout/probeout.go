// Package probeout is what the conformance suite's probe
// (environment/envtest/probe) prints from inside a sandbox, one line
// "KIND {json}" per report, and how a test finds it again.
package probeout

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Report kinds.
const (
	KindPosture = "POSTURE"
	KindEgress  = "EGRESS"
	KindNet     = "NET"
)

// Net is what the net probe reports: the app's proxy variable, and the
// result of each operation it was given ("get=URL" → "200 body…" or
// "error: …").
type Net struct {
	Proxy   string
	Results map[string]string
}

// Posture is what the posture probe reports.
type Posture struct {
	UID, GID    int
	Home        string // $HOME
	UserNS      bool   // uid_map is not the identity of the initial namespace
	CapEff      string
	CapBnd      string
	NoNewPrivs  string
	Seccomp     string
	Interfaces  []string
	Hostname    string
	EnvKeys     []string
	Namespaces  map[string]string // "pid" → "pid:[…]"
	Writes      map[string]string // path → "" or the errno
	TmpBytes    uint64
	ShmBytes    uint64
	ExeOnTmp    bool
	HostPath    string // stat of a host path: "" if absent, else what was found
	DBus        string // connecting to the system bus: "" if it worked
	Processes   int    // processes visible in /proc
	ProcessComm []string
}

// Egress is what the egress probe reports: errors of connections to the
// host (want failures) and to itself (want success: the probe works).
type Egress struct {
	TCPHost  string // TCP to a host address
	UDPHost  string // a UDP datagram to a host address
	TCPLoop  string // TCP to a port listening on the host's loopback
	TCPSelf  string // TCP to a listener of its own on 127.0.0.1
	UDPSelf  string // UDP to itself on 127.0.0.1
	SelfEcho string // what came back over its own TCP connection
	// Localhost is why "localhost" is not a loopback name inside ("" when
	// /etc/hosts maps it to 127.0.0.1 and a lookup gives loopback only).
	Localhost string
}

// Print writes one report line to w.
func Print(w io.Writer, kind string, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "%s %s\n", kind, b)
}

// Find decodes the first report of kind in output into v and reports
// whether there was one.
func Find(output, kind string, v any) (bool, error) {
	for _, l := range strings.Split(output, "\n") {
		if rest, ok := strings.CutPrefix(l, kind+" "); ok {
			return true, json.Unmarshal([]byte(rest), v)
		}
	}
	return false, nil
}
