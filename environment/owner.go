package environment

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcessStart returns a process's start time in clock ticks since boot
// (field 22 of /proc/PID/stat), which with the PID identifies a process
// across PID reuse; 0 if unknown. Backends label their sandboxes with
// their owner's PID and start time so that a reaper can tell an orphan.
func ProcessStart(pid int) uint64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state); start time is field 22.
	if len(fields) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(fields[19], 10, 64)
	return v
}

// OwnerAlive reports whether the process that created a sandbox, as its
// labels recorded it (PID and ProcessStart, in decimal), still runs: same
// PID and same start time; else why not.
func OwnerAlive(pidLabel, startLabel string) (bool, string) {
	pid, err := strconv.Atoi(pidLabel)
	if err != nil || pid <= 0 {
		return false, "no owner recorded"
	}
	start := ProcessStart(pid)
	if start == 0 {
		return false, fmt.Sprintf("owner pid %d is gone", pid)
	}
	if want, err := strconv.ParseUint(startLabel, 10, 64); err == nil && want != 0 && want != start {
		return false, fmt.Sprintf("owner pid %d was reused by another process", pid)
	}
	return true, ""
}
