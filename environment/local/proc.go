package local

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processStart returns a process's start time in clock ticks since boot
// (field 22 of /proc/PID/stat), which with the PID identifies a process
// across PID reuse; 0 if the process is gone.
func processStart(pid int) uint64 {
	st, ok := readStat(pid)
	if !ok {
		return 0
	}
	return st.start
}

type procStat struct {
	state byte
	ppid  int
	start uint64
}

func readStat(pid int) (procStat, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	// fields[0] is field 3 (state), fields[1] field 4 (ppid), fields[19]
	// field 22 (start time).
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(fields[1])
	start, _ := strconv.ParseUint(fields[19], 10, 64)
	return procStat{state: fields[0][0], ppid: ppid, start: start}, true
}

// running reports whether the process pid that started at start still
// runs (a zombie no longer does: all it held is released).
func running(pid int, start uint64) bool {
	st, ok := readStat(pid)
	return ok && st.start == start && st.state != 'Z' && st.state != 'X'
}

// children lists the direct children of pid.
func children(pid int) []int {
	p := strconv.Itoa(pid)
	data, err := os.ReadFile("/proc/" + p + "/task/" + p + "/children")
	if err == nil {
		var out []int
		for _, f := range strings.Fields(string(data)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
		return out
	}
	// Kernels without CONFIG_PROC_CHILDREN: scan.
	var out []int
	for _, q := range pids() {
		if st, ok := readStat(q); ok && st.ppid == pid {
			out = append(out, q)
		}
	}
	return out
}

// pids lists every process visible in /proc.
func pids() []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	out := make([]int, 0, len(names))
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// pidNS names a process's PID namespace ("pid:[4026532283]"), "" if unknown.
func pidNS(pid int) string {
	s, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	if err != nil {
		return ""
	}
	return s
}

// inPIDNS lists the live processes of a PID namespace.
func inPIDNS(ns string) []int {
	var out []int
	for _, pid := range pids() {
		if pidNS(pid) == ns {
			if st, ok := readStat(pid); ok && st.state != 'Z' && st.state != 'X' {
				out = append(out, pid)
			}
		}
	}
	return out
}

// cmdline returns a process's argv.
func cmdline(pid int) []string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(data) == 0 {
		return nil
	}
	return strings.Split(string(bytes.TrimRight(data, "\x00")), "\x00")
}

// sandboxRun returns the run ID a bubblewrap process of this backend was
// started for (its --setenv AGENTBOX_RUN_ID argument), or "" if pid is not
// one.
func sandboxRun(pid int) (string, bool) {
	argv := cmdline(pid)
	if len(argv) == 0 || !strings.HasSuffix(argv[0], "bwrap") {
		return "", false
	}
	for i := 0; i+2 < len(argv); i++ {
		if argv[i] == "--setenv" && argv[i+1] == runIDEnv {
			return argv[i+2], true
		}
	}
	return "", false
}

// kill sends SIGKILL to pid if it is still the process that started at
// start.
func kill(pid int, start uint64) {
	if pid > 0 && start != 0 && processStart(pid) == start {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
