package environment

import (
	"strconv"

	"github.com/codegirl-games/agentbox/internal/owner"
)

// ProcessStart returns a process's start time in clock ticks since boot
// (field 22 of /proc/PID/stat), which with the PID identifies a process
// across PID reuse; 0 if unknown. Backends label their sandboxes with
// their owner's PID and start time so that a reaper can tell an orphan.
func ProcessStart(pid int) uint64 { return owner.Start(pid) }

// OwnerAlive reports whether the process that created a sandbox, as its
// labels recorded it (PID and ProcessStart, in decimal), still runs: same
// PID and same start time; else why not.
func OwnerAlive(pidLabel, startLabel string) (bool, string) {
	pid, err := strconv.Atoi(pidLabel)
	if err != nil || pid <= 0 {
		return false, "no owner recorded"
	}
	start, _ := strconv.ParseUint(startLabel, 10, 64)
	return owner.Alive(pid, start)
}
