package environment

import (
	"strconv"
	"testing"
)

func TestReapDecide(t *testing.T) {
	r := Reaping{Host: "here", PID: 42, Alive: func(pid, start string) (bool, string) {
		if pid == "7" && start == "100" {
			return true, ""
		}
		return false, "owner pid " + pid + " is gone"
	}}
	live := Owner{Host: "here", PID: "7", Start: "100", RunID: "run-a"}
	gone := Owner{Host: "here", PID: "8", Start: "100", RunID: "run-a"}
	mine := Owner{Host: "here", PID: "42", Start: "1", RunID: "run-b"}
	remote := Owner{Host: "there", PID: "8", Start: "100", RunID: "run-c"}
	for _, tt := range []struct {
		name   string
		opts   ReapOptions
		owner  Owner
		reap   bool
		reason string
	}{
		{"default: owner alive", ReapOptions{}, live, false, ""},
		{"default: owner gone", ReapOptions{}, gone, true, "owner pid 8 is gone"},
		{"default: no owner recorded", ReapOptions{}, Owner{Host: "here"}, true, "owner pid  is gone"},
		{"default: another host's", ReapOptions{}, remote, false, ""},
		{"default: this process's own, alive", ReapOptions{}, Owner{Host: "here", PID: "7", Start: "100"}, false, ""},
		{"all: alive", ReapOptions{All: true}, live, true, "--all"},
		{"all: another host's", ReapOptions{All: true}, remote, true, "--all"},
		{"all wins over run", ReapOptions{All: true, RunID: "run-z"}, live, true, "--all"},
		{"run: that run, owner alive", ReapOptions{RunID: "run-a"}, live, true, "run run-a"},
		{"run: that run, another host", ReapOptions{RunID: "run-c"}, remote, true, "run run-c"},
		{"run: another run", ReapOptions{RunID: "run-a"}, mine, false, ""},
		{"run: no run recorded", ReapOptions{RunID: "run-a"}, Owner{Host: "here"}, false, ""},
		{"run wins over mine", ReapOptions{RunID: "run-a", Mine: true}, live, true, "run run-a"},
		{"mine: this process's", ReapOptions{Mine: true}, mine, true, "forced stop"},
		{"mine: a gone owner's is not mine", ReapOptions{Mine: true}, gone, false, ""},
		{"mine: same PID on another host", ReapOptions{Mine: true}, Owner{Host: "there", PID: "42"}, false, ""},
		{"dry run decides the same", ReapOptions{DryRun: true}, gone, true, "owner pid 8 is gone"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reap, reason := tt.opts.Decide(r, tt.owner)
			if reap != tt.reap || reason != tt.reason {
				t.Errorf("Decide(%+v, %+v) = %v, %q; want %v, %q", tt.opts, tt.owner, reap, reason, tt.reap, tt.reason)
			}
		})
	}
}

// TestThisProcess: the real Reaping keeps a sandbox its own process
// created and reaps one whose owner never ran.
func TestThisProcess(t *testing.T) {
	r := ThisProcess()
	if r.Host == "" || r.PID <= 0 {
		t.Fatalf("ThisProcess() = %+v", r)
	}
	self := Owner{Host: r.Host, PID: strconv.Itoa(r.PID)}
	if reap, why := (ReapOptions{}).Decide(r, self); reap {
		t.Errorf("the running process's own sandbox would be reaped: %s", why)
	}
	if reap, why := (ReapOptions{}).Decide(r, Owner{Host: r.Host, PID: "2147483647"}); !reap || why == "" {
		t.Errorf("a gone owner's sandbox: reap %v, %q", reap, why)
	}
}
