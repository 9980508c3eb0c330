package kubernetes

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/wire"
)

// TestGoAheadGated: the go-ahead is sent again until the hello's first byte
// arrives, and never after the protocol's first write, even while it is
// being resent as fast as possible.
func TestGoAheadGated(t *testing.T) {
	old := goAheadEvery
	goAheadEvery = 100 * time.Microsecond
	t.Cleanup(func() { goAheadEvery = old })
	for i := range 50 {
		r, w := io.Pipe()
		s := &sandbox{stdinW: w, streamed: make(chan struct{})}
		var mu sync.Mutex
		var got bytes.Buffer
		read := make(chan struct{})
		go func() {
			defer close(read)
			buf := make([]byte, 64)
			for {
				n, err := r.Read(buf)
				mu.Lock()
				got.Write(buf[:n])
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
		seen := make(chan struct{}) // the hello never arrives: resent until the first write
		stdin, stop := s.startGoAhead(context.Background(), seen)
		// Let some go-aheads through, then write the first frame.
		for {
			mu.Lock()
			n := got.Len()
			mu.Unlock()
			if n >= 3 {
				break
			}
			time.Sleep(50 * time.Microsecond)
		}
		if _, err := stdin.Write([]byte("FRAME")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // a stray go-ahead would be here by now
		stdin.Close()
		<-read
		if err := stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
		b := got.Bytes()
		k := bytes.Index(b, []byte("FRAME"))
		if k < 1 || !bytes.Equal(b[:k], bytes.Repeat([]byte{wire.GoAhead}, k)) || k+5 != len(b) {
			t.Fatalf("round %d: the stream carried %q; want go-aheads, then the frame, then nothing", i, b)
		}
	}
	// The hello's first byte stops the resending at once.
	r, w := io.Pipe()
	go io.Copy(io.Discard, r)
	s := &sandbox{stdinW: w, streamed: make(chan struct{})}
	seen := make(chan struct{})
	close(seen)
	_, stop := s.startGoAhead(context.Background(), seen)
	if err := stop(); err != nil {
		t.Errorf("stop after the hello: %v", err)
	}
	w.Close()
}
