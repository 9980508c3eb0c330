package serve

import (
	"bytes"
	"testing"
)

// TestHTTPLog: net/http's messages reach the server's log, less the TLS
// handshakes a probe ends before a word.
func TestHTTPLog(t *testing.T) {
	var b bytes.Buffer
	l := httpLog{&Server{o: Options{Log: &b}}}
	l.Write([]byte("http: TLS handshake error from 10.0.0.7:40112: EOF\n"))
	if b.Len() != 0 {
		t.Errorf("a probe's handshake logged: %q", b.String())
	}
	l.Write([]byte("http: TLS handshake error from 10.0.0.7:40113: remote error: tls: bad certificate\n"))
	if want := "agentbox serve: TLS handshake error from 10.0.0.7:40113: remote error: tls: bad certificate\n"; b.String() != want {
		t.Errorf("logged %q, want %q", b.String(), want)
	}
}
