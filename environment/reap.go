package environment

import (
	"os"
	"strconv"
)

// Owner is what a sandbox recorded of the agentbox that created it (the
// Docker backend in labels, Kubernetes in annotations): its host, PID and
// owner.Start (decimal), and the run's full ID.
type Owner struct {
	Host, PID, Start, RunID string
}

// Reaping is who decides: the reaping process's host and PID, and how it
// tells whether a sandbox's owner still runs.
type Reaping struct {
	Host string
	PID  int
	// Alive reports whether the owner (PID and start as recorded) still
	// runs, and if not why; OwnerAlive for backends that label their
	// sandboxes.
	Alive func(pid, start string) (bool, string)
}

// ThisProcess is the Reaping of the calling process, with OwnerAlive.
func ThisProcess() Reaping {
	host, _ := os.Hostname()
	return Reaping{Host: host, PID: os.Getpid(), Alive: OwnerAlive}
}

// Decide is the one rule every Reaper applies to a sandbox it found: with
// All, everything goes ("--all"); with RunID, exactly that run's
// sandboxes, owners alive or not ("run ID"); with Mine, the ones this
// process created ("forced stop"); by default the ones created on this host
// whose owner is gone (the reason is Alive's), never another host's (its
// own gc sees to them). It returns false and "" for a sandbox to keep.
func (opts ReapOptions) Decide(r Reaping, o Owner) (reap bool, reason string) {
	switch {
	case opts.All:
		return true, "--all"
	case opts.RunID != "":
		if o.RunID != opts.RunID {
			return false, "" // another run (its label may be the same, shortened)
		}
		return true, "run " + opts.RunID
	case opts.Mine:
		if o.Host != r.Host || o.PID != strconv.Itoa(r.PID) {
			return false, ""
		}
		return true, "forced stop"
	case o.Host != r.Host:
		return false, "" // another machine's
	}
	if alive, why := r.Alive(o.PID, o.Start); !alive {
		return true, why
	}
	return false, ""
}
