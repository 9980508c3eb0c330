package pool_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/app"
	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/pool"
	"github.com/codegirl-games/agentbox/session"
)

// TestRealCreateCloseCost is a measurement, not a check: the wall time
// and the CPU (the whole machine's, from /proc/stat, and the Docker
// daemons' and this process's own) of creating a pool's mover sandbox
// (staged, as the pool makes them) and of removing one, one at a time,
// AGENTBOX_COST_N of each (default 6), on each real backend (or only the
// one AGENTBOX_FILL_BACKEND names, as TestRealFillRate reads it). It runs
// only when AGENTBOX_COST=1; measure on an otherwise idle machine.
func TestRealCreateCloseCost(t *testing.T) {
	if os.Getenv("AGENTBOX_COST") != "1" {
		t.Skip("a measurement: set AGENTBOX_COST=1")
	}
	n := envInt("AGENTBOX_COST_N", 6)
	only := os.Getenv("AGENTBOX_FILL_BACKEND")
	for _, rb := range realBackends() {
		if only != "" && only != rb.name {
			continue
		}
		t.Run(rb.name, func(t *testing.T) {
			rb.require(t)
			testenv.Require(t, testenv.Slow("creates real sandboxes"))
			guest := testenv.Build(t, "./cmd/agentbox")
			bundle := moverBundle(t)
			cfg := session.Config{Backend: rb.backend, App: bundle, Env: environment.Config{Image: rb.image, GuestBinary: guest}}
			_, env, err := pool.KeyOf(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			var envs []environment.Environment
			defer func() {
				for _, e := range envs {
					e.Close(context.Background())
				}
			}()
			var ids []string
			cost := func(withContainers bool) (machine, daemons, own time.Duration) {
				c := time.Duration(0)
				if withContainers {
					c = containersCPU(ids)
				}
				return machineCPU(), daemonsCPU(), selfCPU() + descendantsCPU() + c
			}
			var cw, cc, cd, cs time.Duration
			for i := range n {
				c := env
				c.RunID = fmt.Sprintf("pool-cost-%d-%d", os.Getpid(), i)
				m0, d0, s0 := cost(true)
				t0 := time.Now()
				e, err := rb.backend.Create(ctx, c)
				if err != nil {
					t.Fatal(err)
				}
				envs = append(envs, e)
				ids = append(ids, e.Info().ID)
				if st, ok := e.(interface {
					Stage(context.Context, *app.Bundle) error
				}); ok {
					if err := st.Stage(ctx, bundle); err != nil {
						t.Fatal(err)
					}
				}
				cw += time.Since(t0)
				time.Sleep(300 * time.Millisecond) // the X server and WM settle: their start counts
				m1, d1, s1 := cost(true)
				cc += m1 - m0
				cd += d1 - d0
				cs += s1 - s0
			}
			time.Sleep(time.Second)
			var kw, kc, kd, ks time.Duration
			for _, e := range envs {
				m0, d0, s0 := cost(false)
				t0 := time.Now()
				if err := e.Close(ctx); err != nil {
					t.Error(err)
				}
				kw += time.Since(t0)
				time.Sleep(300 * time.Millisecond) // what the close leaves running counts
				m1, d1, s1 := cost(false)
				kc += m1 - m0
				kd += d1 - d0
				ks += s1 - s0
			}
			envs = nil
			load, _ := os.ReadFile("/proc/loadavg")
			d := time.Duration(n)
			t.Logf("%s, per sandbox over %d: create+stage wall %v, CPU: the sandbox and this process %v, the docker daemons %v (machine %v); close wall %v, CPU: the sandbox and this process %v, the daemons %v (machine %v); load %.14s",
				rb.name, n, (cw / d).Round(time.Millisecond), (cs / d).Round(time.Millisecond), (cd / d).Round(time.Millisecond), (cc / d).Round(time.Millisecond),
				(kw / d).Round(time.Millisecond), (ks / d).Round(time.Millisecond), (kd / d).Round(time.Millisecond), (kc / d).Round(time.Millisecond), load)
		})
	}
}

// machineCPU is the CPU time the whole machine spent busy (every state
// of /proc/stat's cpu line but idle and iowait).
func machineCPU() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	var busy int64
	for i, s := range f[1:] {
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest times are in user already
			continue
		}
		v, _ := strconv.ParseInt(s, 10, 64)
		busy += v
	}
	return time.Duration(busy) * 10 * time.Millisecond // USER_HZ 100
}

// procStat is one process's /proc/PID/stat: its command and the fields
// after it.
type procStat struct {
	comm, fields string
}

// procStats reads every process's /proc/PID/stat.
func procStats() map[int]procStat {
	ents, _ := os.ReadDir("/proc")
	out := map[int]procStat{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(data)
		i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if i < 0 || j < i || j+2 > len(s) {
			continue
		}
		out[pid] = procStat{comm: s[i+1 : j], fields: s[j+2:]}
	}
	return out
}

// daemonsCPU is the CPU time of dockerd, containerd and the containers'
// shims now running.
func daemonsCPU() time.Duration {
	var sum int64
	for _, p := range procStats() {
		if p.comm == "dockerd" || p.comm == "containerd" || strings.HasPrefix(p.comm, "containerd-shim") {
			sum += statCPU(p.fields, true)
		}
	}
	return time.Duration(sum) * 10 * time.Millisecond
}

// statCPU is utime + stime (and the reaped children's, with children) of
// a /proc/PID/stat's fields after the command, in clock ticks.
func statCPU(fields string, children bool) int64 {
	f := strings.Fields(fields)
	n := 2
	if children {
		n = 4
	}
	var sum int64
	for k := 11; k < 11+n && k < len(f); k++ {
		v, _ := strconv.ParseInt(f[k], 10, 64)
		sum += v
	}
	return sum
}

// descendantsCPU is the CPU time of this process's live descendants
// (their own, and their reaped children's).
func descendantsCPU() time.Duration {
	procs := procStats()
	parent := map[int]int{}
	for pid, p := range procs {
		if f := strings.Fields(p.fields); len(f) > 1 {
			parent[pid], _ = strconv.Atoi(f[1])
		}
	}
	self := os.Getpid()
	var sum int64
	for pid := range parent {
		for q := parent[pid]; q > 1; q = parent[q] {
			if q == self {
				sum += statCPU(procs[pid].fields, true)
				break
			}
		}
	}
	return time.Duration(sum) * 10 * time.Millisecond
}

// containersCPU is the CPU time of the Docker containers whose IDs begin
// with one of ids (cgroup v1's cpuacct).
func containersCPU(ids []string) time.Duration {
	ents, _ := os.ReadDir("/sys/fs/cgroup/cpuacct/docker")
	var sum int64
	for _, e := range ents {
		for _, id := range ids {
			if id != "" && strings.HasPrefix(e.Name(), id) {
				data, _ := os.ReadFile("/sys/fs/cgroup/cpuacct/docker/" + e.Name() + "/cpuacct.usage")
				v, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
				sum += v
			}
		}
	}
	return time.Duration(sum)
}

// selfCPU is this process's CPU time and its reaped children's.
func selfCPU() time.Duration {
	var ru, rc syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &rc)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(ru.Utime) + tv(ru.Stime) + tv(rc.Utime) + tv(rc.Stime)
}
