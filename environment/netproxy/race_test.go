//go:build race

package netproxy

// raceEnabled: the race detector multiplies memory, so bounds on it are
// not checked.
const raceEnabled = true
