package atspi

import (
	"time"

	"github.com/codegirl-games/agentbox/observe"
)

// SetCallTimeout sets the per-call deadline of tree reads until restore
// is called: for tests of the read's other bounds, which a busy machine
// would otherwise turn into tests of the deadline. Not for parallel tests.
func SetCallTimeout(d time.Duration) (restore func()) {
	old := callTimeout
	callTimeout = d
	return func() { callTimeout = old }
}

// SetAfterFindRead makes f see each read of Find until the returned
// function is called.
func SetAfterFindRead(f func(n int, tr *observe.Tree)) (restore func()) {
	afterFindRead = f
	return func() { afterFindRead = nil }
}
