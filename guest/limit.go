package guest

import (
	"io"
	"sync"
)

// limitedWriter passes at most n bytes to w and drops the rest, so a chatty
// Xvfb or window manager cannot flood the guest's diagnostics.
type limitedWriter struct {
	mu sync.Mutex
	w  io.Writer
	n  int64
}

func newLimitedWriter(w io.Writer, n int64) *limitedWriter { return &limitedWriter{w: w, n: n} }

func (l *limitedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n <= 0 {
		return len(p), nil
	}
	q := p
	if int64(len(q)) > l.n {
		q = q[:l.n]
	}
	l.n -= int64(len(q))
	_, _ = l.w.Write(q)
	return len(p), nil
}
