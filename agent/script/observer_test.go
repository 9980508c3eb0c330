package script

import (
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/observe"
)

// TestObserverChecks: file_written matches a written file below the home
// by the collect's patterns; process matches a command line, and with
// exit only a status the observer saw; a miss says what was seen and
// what was left out.
func TestObserverChecks(t *testing.T) {
	three := observe.Exit{Code: 3}
	act := []observe.ActivityEvent{
		{Kind: observe.ActExec, PID: 10, Argv: []string{"sh", "-c", "echo hi > ~/out/a.txt"}},
		{Kind: observe.ActExec, PID: 11, Argv: []string{"sleep", "1"}},
		{Kind: observe.ActExit, PID: 10, Argv: []string{"sh", "-c", "echo hi > ~/out/a.txt"}, Exit: &three},
		{Kind: observe.ActExit, PID: 11, Argv: []string{"sleep", "1"}},
		{Kind: observe.ActUnseen, N: 4},
		{Kind: observe.ActFile, Path: "~/out/a.txt", Ops: []string{"created", "written"}},
		{Kind: observe.ActFile, Path: "~/docs", Ops: []string{"created"}, Dir: true},
		{Kind: observe.ActFile, Path: "~/gone.txt", Ops: []string{"deleted"}},
		{Kind: observe.ActFile, Path: "/tmp/x", Ops: []string{"written"}},
		{Kind: observe.ActOverflow, Reason: "the kernel's file event queue overflowed: file changes were lost"},
	}
	for _, c := range []struct {
		src  string
		ok   bool
		seen string
	}{
		{`{expect: file_written, path: "~/out/*.txt"}`, true, "file ~/out/a.txt created, written"},
		{`{expect: file_written, path: "~/**/a.txt"}`, true, ""},
		{`{expect: file_written, path: "~/out"}`, true, ""}, // a directory names what is in it
		{`{expect: file_written, path: "~/docs"}`, false, "2 files written, none matching; the last: file /tmp/x written; 4 short-lived processes or threads unseen; 1 overflow events"},
		{`{expect: file_written, path: "~/gone.txt"}`, false, ""},
		{`{expect: file_written, path: "~/x"}`, false, ""}, // /tmp/x is not below the home
		{`{expect: process, argv: "sh -c *"}`, true, "exec [sh -c \"echo hi > ~/out/a.txt\"] (pid 10)"},
		{`{expect: process, argv: "/^sleep [0-9]+$/"}`, true, ""},
		{`{expect: process, argv: "sh -c *", exit: 3}`, true, "exit [sh -c \"echo hi > ~/out/a.txt\"] (pid 10): exit code 3"},
		{`{expect: process, argv: "sh -c *", exit: 0}`, false, ""},
		{`{expect: process, argv: "sleep 1", exit: 0}`, false, "(its status was not seen: the observer polls)"},
		{`{expect: process, argv: "convert *"}`, false, "2 processes, none matching; the last: exec [sleep 1] (pid 11)"},
	} {
		s, err := Parse("play.yaml", []byte("steps:\n  - "+c.src+"\n"), observe.DefaultScreen)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		if !s.NeedsObserver() {
			t.Errorf("%s: NeedsObserver false", c.src)
		}
		v := s.Steps[0].Check.evaluate(world{obs: &observe.Observation{}, act: act})
		if v.OK != c.ok || !strings.Contains(v.Seen, c.seen) {
			t.Errorf("%s: %+v, want ok %v, seen containing %q", c.src, v, c.ok, c.seen)
		}
	}
	s, err := Parse("play.yaml", []byte("steps:\n  - {expect: running}\n"), observe.DefaultScreen)
	if err != nil || s.NeedsObserver() {
		t.Errorf("a script without observer checks: NeedsObserver true (%v)", err)
	}
}
