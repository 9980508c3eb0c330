package script

import (
	"testing"

	"github.com/codegirl-games/agentbox/observe"
)

// TestNetworkCheck: expect network matches a denied or allowed connection
// by host, host:port or glob, and ignores limit events.
func TestNetworkCheck(t *testing.T) {
	evs := []observe.NetEvent{
		{Kind: "http", Method: "GET", Dest: "evil.test:80", Reason: "no rule"},
		{Kind: "connect", Method: "CONNECT", Dest: "api.example.com:443", Allowed: true, Rule: "*.example.com"},
		{Kind: "forward", Dest: "[::1]:8080", Allowed: true},
		{Kind: "limit", Reason: "rate"},
	}
	for _, c := range []struct {
		dest   string
		denied bool
		ok     bool
	}{
		{"evil.test", true, true},
		{"evil.test:80", true, true},
		{"evil.test:443", true, false},
		{"evil.test", false, false}, // it was denied, not allowed
		{"*.example.com", false, true},
		{"api.example.com:443", false, true},
		{"*.example.com", true, false},
		{"::1", false, true},
		{"*", true, true},
		{"other.test", true, false},
	} {
		chk := &Check{Kind: CheckNetwork, NetDest: c.dest, NetDenied: c.denied}
		v := chk.evaluate(world{obs: &observe.Observation{}, net: evs})
		if v.OK != c.ok {
			t.Errorf("%s denied=%v: %+v, want ok %v", c.dest, c.denied, v, c.ok)
		}
	}
	v := (&Check{Kind: CheckNetwork, NetDest: "x", NetDenied: true}).evaluate(world{obs: &observe.Observation{}})
	if v.OK || v.Seen != "0 connections, none matching" {
		t.Errorf("no connections: %+v", v)
	}
}
