//go:build !race

package netproxy

const raceEnabled = false
