// Package netpolicy is the vocabulary of a sandbox's network: the rules
// of --allow-net (host names with wildcards, ports, host:port, addresses),
// the services of --forward, names pinned to addresses (--net-resolve), the
// limits, and which addresses a host name may never lead to. It parses and
// matches; the recording proxy that enforces it runs on the host
// (environment/netproxy).
//
// A sandbox has no network but loopback. With a policy, a proxy outside it
// is the only way out: every HTTP request and CONNECT tunnel names a host
// and port, which must match a rule; the proxy resolves the name itself
// and refuses loopback, private, link-local and other special addresses,
// and every address of this host's own interfaces, unless a rule names
// the address (or --net-resolve pins the name to it): Rule.Refuses.
package netpolicy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// ErrInvalid is wrapped by every error about a rule, a forward or a limit.
var ErrInvalid = errors.New("invalid network policy")

// Rule is one --allow-net rule: a host pattern and a port range.
//
//	example.com          the host, any port
//	*.example.com        any host below example.com (not example.com itself)
//	example.com:443      the host, port 443
//	example.com:8000-8100
//	*:443, :443          any host, port 443
//	*                    any host, any port
//	203.0.113.7, 10.0.0.0/8:5432, [2001:db8::1]:443, [fd00::/8]
//	                     addresses: these name an address explicitly, so
//	                     they may reach private and loopback ones
type Rule struct {
	Text string // as given
	// Host is the lower-case host name without a trailing dot; "" with
	// Any or Prefix set. With Wildcard, the rule matches names below it.
	Host     string
	Wildcard bool
	Any      bool
	// Prefix is set for an address or CIDR rule.
	Prefix netip.Prefix
	// PortLo..PortHi is the port range; 0..0 is any port.
	PortLo, PortHi int
}

func (r Rule) String() string { return r.Text }

// ParseRule reads one --allow-net rule.
func ParseRule(s string) (Rule, error) {
	r := Rule{Text: s}
	fail := func(format string, a ...any) (Rule, error) {
		return Rule{}, fmt.Errorf("%w: rule %q: %s", ErrInvalid, s, fmt.Sprintf(format, a...))
	}
	t := strings.TrimSpace(s)
	if t == "" {
		return fail("empty (want a host, *.domain, host:port, :port or an address)")
	}
	if strings.Contains(t, "://") || strings.ContainsAny(t, "/?#@") && !isCIDRish(t) {
		return fail("want a host and port, not a URL (e.g. example.com:443)")
	}
	host, ports := t, ""
	switch {
	case strings.HasPrefix(t, "["):
		end := strings.Index(t, "]")
		if end < 0 {
			return fail("unclosed [")
		}
		host, ports = t[1:end], t[end+1:]
		if ports != "" && !strings.HasPrefix(ports, ":") {
			return fail("want [ADDRESS]:PORT")
		}
		ports = strings.TrimPrefix(ports, ":")
		if ports == "" && strings.HasSuffix(t, ":") {
			return fail("missing port after ':'")
		}
	case strings.Count(t, ":") > 1:
		// A bare IPv6 address (or prefix), no port.
	default:
		if h, p, ok := strings.Cut(t, ":"); ok {
			host, ports = h, p
			if ports == "" {
				return fail("missing port after ':'")
			}
		}
	}
	if ports != "" {
		lo, hi, err := parsePorts(ports)
		if err != nil {
			return fail("%v", err)
		}
		r.PortLo, r.PortHi = lo, hi
	}
	switch {
	case host == "" || host == "*":
		if host == "" && ports == "" {
			return fail("empty host")
		}
		r.Any = true
	case isCIDRish(host) || isAddr(host):
		p, err := parsePrefix(host)
		if err != nil {
			return fail("%v", err)
		}
		r.Prefix = p
	default:
		name := host
		if rest, ok := strings.CutPrefix(name, "*."); ok {
			r.Wildcard, name = true, rest
		}
		n, err := NormalizeHost(name)
		if err != nil {
			return fail("%v", err)
		}
		if r.Wildcard && !strings.Contains(n, ".") {
			return fail("*.%s would match every name under a top-level domain; name a domain (*.example.com)", n)
		}
		r.Host = n
	}
	return r, nil
}

func isCIDRish(s string) bool { return strings.Contains(s, "/") && !strings.Contains(s, "://") }

func isAddr(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("not an address range: %v", err)
		}
		if p.Addr().Zone() != "" {
			return netip.Prefix{}, errors.New("zones are not allowed")
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not an address: %v", err)
	}
	if a.Zone() != "" {
		return netip.Prefix{}, errors.New("zones are not allowed")
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func parsePorts(s string) (lo, hi int, err error) {
	if s == "*" {
		return 0, 0, nil
	}
	a, b, isRange := strings.Cut(s, "-")
	if lo, err = parsePort(a); err != nil {
		return 0, 0, err
	}
	hi = lo
	if isRange {
		if hi, err = parsePort(b); err != nil {
			return 0, 0, err
		}
		if hi < lo {
			return 0, 0, fmt.Errorf("port range %s runs backwards", s)
		}
	}
	return lo, hi, nil
}

func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 || strings.HasPrefix(s, "+") {
		return 0, fmt.Errorf("port %q: want 1 to 65535", s)
	}
	return p, nil
}

// NormalizeHost lower-cases a host name, drops one trailing dot, and
// checks it is a DNS name (letters, digits, '-', '_', dots; labels of 1 to
// 63 bytes; at most 253 bytes).
func NormalizeHost(h string) (string, error) {
	n := strings.ToLower(strings.TrimSuffix(h, "."))
	if n == "" || len(n) > 253 {
		return "", fmt.Errorf("host %q: want a DNS name", h)
	}
	for _, label := range strings.Split(n, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("host %q: empty or over-long label", h)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("host %q: character %q is not allowed in a host name", h, c)
			}
		}
	}
	return n, nil
}

// Target is a destination the sandbox asked for: a host name (normalised)
// or an address, and a port.
type Target struct {
	Host string     // normalised name; "" when Addr is set
	Addr netip.Addr // an address literal
	Port int
}

// ParseTarget reads "host:port" as a proxy request names it (a CONNECT
// authority or an absolute URL's host); defPort is used when it has no
// port (0: a port is required).
func ParseTarget(hostport string, defPort int) (Target, error) {
	host, port := hostport, ""
	if strings.HasPrefix(hostport, "[") {
		end := strings.Index(hostport, "]")
		if end < 0 {
			return Target{}, fmt.Errorf("%q: unclosed [", hostport)
		}
		host, port = hostport[1:end], strings.TrimPrefix(hostport[end+1:], ":")
	} else if h, p, ok := strings.Cut(hostport, ":"); ok {
		host, port = h, p
		if strings.Contains(p, ":") {
			return Target{}, fmt.Errorf("%q: an IPv6 address needs brackets", hostport)
		}
	}
	t := Target{Port: defPort}
	if port != "" {
		p, err := parsePort(port)
		if err != nil {
			return Target{}, fmt.Errorf("%q: %v", hostport, err)
		}
		t.Port = p
	}
	if t.Port == 0 {
		return Target{}, fmt.Errorf("%q: no port", hostport)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return Target{}, fmt.Errorf("%q: zones are not allowed", hostport)
		}
		t.Addr = a.Unmap()
		return t, nil
	}
	n, err := NormalizeHost(host)
	if err != nil {
		return Target{}, err
	}
	t.Host = n
	return t, nil
}

// String is "host:port" ("[v6]:port").
func (t Target) String() string {
	if t.Addr.IsValid() {
		return netip.AddrPortFrom(t.Addr, uint16(t.Port)).String()
	}
	return t.Host + ":" + strconv.Itoa(t.Port)
}

// Matches reports whether the rule allows t.
func (r Rule) Matches(t Target) bool {
	if r.PortLo != 0 && (t.Port < r.PortLo || t.Port > r.PortHi) {
		return false
	}
	switch {
	case r.Any:
		return true
	case r.Prefix.IsValid():
		return t.Addr.IsValid() && r.Prefix.Contains(t.Addr)
	case t.Host == "":
		return false
	case r.Wildcard:
		return strings.HasSuffix(t.Host, "."+r.Host)
	}
	return t.Host == r.Host
}

// Names reports whether the rule names addr explicitly (an address or
// range rule containing it): only such a rule lets a special address
// through.
func (r Rule) Names(addr netip.Addr) bool {
	return r.Prefix.IsValid() && r.Prefix.Contains(addr.Unmap())
}

// Forward is one --forward: a service on the host (HOST:PORT) that appears
// inside the sandbox at 127.0.0.1:SandboxPort.
type Forward struct {
	Text        string
	Host        string // a name or an address, as given
	Port        int
	SandboxPort int
}

func (f Forward) String() string { return f.Text }

// Target is the host side of the forward, "host:port".
func (f Forward) Target() string {
	if strings.Contains(f.Host, ":") {
		return "[" + f.Host + "]:" + strconv.Itoa(f.Port)
	}
	return f.Host + ":" + strconv.Itoa(f.Port)
}

// MinSandboxPort is the lowest port a forward or the proxy may take inside
// the sandbox: below it binding needs a privilege the sandbox's processes
// do not have on every backend.
const MinSandboxPort = 1024

// ParseForward reads HOST:PORT[:SANDBOXPORT] ([V6]:PORT[:SANDBOXPORT]);
// the sandbox port defaults to PORT.
func ParseForward(s string) (Forward, error) {
	f := Forward{Text: s}
	fail := func(format string, a ...any) (Forward, error) {
		return Forward{}, fmt.Errorf("%w: --forward %q: %s", ErrInvalid, s, fmt.Sprintf(format, a...))
	}
	t := strings.TrimSpace(s)
	var host, rest string
	if strings.HasPrefix(t, "[") {
		end := strings.Index(t, "]")
		if end < 0 {
			return fail("unclosed [")
		}
		host, rest = t[1:end], strings.TrimPrefix(t[end+1:], ":")
		if _, err := netip.ParseAddr(host); err != nil {
			return fail("%q is not an IPv6 address", host)
		}
	} else {
		var ok bool
		host, rest, ok = strings.Cut(t, ":")
		if !ok {
			return fail("want HOST:PORT[:SANDBOXPORT], e.g. 127.0.0.1:8080 or localhost:3000:80")
		}
		if host != "" && !isAddr(host) {
			if _, err := NormalizeHost(host); err != nil {
				return fail("%v", err)
			}
		}
	}
	if host == "" {
		return fail("no host (want e.g. 127.0.0.1:8080)")
	}
	port, sport, hasSandbox := strings.Cut(rest, ":")
	p, err := parsePort(port)
	if err != nil {
		return fail("%v", err)
	}
	f.Host, f.Port, f.SandboxPort = host, p, p
	if hasSandbox {
		if f.SandboxPort, err = parsePort(sport); err != nil {
			return fail("sandbox %v", err)
		}
	}
	if f.SandboxPort < MinSandboxPort {
		return fail("sandbox port %d is below %d (binding it needs a privilege the sandbox does not have): give another, e.g. %s:%d:%d",
			f.SandboxPort, MinSandboxPort, host, f.Port, 8000+f.SandboxPort%1000)
	}
	return f, nil
}

// ParseResolve reads one --net-resolve NAME=ADDRESS: the proxy resolves
// NAME to ADDRESS instead of asking DNS, and ADDRESS counts as named
// explicitly (it may be loopback or private).
func ParseResolve(s string) (string, netip.Addr, error) {
	name, addr, ok := strings.Cut(s, "=")
	if !ok {
		return "", netip.Addr{}, fmt.Errorf("%w: --net-resolve %q: want NAME=ADDRESS", ErrInvalid, s)
	}
	n, err := NormalizeHost(name)
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("%w: --net-resolve %q: %v", ErrInvalid, s, err)
	}
	a, err := netip.ParseAddr(strings.Trim(addr, "[]"))
	if err != nil || a.Zone() != "" {
		return "", netip.Addr{}, fmt.Errorf("%w: --net-resolve %q: %q is not an address", ErrInvalid, s, addr)
	}
	return n, a.Unmap(), nil
}

// Defaults of the limits.
const (
	DefaultMaxBytes    = 1 << 30 // per run, both directions, every connection
	DefaultMaxConnRate = 20.0    // new connections (and proxied requests) per second
	// ProxyPort is where the proxy appears inside the sandbox
	// (127.0.0.1:3128, HTTP_PROXY and HTTPS_PROXY).
	ProxyPort = 3128
)

// Policy is a sandbox's network.
type Policy struct {
	Allow   []Rule
	Forward []Forward
	// Hosts pins names to addresses (--net-resolve); such an address
	// counts as named explicitly.
	Hosts map[string]netip.Addr
	// MaxBytes caps the bytes of the run, both directions, over every
	// connection; MaxConnRate the connections per second (bursts of a
	// second's worth). Zero takes the default.
	MaxBytes    int64
	MaxConnRate float64
}

// Enabled reports whether the sandbox gets a network at all: a rule or a
// forward. Without, it has only loopback and nothing outside it listens.
func (p *Policy) Enabled() bool { return p != nil && (len(p.Allow) > 0 || len(p.Forward) > 0) }

// WithDefaults fills zero limits.
func (p Policy) WithDefaults() Policy {
	if p.MaxBytes == 0 {
		p.MaxBytes = DefaultMaxBytes
	}
	if p.MaxConnRate == 0 {
		p.MaxConnRate = DefaultMaxConnRate
	}
	return p
}

// Validate checks what a rule or forward alone cannot: limits in range,
// sandbox ports distinct and not the proxy's.
func (p Policy) Validate() error {
	if p.MaxBytes < 0 {
		return fmt.Errorf("%w: --net-max-bytes must not be negative", ErrInvalid)
	}
	if p.MaxConnRate < 0 || p.MaxConnRate > 10000 {
		return fmt.Errorf("%w: --net-max-rate %v: want 0 (the default, %v) to 10000 connections per second", ErrInvalid, p.MaxConnRate, DefaultMaxConnRate)
	}
	seen := map[int]string{}
	if len(p.Allow) > 0 {
		seen[ProxyPort] = "the proxy"
	}
	for _, f := range p.Forward {
		if other, ok := seen[f.SandboxPort]; ok {
			return fmt.Errorf("%w: --forward %s: sandbox port %d is taken by %s", ErrInvalid, f.Text, f.SandboxPort, other)
		}
		seen[f.SandboxPort] = "--forward " + f.Text
	}
	return nil
}

// Match returns the first rule that allows t.
func (p Policy) Match(t Target) (Rule, bool) {
	for _, r := range p.Allow {
		if r.Matches(t) {
			return r, true
		}
	}
	return Rule{}, false
}

// Texts returns the rules as given.
func Texts[T fmt.Stringer](list []T) []string {
	out := make([]string, len(list))
	for i, v := range list {
		out[i] = v.String()
	}
	return out
}

// special are the ranges no host name may lead to: loopback, private,
// link-local, the unspecified "this network", shared (CGNAT), multicast,
// broadcast, reserved, documentation (TEST-NET, 2001:db8::/32 — this
// host's own interface may be numbered from them), benchmarking, and IPv6
// forms that embed an IPv4 address (IPv4-compatible, IPv4-translated,
// NAT64, 6to4, Teredo). An IPv4-mapped address (::ffff:0:0/96) is
// unmapped before the check: it is refused when the IPv4 address it
// carries is, so ::ffff:127.0.0.1 is loopback.
var special = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "the unspecified network (reaches this machine)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (CGNAT) address"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address (TEST-NET-1)"},
	{netip.MustParsePrefix("192.88.99.0/24"), "a 6to4 relay address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address (TEST-NET-2)"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address (TEST-NET-3)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("::/128"), "the unspecified address"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible address"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "an IPv4-translated address"},
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64 address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a NAT64 address"},
	{netip.MustParsePrefix("100::/64"), "a discard address"},
	{netip.MustParsePrefix("2001::/32"), "a Teredo address"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address"},
	{netip.MustParsePrefix("3fff::/20"), "a documentation address"},
	{netip.MustParsePrefix("fc00::/7"), "a private (unique local) address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
}

// Special says why addr is one a host name may not lead to ("a loopback
// address"), or "" when it is an ordinary public address.
func Special(addr netip.Addr) string {
	a := addr.Unmap()
	for _, s := range special {
		if s.prefix.Contains(a) {
			return s.what
		}
	}
	if !a.IsGlobalUnicast() {
		return "not a unicast address"
	}
	return ""
}

// Refuses says why a connection that rule r allows may not go to addr,
// or "" when it may. It may not when addr is special (Special) or one of
// this host's own addresses (host, as HostAddrs lists them: a service the
// host runs on 0.0.0.0 answers on each of them), unless r names the
// address itself (an address or range rule containing it). A wildcard
// rule (*, *:443, *.example.com) or a host name rule therefore reaches
// ordinary public addresses only.
func (r Rule) Refuses(addr netip.Addr, host []netip.Addr) string {
	a := addr.Unmap()
	if r.Names(a) {
		return ""
	}
	if why := Special(a); why != "" {
		return why
	}
	for _, h := range host {
		if h.Unmap().WithZone("") == a.WithZone("") {
			return "an address of this host"
		}
	}
	return ""
}

// HostAddrs lists the addresses of this host's interfaces (unmapped,
// without zones). It reads them afresh at each call: they change as
// interfaces come and go (DHCP, a VPN, a container runtime's bridges), so
// a caller deciding a connection reads them for that decision.
func HostAddrs() ([]netip.Addr, error) {
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list this host's addresses: %w", err)
	}
	out := make([]netip.Addr, 0, len(ifaddrs))
	for _, ia := range ifaddrs {
		var ip net.IP
		switch v := ia.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		if a, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, a.Unmap().WithZone(""))
		}
	}
	return out, nil
}

// SpecialRanges lists the ranges Special refuses, for documentation.
func SpecialRanges() []string {
	out := make([]string, 0, len(special))
	for _, s := range special {
		out = append(out, s.prefix.String())
	}
	return slices.Clip(out)
}
