package guest

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/codegirl-games/agentbox/wire"
)

// holdApp stops (SIGSTOP) or continues (SIGCONT) the running app: its
// process group and every descendant of it (wire.MethodHoldApp). The
// guest is not one of them: it keeps answering.
func (g *Guest) holdApp(req wire.HoldAppRequest) wire.HoldAppResponse {
	var resp wire.HoldAppResponse
	if g.app == nil {
		return resp
	}
	if running, _ := g.app.status(); !running {
		return resp
	}
	sig := syscall.SIGCONT
	if req.Hold {
		sig = syscall.SIGSTOP
	}
	procs := appProcesses(g.app.cmd.Process.Pid, os.Getpid())
	for _, p := range procs {
		if syscall.Kill(p.pid, sig) == nil {
			resp.Processes++
		}
		resp.CPUMS += p.cpuMS
	}
	g.app.held.Store(req.Hold && resp.Processes > 0)
	return resp
}

// proc is one process as /proc/PID/stat tells.
type proc struct {
	pid, ppid, pgrp int
	cpuMS           float64 // user and system time
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on
// every Linux architecture agentbox runs on.
const clockTicks = 100

// readProc reads /proc/PID/stat; false when the process is gone.
func readProc(pid int) (proc, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return proc{}, false
	}
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
	// majflt cmajflt utime stime …: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return proc{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return proc{}, false
	}
	p := proc{pid: pid}
	p.ppid, _ = strconv.Atoi(f[1])
	p.pgrp, _ = strconv.Atoi(f[2])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	p.cpuMS = (ut + st) * 1000 / clockTicks
	return p, true
}

// appProcesses lists the processes of the app whose leader is root: its
// process group and every descendant of root, never self.
func appProcesses(root, self int) []proc {
	entries, _ := os.ReadDir("/proc")
	all := map[int]proc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || pid == 1 {
			continue
		}
		if p, ok := readProc(pid); ok {
			all[pid] = p
		}
	}
	var out []proc
	for pid, p := range all {
		in := p.pgrp == root
		for q, n := pid, 0; !in && q > 1 && n < 64; n++ { // the chain is short; 64 bounds a cycle read mid-change
			if q == root {
				in = true
				break
			}
			pp, ok := all[q]
			if !ok {
				break
			}
			q = pp.ppid
		}
		if in {
			out = append(out, p)
		}
	}
	return out
}
