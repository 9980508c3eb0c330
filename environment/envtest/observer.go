package envtest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/observe"
)

// testObserver: a sandbox started with the trusted observer records what
// a real app does — files written, renamed into place, made by a child
// `sh -c`, the child's exec, the app's exit with its status — and says
// what it left out past the checkpoint's bound (an overflow event);
// without the observer, Activity is refused.
func (s *suite) testObserver(t *testing.T) {
	script := `#!/bin/sh
mkdir -p "$HOME/out"
echo hello > "$HOME/out/a.txt"
echo draft > "$HOME/.b.tmp" && mv "$HOME/.b.tmp" "$HOME/b.txt"
sh -c 'echo child > "$HOME/out/c.txt"; sleep 600' &
while [ ! -s "$HOME/out/c.txt" ]; do sleep 0.05; done
mkdir "$HOME/many"
i=0
while [ $i -lt 1500 ]; do echo $i > "$HOME/many/f$i"; i=$((i+1)); done
echo ready
exit 4
`
	dir := writeApp(t, `{"command":"run.sh","wait_for_window":false}`, map[string]string{"run.sh": script})
	b := s.newBox(t, func(c *environment.Config) { c.Observe = true })
	if _, err := b.staged(dir, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if !b.sink.waitFor(2*time.Minute, func() bool { return b.sink.exited() != nil }) {
		t.Fatalf("the app did not exit; stdout %q stderr %q", b.sink.stdout(), b.sink.stderr())
	}
	if e := b.sink.exited(); e.Code != 4 || b.sink.stdout() != "ready\n" {
		t.Fatalf("the app: exit %v, stdout %q, stderr %q", e, b.sink.stdout(), b.sink.stderr())
	}
	o, ok := b.env.(environment.Observer)
	if !ok {
		t.Fatalf("%T is not an environment.Observer", b.env)
	}
	// Everything the app did is in the first checkpoint: it had ended.
	evs, err := o.Activity(b.ctx)
	if err != nil {
		t.Fatalf("Activity: %v", err)
	}
	files := map[string]observe.ActivityEvent{}
	var child, app, over bool
	for _, e := range evs {
		switch e.Kind {
		case observe.ActFile:
			files[e.Path] = e
		case observe.ActExec:
			child = child || len(e.Argv) == 3 && e.Argv[0] == "sh" && e.Argv[1] == "-c" && strings.HasPrefix(e.Argv[2], "echo child")
		case observe.ActExit:
			app = app || e.Exit != nil && e.Exit.Code == 4 && len(e.Argv) > 0 && strings.HasSuffix(strings.Join(e.Argv, " "), "run.sh")
		case observe.ActOverflow:
			over = over || strings.Contains(e.Reason, "bound") && e.N > 0
		}
	}
	dump := func() string {
		var b strings.Builder
		for i, e := range evs {
			if i > 40 && i < len(evs)-5 {
				continue
			}
			b.WriteString("  " + e.String() + "\n")
		}
		return b.String()
	}
	hello := sha256.Sum256([]byte("hello\n"))
	if e := files["~/out/a.txt"]; !slices.Contains(e.Ops, observe.OpWritten) || e.SHA256 != hex.EncodeToString(hello[:]) {
		t.Errorf("~/out/a.txt: %+v, want written with the sha256 of hello\n%s", e, dump())
	}
	if e := files["~/b.txt"]; !slices.Contains(e.Ops, observe.OpRenamed) || !slices.Contains(e.Ops, observe.OpWritten) || e.From != "~/.b.tmp" {
		t.Errorf("~/b.txt: %+v, want written and renamed from ~/.b.tmp\n%s", e, dump())
	}
	if e := files["~/out/c.txt"]; !slices.Contains(e.Ops, observe.OpWritten) {
		t.Errorf("~/out/c.txt (the child's): %+v, want written\n%s", e, dump())
	}
	if !child || !app {
		t.Errorf("the child sh -c's exec seen %v, the app's exit 4 seen %v\n%s", child, app, dump())
	}
	// The bound keeps the events in the order the observer saw them: the
	// directory of 1500 files is made after the files above, so its
	// events come after theirs however late the observer looks. (Made at
	// the start beside ~/out, on a loaded machine the observer found it
	// already full when it first looked — 1500 files before ~/b.txt's
	// rename — and the bound cut ~/b.txt.)
	if !over || len(evs) > 1000+8 {
		t.Errorf("1500 files in one checkpoint: %d events, overflow event %v, want at most the bound and an overflow\n%s", len(evs), over, dump())
	}
	// The next checkpoint starts afresh.
	if evs, err = o.Activity(b.ctx); err != nil {
		t.Fatalf("Activity: %v", err)
	}
	for _, e := range evs {
		if e.Kind == observe.ActFile {
			t.Errorf("second checkpoint: %s, want no file events", e)
		}
	}

	// Without the observer, Activity says so.
	b2 := s.newBox(t)
	if _, err := b2.env.(environment.Observer).Activity(b2.ctx); !errors.Is(err, environment.ErrNoObserver) {
		t.Errorf("Activity without the observer: %v, want ErrNoObserver", err)
	}
}
