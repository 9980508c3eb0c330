package environment

import (
	"strconv"

	"github.com/codegirl-games/agentbox/internal/owner"
)

// OwnerAlive reports whether the process that created a sandbox, as its
// labels recorded it (PID and owner.Start, in decimal), still runs: same
// PID and same start time; else why not.
func OwnerAlive(pidLabel, startLabel string) (bool, string) {
	pid, err := strconv.Atoi(pidLabel)
	if err != nil || pid <= 0 {
		return false, "no owner recorded"
	}
	start, _ := strconv.ParseUint(startLabel, 10, 64)
	return owner.Alive(pid, start)
}
