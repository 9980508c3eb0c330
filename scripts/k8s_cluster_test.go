package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/internal/testenv"
)

// startTime is a process's start time in clock ticks since boot (field 22
// of /proc/PID/stat), as k8s-cluster.sh records it beside the PID.
func startTime(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	return fields[19]
}

// TestK8sClusterStalePID: k8s-cluster.sh stops only the processes it
// started. A cluster whose script was killed leaves its PID files behind;
// by the time it is brought up or down again the kernel may have given
// such a PID to another process, which must not be signalled. The script
// records each PID with its start time and checks both (before, a live
// PID was enough: restart killed the stranger). The positive control: a
// PID file that does name the process (its start time matches) stops it.
func TestK8sClusterStalePID(t *testing.T) {
	testenv.Require(t, testenv.Programs("bash", "setsid", "nohup", "sleep"))
	for _, tc := range []struct {
		name     string
		start    string // the PID file's start time; "ours": the process's
		wantLive bool
	}{
		{"a stranger with a reused PID, no start time (as the script wrote them before)", "", true},
		{"a stranger with a reused PID", "1", true},
		{"the process it started", "ours", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, run := t.TempDir(), t.TempDir()
			if err := os.Mkdir(filepath.Join(state, "logs"), 0o755); err != nil {
				t.Fatal(err)
			}
			stranger := exec.Command("sleep", "600")
			if err := stranger.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { stranger.Wait(); close(exited) }()
			t.Cleanup(func() { stranger.Process.Kill(); <-exited })
			st := tc.start
			if st == "ours" {
				st = startTime(t, stranger.Process.Pid)
			}
			write := func(name, data string) {
				if err := os.WriteFile(filepath.Join(run, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write("comp.pid", strings.TrimSpace(strconv.Itoa(stranger.Process.Pid)+" "+st)+"\n")
			write("comp.cmd", "sleep\x00600\x00")

			cmd := exec.Command("bash", filepath.Join(testenv.RepoRoot(), "scripts", "k8s-cluster.sh"), "restart", "comp")
			cmd.Env = append(os.Environ(), "AGENTBOX_K8S_STATE="+state, "AGENTBOX_K8S_RUN="+run)
			out, err := cmd.CombinedOutput()
			t.Logf("restart comp: %s", out)
			if err != nil {
				t.Fatalf("restart: %v", err)
			}
			// The restart started a sleep of its own: stop it (whatever
			// else the PID file holds, its first word is the PID).
			data, err := os.ReadFile(filepath.Join(run, "comp.pid"))
			if err != nil {
				t.Fatal(err)
			}
			f := strings.Fields(string(data))
			started := 0
			if len(f) > 0 {
				started, _ = strconv.Atoi(f[0])
			}
			if started <= 0 || started == stranger.Process.Pid {
				t.Fatalf("comp.pid holds %q: not a new process", data)
			}
			startedAt := startTime(t, started)
			syscall.Kill(started, syscall.SIGKILL)

			select {
			case <-exited:
				if tc.wantLive {
					t.Fatalf("the script killed PID %d, a process it did not start", stranger.Process.Pid)
				}
			case <-time.After(func() time.Duration {
				if tc.wantLive {
					return time.Second // it is signalled before restart returns
				}
				return time.Minute
			}()):
				if !tc.wantLive {
					t.Fatalf("PID %d, which the script started, still runs after restart", stranger.Process.Pid)
				}
			}
			if len(f) != 2 || f[1] != startedAt {
				t.Errorf("comp.pid holds %q, want PID %d and its start time %s", data, started, startedAt)
			}
		})
	}
}
