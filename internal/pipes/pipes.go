// Package pipes makes the os.Pipe pairs for a child process's stdio (and
// extra descriptors) when exec.Cmd's own pipes will not do: Cmd.Wait closes
// those, even while the parent still reads them.
package pipes

import "os"

// Open makes n pipes: r[i] is the read end of pipe i, w[i] its write end.
// On error nothing is left open.
func Open(n int) (r, w []*os.File, err error) {
	r, w = make([]*os.File, n), make([]*os.File, n)
	for i := range n {
		if r[i], w[i], err = os.Pipe(); err != nil {
			Close(r[:i]...)
			Close(w[:i]...)
			return nil, nil, err
		}
	}
	return r, w, nil
}

// Close closes every file, ignoring errors (for ends no longer wanted).
func Close(files ...*os.File) {
	for _, f := range files {
		f.Close()
	}
}
