package eval

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/trace"
)

// TestResumeReruns: eval --resume keeps an episode that finished, and
// runs again (its trace moved aside) one the infrastructure ended — a
// Kubernetes node lost under it — as it does a crashed one.
func TestResumeReruns(t *testing.T) {
	out := t.TempDir()
	write := func(n int, outcome trace.Outcome, reason, msg string) {
		t.Helper()
		w, err := trace.Create(filepath.Join(out, "keys", "00"+string(rune('0'+n))), trace.Run{ID: "r", Started: time.Now()}, trace.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Finish(func(r *trace.Run) { r.Outcome, r.Reason, r.Message = outcome, reason, msg }); err != nil {
			t.Fatal(err)
		}
	}
	write(1, trace.Success, trace.ReasonDone, "")
	write(2, trace.Error, trace.ReasonEnvironment, "the attach stream broke: …; the pod's node agentbox-node-2 is NotReady")
	write(3, trace.Failure, trace.ReasonDone, "")
	for n, want := range map[int]bool{1: true, 2: false, 3: true} {
		ep := &Episode{Task: "keys", N: n}
		done, err := finishedEpisode(ep, out)
		if err != nil || done != want {
			t.Errorf("episode %d: finished %v, %v; want %v", n, done, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "keys", "002.crashed-1", trace.RunFile)); err != nil {
		t.Errorf("the infrastructure's episode was not moved aside: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "keys", "002")); !os.IsNotExist(err) {
		t.Errorf("002 is still there: %v", err)
	}
}
