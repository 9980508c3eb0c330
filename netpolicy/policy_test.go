package netpolicy

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	for _, c := range []struct {
		in      string
		allow   []string
		deny    []string
		names   string // an address the rule names explicitly
		wantErr string
	}{
		{in: "example.com", allow: []string{"example.com:443", "EXAMPLE.com.:80"}, deny: []string{"www.example.com:443", "example.org:443", "1.2.3.4:443"}},
		{in: "*.example.com", allow: []string{"a.example.com:443", "a.b.example.com:1"}, deny: []string{"example.com:443", "badexample.com:443"}},
		{in: "example.com:443", allow: []string{"example.com:443"}, deny: []string{"example.com:80"}},
		{in: "example.com:8000-8100", allow: []string{"example.com:8000", "example.com:8100"}, deny: []string{"example.com:7999", "example.com:8101"}},
		{in: "*:443", allow: []string{"anything.test:443", "203.0.113.9:443"}, deny: []string{"anything.test:80"}},
		{in: ":443", allow: []string{"x.test:443"}, deny: []string{"x.test:444"}},
		{in: "*", allow: []string{"x.test:1", "[2001:db8::1]:2"}},
		{in: "203.0.113.7", allow: []string{"203.0.113.7:443"}, deny: []string{"203.0.113.8:443", "x.test:443"}, names: "203.0.113.7"},
		{in: "127.0.0.1:8080", allow: []string{"127.0.0.1:8080"}, deny: []string{"127.0.0.1:8081", "localhost:8080"}, names: "127.0.0.1"},
		{in: "10.0.0.0/8:5432", allow: []string{"10.1.2.3:5432"}, deny: []string{"11.0.0.1:5432"}, names: "10.9.9.9"},
		{in: "[2001:db8::1]:443", allow: []string{"[2001:db8::1]:443"}, deny: []string{"[2001:db8::2]:443"}, names: "2001:db8::1"},
		{in: "2001:db8::1", allow: []string{"[2001:db8::1]:1"}},
		{in: "fd00::/8", allow: []string{"[fd12::1]:1"}, names: "fd00::5"},
		{in: "", wantErr: "empty"},
		{in: "https://example.com", wantErr: "not a URL"},
		{in: "example.com:", wantErr: "missing port"},
		{in: "example.com:0", wantErr: "want 1 to 65535"},
		{in: "example.com:70000", wantErr: "want 1 to 65535"},
		{in: "example.com:9-3", wantErr: "backwards"},
		{in: "*.com", wantErr: "top-level"},
		{in: "exa mple.com", wantErr: "not allowed"},
		{in: "10.0.0.0/33", wantErr: "address range"},
		{in: "[::1", wantErr: "unclosed"},
	} {
		t.Run(c.in, func(t *testing.T) {
			r, err := ParseRule(c.in)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("ParseRule(%q) = %+v, %v; want an error containing %q", c.in, r, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, hp := range c.allow {
				tg, err := ParseTarget(hp, 0)
				if err != nil {
					t.Fatal(err)
				}
				if !r.Matches(tg) {
					t.Errorf("%q does not match %s", c.in, hp)
				}
			}
			for _, hp := range c.deny {
				tg, err := ParseTarget(hp, 0)
				if err != nil {
					t.Fatal(err)
				}
				if r.Matches(tg) {
					t.Errorf("%q matches %s", c.in, hp)
				}
			}
			if c.names != "" && !r.Names(netip.MustParseAddr(c.names)) {
				t.Errorf("%q does not name %s", c.in, c.names)
			}
			if c.names == "" && r.Names(netip.MustParseAddr("127.0.0.1")) {
				t.Errorf("%q names 127.0.0.1", c.in)
			}
		})
	}
}

func TestParseForward(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    Forward
		wantErr string
	}{
		{in: "127.0.0.1:8080", want: Forward{Host: "127.0.0.1", Port: 8080, SandboxPort: 8080}},
		{in: "localhost:3000:4000", want: Forward{Host: "localhost", Port: 3000, SandboxPort: 4000}},
		{in: "[::1]:8080:9090", want: Forward{Host: "::1", Port: 8080, SandboxPort: 9090}},
		{in: "localhost:80", wantErr: "below 1024"},
		{in: "localhost:8080:80", wantErr: "below 1024"},
		{in: "8080", wantErr: "HOST:PORT"},
		{in: ":8080", wantErr: "no host"},
		{in: "localhost:x", wantErr: "want 1 to 65535"},
		{in: "[nothost]:80", wantErr: "not an IPv6"},
	} {
		t.Run(c.in, func(t *testing.T) {
			f, err := ParseForward(c.in)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("ParseForward(%q) = %+v, %v; want an error containing %q", c.in, f, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.want.Text = c.in
			if f != c.want {
				t.Errorf("got %+v, want %+v", f, c.want)
			}
		})
	}
}

func TestPolicyValidate(t *testing.T) {
	fw := func(s string) Forward {
		f, err := ParseForward(s)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	rule, _ := ParseRule("example.com")
	for _, c := range []struct {
		name    string
		p       Policy
		wantErr string
	}{
		{"ok", Policy{Allow: []Rule{rule}, Forward: []Forward{fw("localhost:8080")}}, ""},
		{"two forwards on one port", Policy{Forward: []Forward{fw("localhost:8080"), fw("localhost:9090:8080")}}, "taken by --forward localhost:8080"},
		{"a forward on the proxy's port", Policy{Allow: []Rule{rule}, Forward: []Forward{fw("localhost:3128")}}, "taken by the proxy"},
		{"the proxy's port without a proxy", Policy{Forward: []Forward{fw("localhost:3128")}}, ""},
		{"negative bytes", Policy{MaxBytes: -1}, "must not be negative"},
		{"huge rate", Policy{MaxConnRate: 1e6}, "want 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.p.Validate()
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("Validate = %v, want %q", err, c.wantErr)
			}
		})
	}
}

func TestSpecial(t *testing.T) {
	for _, c := range []struct {
		addr    string
		special bool
	}{
		{"127.0.0.1", true}, {"127.8.9.1", true}, {"::1", true}, {"::ffff:127.0.0.1", true},
		{"10.1.2.3", true}, {"172.20.0.1", true}, {"192.168.1.1", true}, {"fd00::1", true},
		{"169.254.169.254", true}, {"fe80::1", true}, {"0.0.0.0", true}, {"0.1.2.3", true}, {"::", true},
		{"100.100.100.100", true}, {"224.0.0.1", true}, {"255.255.255.255", true},
		{"64:ff9b::7f00:1", true}, {"2002:7f00:1::", true}, {"::127.0.0.1", true},
		{"8.8.8.8", false}, {"2001:4860:4860::8888", false}, {"172.32.0.1", false}, {"::ffff:8.8.8.8", false},
	} {
		got := Special(netip.MustParseAddr(c.addr))
		if (got != "") != c.special {
			t.Errorf("Special(%s) = %q, want special %v", c.addr, got, c.special)
		}
	}
}

// TestRefusesRanges (issue 22, finding 3): the documentation and
// translation ranges are refused to a wildcard rule, in every spelling,
// and reached by a rule naming the address. The first addresses of
// TEST-NET-1 are what a host, this one included, may have on its own
// interface.
func TestRefusesRanges(t *testing.T) {
	any := mustRule(t, "*")
	for _, c := range []struct {
		addr, why string
	}{
		{"192.0.2.2", "documentation"},
		{"198.51.100.7", "documentation"},
		{"203.0.113.7", "documentation"},
		{"192.88.99.1", "6to4 relay"},
		{"::ffff:192.0.2.2", "documentation"}, // IPv4-mapped: judged as the IPv4 it carries
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:0:c000:202", "IPv4-translated"}, // ::ffff:0:192.0.2.2
		{"::ffff:0:808:808", "IPv4-translated"},
		{"64:ff9b:1::c000:202", "NAT64"},
		{"64:ff9b::808:808", "NAT64"},
		{"2001:db8::1", "documentation"},
		{"3fff::1", "documentation"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"},
		{"2002:c000:202::1", "6to4"},
	} {
		t.Run(c.addr, func(t *testing.T) {
			a := netip.MustParseAddr(c.addr)
			if why := any.Refuses(a, nil); !strings.Contains(why, c.why) {
				t.Errorf("rule * to %s: refused %q, want a reason with %q", c.addr, why, c.why)
			}
			if why := mustRule(t, "*:443").Refuses(a, nil); why == "" {
				t.Errorf("rule *:443 reaches %s", c.addr)
			}
			if why := mustRule(t, "["+c.addr+"]:443").Refuses(a, nil); why != "" {
				t.Errorf("a rule naming %s refuses it: %q", c.addr, why)
			}
		})
	}
	for _, ok := range []string{"8.8.8.8", "::ffff:8.8.8.8", "2001:4860:4860::8888", "192.0.3.1", "203.0.114.1"} {
		if why := any.Refuses(netip.MustParseAddr(ok), nil); why != "" {
			t.Errorf("rule * refuses the public address %s: %q", ok, why)
		}
	}
}

// TestRefusesHostAddrs (issue 22, finding 3): a wildcard rule reaches no
// address of this host's interfaces — the real ones, read now, and a
// public one in a list as HostAddrs would give it — while a rule naming
// the address, or a range containing it, does.
func TestRefusesHostAddrs(t *testing.T) {
	host, err := HostAddrs()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(host, netip.Addr.IsLoopback) {
		t.Fatalf("HostAddrs %v has no loopback address", host)
	}
	t.Logf("this host's addresses: %v", host)
	public := netip.MustParseAddr("8.8.4.4")
	for _, a := range append(slices.Clone(host), public) {
		list := append(slices.Clone(host), public)
		t.Run(a.String(), func(t *testing.T) {
			for _, rule := range []string{"*", "*:443", ":8080"} {
				if why := mustRule(t, rule).Refuses(a, list); why == "" {
					t.Errorf("rule %s reaches %s, an address of this host", rule, a)
				}
			}
			if a == public {
				if why := mustRule(t, "*").Refuses(a, nil); why != "" {
					t.Errorf("rule * refuses %s when it is not this host's: %q", a, why)
				}
				if why := mustRule(t, "*").Refuses(a, list); why != "an address of this host" {
					t.Errorf("rule * to %s: reason %q", a, why)
				}
			}
			named := a.String()
			if a.Is6() {
				named = "[" + named + "]"
			}
			for _, rule := range []string{named, named + ":8080", netip.PrefixFrom(a, a.BitLen()-8).Masked().String()} {
				if why := mustRule(t, rule).Refuses(a, list); why != "" {
					t.Errorf("rule %s naming %s refuses it: %q", rule, a, why)
				}
			}
		})
	}
}

func mustRule(t *testing.T, s string) Rule {
	t.Helper()
	r, err := ParseRule(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestParseResolve(t *testing.T) {
	n, a, err := ParseResolve("API.test=127.0.0.1")
	if err != nil || n != "api.test" || a != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("got %q %v %v", n, a, err)
	}
	for _, bad := range []string{"api.test", "api.test=nothere", "=1.2.3.4", "a b=1.2.3.4"} {
		if _, _, err := ParseResolve(bad); err == nil {
			t.Errorf("ParseResolve(%q) accepted", bad)
		}
	}
}
