package eval

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/trace"
)

// TestProgressEscapes: an episode's message (an agent's words, the app's
// last output) cannot move the cursor, rewrite the status line or set the
// terminal's title: the only control sequence in eval's progress is its
// own status-line redraw, and only on a terminal.
func TestProgressEscapes(t *testing.T) {
	const evil = "\x1b[1A\x1b[2K\rsuccess: all passed\n\x1b]0;pwned\x07\u009b2J"
	for _, terminal := range []bool{false, true} {
		var b bytes.Buffer
		p := newProgress(&b, terminal, 2, 1)
		p.started()
		p.finished(&Episode{Task: "task\x1b]0;t\x07", N: 1, Category: Failed, Outcome: trace.Failure, Reason: trace.ReasonGaveUp, Message: evil})
		p.stop()
		out := strings.ReplaceAll(b.String(), "\r\x1b[K", "") // eval's own redraw
		if strings.ContainsAny(out, "\x1b\r\x07") || strings.Contains(out, "\u009b") {
			t.Errorf("terminal=%v: progress holds control characters: %q", terminal, b.String())
		}
		if !strings.Contains(out, `\x1b]0;pwned\x07`) {
			t.Errorf("terminal=%v: the message is not shown: %q", terminal, out)
		}
		if strings.Count(out, "\n") > 2 {
			t.Errorf("terminal=%v: the message broke the line: %q", terminal, out)
		}
	}
	var b bytes.Buffer
	s := &Summary{Tasks: []TaskSummary{{Name: "t\x1b[2J", Episodes: 1, Failed: 1, Reasons: map[string]int{"gave_up\x1b]0;x\x07": 1}}}}
	s.PrintTable(&b)
	if strings.ContainsAny(b.String(), "\x1b\x07") {
		t.Errorf("table holds control characters: %q", b.String())
	}
}

// TestProgressNotes: an episode's agent's retry lines appear under the
// episode's name, escaped, and on a terminal above the status line.
func TestProgressNotes(t *testing.T) {
	for _, terminal := range []bool{false, true} {
		var b bytes.Buffer
		p := newProgress(&b, terminal, 2, 1)
		p.started()
		w := p.notes(&Episode{Task: "mover", N: 2})
		fmt.Fprintf(w, "agentbox: model request failed (HTTP 503 Service Unavailable), retrying in 2s (attempt 2 of 5)\n")
		fmt.Fprintf(w, "agentbox: model request failed (\x1b[2J), retrying in 4s (attempt 3 of 5)\n")
		p.stop()
		out := strings.ReplaceAll(b.String(), "\r\x1b[K", "")
		for _, want := range []string{
			"mover #2: model request failed (HTTP 503 Service Unavailable), retrying in 2s (attempt 2 of 5)\n",
			`mover #2: model request failed (\x1b[2J), retrying in 4s (attempt 3 of 5)` + "\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("terminal=%v: no %q in %q", terminal, want, b.String())
			}
		}
	}
}

// TestProgressNotesWholeLines: a line written in parts (a verbose step:
// the action, then its message, then the newline) is shown as one line
// under the episode's name.
func TestProgressNotesWholeLines(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, false, 1, 1)
	w := p.notes(&Episode{Task: "mover", N: 1})
	fmt.Fprintf(w, "step 1: key_down Right")
	fmt.Fprintf(w, " — holding Right")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "step 2: wait 1000ms\nstep 3: key_up Right\n")
	p.stop()
	want := "mover #1: step 1: key_down Right — holding Right\nmover #1: step 2: wait 1000ms\nmover #1: step 3: key_up Right\n"
	if !strings.HasSuffix(b.String(), want) {
		t.Errorf("progress %q, want it to end with %q", b.String(), want)
	}
}

// TestProgressLine: an episode's line says "1 step", not "1 steps", and
// its time in the one format of eval's durations.
func TestProgressLine(t *testing.T) {
	var b bytes.Buffer
	p := newProgress(&b, false, 2, 1)
	p.started()
	p.finished(&Episode{Task: "mover", N: 1, Category: Interrupted, Outcome: trace.Interrupted, Reason: trace.ReasonSignal, Message: "Ctrl-C", Steps: 1, DurationMS: 900})
	p.stop()
	if !strings.Contains(b.String(), "in 0.90s, 1 step — ") {
		t.Errorf("want \"in 0.90s, 1 step\": %q", b.String())
	}
}
