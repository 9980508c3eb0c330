package guest

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/wire"
)

// TestAwaitHost: a guest started with --await-host goes on only after the
// host's go-ahead byte, and leaves what follows it to the protocol.
func TestAwaitHost(t *testing.T) {
	for _, c := range []struct {
		name   string
		in     string
		code   int
		ok     bool
		stderr string
		rest   string
	}{
		{"go-ahead", string(wire.GoAhead) + "frames", 0, true, "", "frames"},
		{"stdin closed first", "", 0, false, "", ""},
		{"another byte", "Xframes", 1, false, "not the go-ahead", "frames"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := strings.NewReader(c.in)
			var stderr bytes.Buffer
			code, ok := awaitHost(in, &stderr)
			if code != c.code || ok != c.ok || !strings.Contains(stderr.String(), c.stderr) || (c.stderr == "" && stderr.Len() > 0) {
				t.Errorf("awaitHost(%q) = %d, %v, stderr %q; want %d, %v, stderr with %q", c.in, code, ok, stderr.String(), c.code, c.ok, c.stderr)
			}
			if rest, _ := io.ReadAll(in); string(rest) != c.rest {
				t.Errorf("left %q for the protocol, want %q", rest, c.rest)
			}
		})
	}
}
