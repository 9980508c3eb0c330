package guest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
)

// A CPU profile of the guest, for developers (never on by default): with
// --cpuprofile NAME the guest profiles its CPU from the host's start
// request to its stop request and writes the profile to NAME in its home,
// where the host reads it back (environment/guestenv: the host's
// AGENTBOX_GUEST_CPUPROFILE=DIR asks for it and copies it to DIR). The
// profile is written before the stop is answered, so it covers every
// request in between: `go tool pprof bin/agentbox-guest DIR/FILE`.
type cpuProfile struct {
	mu   sync.Mutex
	f    *os.File
	done bool
}

// start begins profiling into home/name; nothing when name is "".
func (p *cpuProfile) start(home, name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if name == "" || p.f != nil || p.done {
		return nil
	}
	if home == "" || filepath.Base(name) != name {
		return fmt.Errorf("cpu profile: %q is not a file name in the home", name)
	}
	f, err := os.OpenFile(filepath.Join(home, name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("cpu profile: %w", err)
	}
	p.f = f
	return nil
}

// stop ends profiling and closes the file; safe to call more than once.
func (p *cpuProfile) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = true
	if p.f == nil {
		return
	}
	pprof.StopCPUProfile()
	p.f.Close()
	p.f = nil
}
