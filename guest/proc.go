package guest

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// oomKills reads the sandbox cgroup's OOM-kill counter (cgroup v2
// memory.events, or v1 memory.oom_control). It returns -1 when unknown.
func oomKills() int64 {
	for _, p := range []string{"/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"} {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) == 2 && fields[0] == "oom_kill" {
				n, err := strconv.ParseInt(fields[1], 10, 64)
				f.Close()
				if err != nil {
					return -1
				}
				return n
			}
		}
		f.Close()
	}
	return -1
}

// initNames are the PID 1 programs of the sandboxes agentbox makes. The
// guest is PID 1 of a Docker container ("agentbox") and of a Pod's
// container, which runs the small guest binary where the image has it
// ("agentbox-guest", images.GuestSmallPath): without that name a Pod's
// guest refused every reset in place and left detached daemons at its
// end (found by the conformance suite's RelaunchFloor on a cluster,
// 2026-12-06).
var initNames = map[string]bool{"docker-init": true, "tini": true, "bwrap": true, "catatonit": true, "agentbox": true, "agentbox-guest": true}

// killOthers kills every process in the guest's PID namespace except PID 1
// and the guest: detached daemons the app left behind (setsid, double
// fork). It does nothing unless PID 1 is a sandbox init, so a guest run on a
// host by mistake cannot kill the host's processes.
func killOthers() int {
	comm, err := os.ReadFile("/proc/1/comm")
	if err != nil || !initNames[string(bytes.TrimSpace(comm))] {
		return 0
	}
	self := os.Getpid()
	n := 0
	for pass := 0; pass < 3; pass++ {
		entries, _ := os.ReadDir("/proc")
		killed := 0
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == 1 || pid == self {
				continue
			}
			if _, err := os.Stat(filepath.Join("/proc", e.Name())); err != nil {
				continue
			}
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		n += killed
		if killed == 0 {
			break
		}
	}
	return n
}

// waitExited waits until the child pid has ended, without reaping it:
// it stays a zombie, its status readable, until the guest's Wait.
func waitExited(pid int) bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err == nil
		}
	}
}
