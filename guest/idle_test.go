package guest

import (
	"os/exec"
	"testing"
	"time"
)

// TestAppLoad: a process of the app (its environment names the clock
// file) that spins is busy; one that sleeps is idle once looked at twice;
// a process of another clock file is not the app's.
func TestAppLoad(t *testing.T) {
	start := func(clockFile, script string) {
		cmd := exec.Command("sh", "-c", script)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "FAKETIME_TIMESTAMP_FILE=" + clockFile}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	look := func(l *appLoad) bool {
		l.busy()
		time.Sleep(200 * time.Millisecond)
		return l.busy()
	}
	for _, c := range []struct {
		name, script string
		busy         bool
	}{
		{"sleeping", "exec sleep 60", false},
		{"spinning", "while :; do :; done", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := t.TempDir() + "/faketime"
			start(file, c.script)
			// A sleeping app is idle once it has started (a busy machine
			// may take a while): looked at until then, at most 20 s.
			l := newAppLoad(file)
			got := look(l)
			for deadline := time.Now().Add(20 * time.Second); got && !c.busy && time.Now().Before(deadline); {
				got = look(l)
			}
			if got != c.busy {
				t.Errorf("busy = %v, want %v", got, c.busy)
			}
			if c.busy {
				// Not the app of another clock: that app has no process.
				if look(newAppLoad(file + ".other")) {
					t.Error("a process of another clock file counted as the app's")
				}
			}
		})
	}
}
