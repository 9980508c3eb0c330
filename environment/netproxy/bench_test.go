package netproxy

import (
	"io"
	"net/http"
	"testing"

	"github.com/codegirl-games/agentbox/netpolicy"
)

// BenchmarkRequest: one small GET to a loopback server, direct and
// through the proxy's socket (a new connection each, as the proxy makes
// upstream).
func BenchmarkRequest(b *testing.B) {
	_, port := serveB(b, "x")
	r, _ := netpolicy.ParseRule("127.0.0.1:" + port)
	dir, err := osMkdirTemp()
	if err != nil {
		b.Fatal(err)
	}
	defer osRemoveAll(dir)
	s, err := Start(dir, Options{Policy: netpolicy.Policy{Allow: []netpolicy.Rule{r}, MaxConnRate: 10000}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		name string
		cl   *http.Client
	}{
		{"direct", &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}},
		{"proxied", client(s)},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				resp, err := c.cl.Get("http://127.0.0.1:" + port + "/")
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
