package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/codegirl-games/agentbox/environment"
)

var _ environment.Reaper = (*Backend)(nil)

// Reap implements environment.Reaper. bubblewrap runs with
// --die-with-parent and a parent-death signal, so a killed agentbox
// normally leaves nothing; this finds what slipped through anyway:
// sandboxes (bubblewrap processes of this backend, told apart by their
// AGENTBOX_RUN_ID) whose agentbox is gone, and empty cgroups of owners that
// are gone.
func (*Backend) Reap(ctx context.Context, opts environment.ReapOptions) ([]environment.Reaped, error) {
	var out []environment.Reaped
	// A sandbox's owner is its bubblewrap's parent: gone when the
	// bubblewrap was reparented to init.
	here := environment.ThisProcess()
	here.Alive = func(pid, _ string) (bool, string) {
		if pid == "1" {
			return false, "its agentbox is gone"
		}
		return true, ""
	}
	// Decide on a snapshot first: killing a bubblewrap reparents its child
	// (the sandbox's init), which must not then look like a sandbox of its
	// own.
	type victim struct {
		pid   int
		start uint64
	}
	var victims []victim
	var cgs []*cgroup // the victims' sandbox cgroups
	p := cgroups()
	for _, pid := range pids() {
		run, ok := sandboxRun(pid)
		if !ok {
			continue
		}
		st, ok := readStat(pid)
		if !ok || st.state == 'Z' {
			continue
		}
		if prun, ok := sandboxRun(st.ppid); ok && prun == run {
			continue // the sandbox's init; it goes with its bubblewrap
		}
		r := environment.Reaped{ID: "bwrap-" + strconv.Itoa(pid), Name: "bwrap-" + strconv.Itoa(pid), RunID: run, Owner: ownerOf(st.ppid)}
		var reap bool
		reap, r.Reason = opts.Decide(here, environment.Owner{Host: here.Host, PID: strconv.Itoa(st.ppid), RunID: run})
		if !reap {
			continue
		}
		if !opts.DryRun {
			if cg := sandboxCgroupOf(pid, p); cg != nil {
				cgs = append(cgs, cg)
			}
			victims = append(victims, victim{pid, processStart(pid)})
			for _, k := range children(pid) {
				victims = append(victims, victim{k, processStart(k)})
			}
			r.Removed = true
		}
		out = append(out, r)
	}
	for _, v := range victims {
		if processStart(v.pid) == v.start {
			_ = syscall.Kill(-v.pid, syscall.SIGKILL) // its process group, if it leads one
		}
		kill(v.pid, v.start)
	}
	// Their cgroups go with them (a Close that follows finds them gone).
	for _, cg := range cgs {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_ = cg.remove(rctx)
		cancel()
	}
	if p.usable() && !opts.Mine && opts.RunID == "" {
		out = append(out, reapCgroups(ctx, p, opts)...)
	}
	return out, nil
}

// sandboxCgroupOf is the sandbox cgroup (v2) or cgroups (v1) under p that
// process pid is in, from /proc/PID/cgroup; nil if it is in none.
func sandboxCgroupOf(pid int, p cgroupParent) *cgroup {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil || !p.usable() {
		return nil
	}
	cg := &cgroup{}
	if p.version == 1 {
		cg.v1 = map[string]string{}
	}
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		rel := filepath.Clean("/" + f[2])
		if !strings.HasPrefix(filepath.Base(rel), "sandbox-") {
			continue
		}
		if p.version == 2 && f[0] == "0" && f[1] == "" {
			if d := filepath.Join(cgroupRoot, rel); filepath.Dir(d) == p.dir {
				cg.dir = d
			}
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			if parent := p.v1[c]; parent != "" {
				if d := filepath.Join(cgroupRoot, c, rel); filepath.Dir(d) == parent {
					cg.v1[c] = d
				}
			}
		}
	}
	if cg.v1 != nil {
		cg.dir = cg.v1["memory"]
	}
	if cg.dir == "" {
		return nil
	}
	return cg
}

func ownerOf(ppid int) string {
	host, _ := os.Hostname()
	return host + "/" + strconv.Itoa(ppid)
}

// reapCgroups removes sandbox cgroups whose owning agentbox is gone: on
// cgroup v1, a sandbox's cgroups of the same name in every hierarchy.
func reapCgroups(ctx context.Context, p cgroupParent, opts environment.ReapOptions) []environment.Reaped {
	parents := map[string]string{"": p.dir}
	if p.version == 1 {
		parents = p.v1
	}
	found := map[string]*cgroup{}
	var names []string
	for _, c := range append([]string{""}, v1Order...) {
		if parents[c] == "" {
			continue
		}
		entries, _ := os.ReadDir(parents[c])
		for _, en := range entries {
			if !en.IsDir() || !strings.HasPrefix(en.Name(), "sandbox-") {
				continue
			}
			cg := found[en.Name()]
			if cg == nil {
				cg = &cgroup{}
				if p.version == 1 {
					cg.v1 = map[string]string{}
				}
				found[en.Name()] = cg
				names = append(names, en.Name())
			}
			d := filepath.Join(parents[c], en.Name())
			if p.version == 1 {
				cg.v1[c] = d
			}
			if c == "" || c == "memory" || cg.dir == "" {
				cg.dir = d
			}
		}
	}
	var out []environment.Reaped
	for _, name := range names {
		var pid, seq int
		var start uint64
		if _, err := fmt.Sscanf(name, "sandbox-%d-%d-%d", &pid, &start, &seq); err != nil {
			continue
		}
		if !opts.All && running(pid, start) {
			continue
		}
		cg := found[name]
		r := environment.Reaped{ID: name, Name: cg.dir, Owner: ownerOf(pid), Reason: "cgroup of a gone agentbox"}
		if opts.All {
			r.Reason = "--all"
		}
		if !opts.DryRun {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			r.Err = cg.remove(rctx)
			cancel()
			r.Removed = r.Err == nil
		}
		out = append(out, r)
	}
	return out
}

// Leftovers lists the processes of the run named runID that still exist
// (bubblewrap and the sandbox's init carry the run's ID in their command
// line), as "bwrap-PID".
func Leftovers(_ context.Context, runID string) ([]string, error) {
	var out []string
	for _, pid := range pids() {
		if run, ok := sandboxRun(pid); ok && run == runID {
			if st, ok := readStat(pid); ok && st.state != 'Z' {
				out = append(out, "bwrap-"+strconv.Itoa(pid))
			}
		}
	}
	return out, nil
}
