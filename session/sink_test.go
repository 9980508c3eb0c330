package session

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/codegirl-games/agentbox/observe"
)

// TestSinkCutsLongLinesAtRunes: an output line longer than maxLineBytes is
// cut at a character boundary, so the agent is shown valid UTF-8 (the cut
// used to split the character at byte maxLineBytes).
func TestSinkCutsLongLinesAtRunes(t *testing.T) {
	for _, line := range []string{
		"a" + strings.Repeat("é", maxLineBytes),  // the cut falls inside an é
		"ab" + strings.Repeat("語", maxLineBytes), // inside a 3-byte character
		strings.Repeat("x", maxLineBytes+1),      // ASCII: cut at the limit
	} {
		s := &sink{partial: map[observe.Stream][]byte{}}
		s.addLine(observe.Stdout, []byte(line))
		got := s.takeLines()
		if len(got) != 1 {
			t.Fatalf("%d lines, want 1", len(got))
		}
		text := got[0].Text
		if !utf8.ValidString(text) {
			t.Errorf("cut line %.20q… is not valid UTF-8 (ends %q)", text, text[max(len(text)-30, 0):])
		}
		body, ok := strings.CutSuffix(text, " …[line truncated]")
		if !ok || !strings.HasPrefix(line, body) || len(body) > maxLineBytes || len(body) < maxLineBytes-utf8.UTFMax {
			t.Errorf("cut line: %d bytes kept, marked %v; want a prefix of about %d bytes and the marker", len(body), ok, maxLineBytes)
		}
	}
}
