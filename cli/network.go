package cli

import (
	"net/netip"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/netpolicy"
)

// networkFlagUses are the flags of the sandbox's network, taken by run and
// eval alike.
func networkFlagUses() map[string]flagUse {
	return map[string]flagUse{
		"allow-net": {[]string(nil), "let the app reach this host through agentbox's recording proxy (repeatable): " +
			"example.com, *.example.com, example.com:443, :443, 203.0.113.7, 10.0.0.0/8:5432; " +
			"a host name never leads to a loopback, private or link-local address unless a rule names the address"},
		"forward": {[]string(nil), "make the host's service HOST:PORT appear inside the sandbox at 127.0.0.1:SANDBOXPORT " +
			"(HOST:PORT[:SANDBOXPORT], repeatable; SANDBOXPORT ≥ 1024, default PORT)"},
		"net-resolve": {[]string(nil), "NAME=ADDRESS: the proxy resolves NAME to ADDRESS, which counts as named by a rule (repeatable)"},
		"net-max-bytes": {"1g", "cap on the bytes of the sandbox's network per run, both directions, every connection; " +
			"at the cap connections are cut and new ones refused (recorded)"},
		"net-max-rate": {netpolicy.DefaultMaxConnRate, "cap on new network connections (and proxied requests) per second; more are refused (recorded)"},
	}
}

// network is the policy the network flags ask for, nil when none gives a
// rule or a forward; every value checked.
func (f *sandboxFlags) network() (*netpolicy.Policy, error) {
	p := &netpolicy.Policy{MaxConnRate: f.netMaxRate}
	if err := addRules(p, f.allowNet); err != nil {
		return nil, err
	}
	for _, s := range f.forward {
		fw, err := netpolicy.ParseForward(s)
		if err != nil {
			return nil, usageErrorf("%v", err)
		}
		p.Forward = append(p.Forward, fw)
	}
	for _, s := range f.netResolve {
		name, addr, err := netpolicy.ParseResolve(s)
		if err != nil {
			return nil, usageErrorf("%v", err)
		}
		if p.Hosts == nil {
			p.Hosts = map[string]netip.Addr{}
		}
		p.Hosts[name] = addr
	}
	maxBytes, err := parseSize("--net-max-bytes", f.netMaxBytes)
	if err != nil {
		return nil, err
	}
	p.MaxBytes = maxBytes
	if err := p.Validate(); err != nil {
		return nil, usageErrorf("%v", err)
	}
	return p, nil
}

// addRules parses --allow-net rules (or a manifest's or suite's allow_net)
// into p.
func addRules(p *netpolicy.Policy, rules []string) error {
	for _, s := range rules {
		r, err := netpolicy.ParseRule(s)
		if err != nil {
			return usageErrorf("--allow-net: %v", err)
		}
		p.Allow = append(p.Allow, r)
	}
	return nil
}

// withRules adds rules (an app manifest's or a suite's allow_net, which
// is named in errors) to the flags' policy; nil when neither has a rule or
// a forward.
func withRules(p *netpolicy.Policy, where string, rules []string) (*netpolicy.Policy, error) {
	out := netpolicy.Policy{MaxBytes: netpolicy.DefaultMaxBytes}
	if p != nil {
		out = *p
		out.Allow = append([]netpolicy.Rule(nil), p.Allow...)
	}
	for _, s := range rules {
		r, err := netpolicy.ParseRule(s)
		if err != nil {
			return nil, usageErrorf("%s: allow_net: %v", where, err)
		}
		out.Allow = append(out.Allow, r)
	}
	if !out.Enabled() {
		return nil, nil
	}
	if err := out.Validate(); err != nil {
		return nil, usageErrorf("%s: %v", where, err)
	}
	return &out, nil
}

// checkNetwork refuses a network for a backend that cannot give one.
func checkNetwork(b environment.Backend, p *netpolicy.Policy) error {
	if p.Enabled() && !environment.CapabilitiesOf(b).Network {
		return usageErrorf("--allow-net and --forward need a backend with a network by policy; %s has none", b.Name())
	}
	return nil
}
