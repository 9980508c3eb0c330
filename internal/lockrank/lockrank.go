// Package lockrank checks a written lock order: each lock has a rank, and a
// goroutine that holds a lock may take only locks of a higher rank (further
// inside). A lock taken out of order panics, naming both locks, while
// checking is on — in tests (Enable, or AGENTBOX_LOCKRANK=1 in a process's
// environment, so a test's subprocesses check too). Off, a lock costs one
// atomic load more than a sync.Mutex.
//
// The check follows the Go runtime's own lock ranking (runtime/lockrank.go):
// a deadlock between two locks needs two goroutines taking them in
// opposite orders, and a test run only ever sees one order at a time; a
// written order catches the first goroutine's half, on any run that takes
// it.
//
// A rank belongs to a type (Mutex[R]'s R), so the zero value of a struct
// holding a Mutex is ready to use and the order is read in one place: the
// package that declares the ranks.
package lockrank

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Rank is a lock's place in the order: a goroutine holding a lock of rank
// r takes only locks of rank > r.
type Rank int

// Ranked names a lock and gives its rank; it is implemented by an empty
// type per lock.
type Ranked interface {
	Rank() Rank
	String() string
}

// Leaf is the rank of locks under which nothing else is taken (a trace
// writer's, an event log's).
const Leaf Rank = 1 << 20

var (
	enabled  atomic.Bool
	fromEnv  sync.Once
	heldMu   sync.Mutex
	heldByID = map[uint64][]held{}
)

type held struct {
	rank Rank
	name string
}

// Enable turns checking on for this process.
func Enable() { enabled.Store(true) }

// EnvVar turns checking on in a process that has it set to 1.
const EnvVar = "AGENTBOX_LOCKRANK"

func on() bool {
	fromEnv.Do(func() {
		if os.Getenv(EnvVar) == "1" {
			enabled.Store(true)
		}
	})
	return enabled.Load()
}

// Mutex is a sync.Mutex whose rank is R's.
type Mutex[R Ranked] struct{ mu sync.Mutex }

// Lock locks m; with checking on, it panics first when the goroutine
// holds a lock of the same or a higher rank.
func (m *Mutex[R]) Lock() {
	if on() {
		var r R
		acquire(r.Rank(), r.String())
		m.mu.Lock()
		return
	}
	m.mu.Lock()
}

// Unlock unlocks m.
func (m *Mutex[R]) Unlock() {
	if on() {
		var r R
		release(r.Rank())
	}
	m.mu.Unlock()
}

// RWMutex is a sync.RWMutex whose rank is R's; readers are ranked as
// writers are.
type RWMutex[R Ranked] struct{ mu sync.RWMutex }

// Lock locks m for writing.
func (m *RWMutex[R]) Lock() {
	if on() {
		var r R
		acquire(r.Rank(), r.String())
	}
	m.mu.Lock()
}

// Unlock unlocks m for writing.
func (m *RWMutex[R]) Unlock() {
	if on() {
		var r R
		release(r.Rank())
	}
	m.mu.Unlock()
}

// RLock locks m for reading.
func (m *RWMutex[R]) RLock() {
	if on() {
		var r R
		acquire(r.Rank(), r.String())
	}
	m.mu.RLock()
}

// RUnlock unlocks m for reading.
func (m *RWMutex[R]) RUnlock() {
	if on() {
		var r R
		release(r.Rank())
	}
	m.mu.RUnlock()
}

// OrderError is the panic value of a lock taken out of order.
type OrderError struct {
	Taking, Holding string
	TakingRank      Rank
	HoldingRank     Rank
}

func (e *OrderError) Error() string {
	return fmt.Sprintf("lock order: taking %s (rank %d) while holding %s (rank %d); a lock may only be taken inside locks of a lower rank",
		e.Taking, e.TakingRank, e.Holding, e.HoldingRank)
}

func acquire(r Rank, name string) {
	id := goid()
	heldMu.Lock()
	hs := heldByID[id]
	var bad *held
	for i := range hs {
		if hs[i].rank >= r {
			bad = &hs[i]
			break
		}
	}
	if bad == nil {
		heldByID[id] = append(hs, held{r, name})
	}
	heldMu.Unlock()
	if bad != nil {
		panic(&OrderError{Taking: name, TakingRank: r, Holding: bad.name, HoldingRank: bad.rank})
	}
}

// release forgets the goroutine's latest lock of rank r. (A lock released
// by another goroutine than the one that took it — legal for sync.Mutex —
// is found in no list and is ignored.)
func release(r Rank) {
	id := goid()
	heldMu.Lock()
	defer heldMu.Unlock()
	hs := heldByID[id]
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i].rank == r {
			hs = slices.Delete(hs, i, i+1)
			break
		}
	}
	if len(hs) == 0 {
		delete(heldByID, id)
	} else {
		heldByID[id] = hs
	}
}

// goid is the calling goroutine's ID, from the first line of its stack
// ("goroutine 18 [running]:"): slow, and only used while checking.
func goid() uint64 {
	var buf [64]byte
	s := string(buf[:runtime.Stack(buf[:], false)])
	s = strings.TrimPrefix(s, "goroutine ")
	if i := strings.IndexByte(s, ' '); i > 0 {
		s = s[:i]
	}
	id, _ := strconv.ParseUint(s, 10, 64)
	return id
}
