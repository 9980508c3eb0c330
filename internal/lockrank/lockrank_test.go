package lockrank

import (
	"errors"
	"sync"
	"testing"
)

type outer struct{}

func (outer) Rank() Rank     { return 1 }
func (outer) String() string { return "outer" }

type inner struct{}

func (inner) Rank() Rank     { return 2 }
func (inner) String() string { return "inner" }

// panicOf runs f and returns what it panicked with.
func panicOf(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

func TestOrder(t *testing.T) {
	Enable()
	var o Mutex[outer]
	var i RWMutex[inner]
	n := 0 // what the locks guard

	if p := panicOf(func() {
		o.Lock()
		i.RLock()
		_ = n
		i.RUnlock()
		i.Lock()
		n++
		i.Unlock()
		o.Unlock()
	}); p != nil {
		t.Fatalf("outer then inner: %v", p)
	}

	p := panicOf(func() {
		i.Lock()
		defer i.Unlock()
		o.Lock() // out of order: panics before it locks
	})
	var oe *OrderError
	if err, ok := p.(error); !ok || !errors.As(err, &oe) || oe.Taking != "outer" || oe.Holding != "inner" {
		t.Fatalf("inner then outer: panic %v; want an OrderError taking outer while holding inner", p)
	}
	t.Log(p)

	if p := panicOf(func() {
		o.Lock()
		defer o.Unlock()
		var o2 Mutex[outer]
		o2.Lock() // the same rank twice: two locks of one kind, no order between them
	}); p == nil {
		t.Fatal("two locks of the same rank: no panic")
	}

	// Goroutines are apart: one holding inner does not stop another
	// from taking outer.
	i.Lock()
	var wg sync.WaitGroup
	wg.Go(func() {
		if p := panicOf(func() { o.Lock(); n++; o.Unlock() }); p != nil {
			t.Errorf("another goroutine: %v", p)
		}
	})
	wg.Wait()
	i.Unlock()
	if n := len(heldByID); n != 0 {
		t.Errorf("%d goroutines still listed as holding locks", n)
	}
}
