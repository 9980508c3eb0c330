package atspi

import "time"

// SetCallTimeout sets the per-call deadline of tree reads until restore
// is called: for tests of the read's other bounds, which a busy machine
// would otherwise turn into tests of the deadline. Not for parallel tests.
func SetCallTimeout(d time.Duration) (restore func()) {
	old := callTimeout
	callTimeout = d
	return func() { callTimeout = old }
}
