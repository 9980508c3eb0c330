package xevents

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json")

// TestParseGolden parses real xev output (Xvfb, xdotool: a move, a left
// click, shift+a, "é", a right click) against its golden events.
func TestParseGolden(t *testing.T) {
	out, err := os.ReadFile(filepath.Join("testdata", "xev.txt"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(Parse(string(out)), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "xev.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Parse differs from %s (run with -update after checking):\n%s", golden, got)
	}
}

// TestLineCompletesEvents: the streaming parser hands an event over only
// when it is whole, never half-read.
func TestLineCompletesEvents(t *testing.T) {
	out, _ := os.ReadFile(filepath.Join("testdata", "xev.txt"))
	var p Parser
	var n int
	for _, line := range strings.Split(string(out), "\n") {
		if e := p.Line(line); e != nil {
			n++
			if e.Type == "KeyPress" && e.Keysym == 0 {
				t.Errorf("a KeyPress was handed over before its keysym line: %+v", e)
			}
			if e.Type == "ButtonPress" && e.Button == 0 {
				t.Errorf("a ButtonPress was handed over before its button line: %+v", e)
			}
		}
	}
	if all := len(Parse(string(out))); n != all {
		t.Errorf("Line completed %d events, Parse found %d", n, all)
	}
	keys := Filter(Parse(string(out)), "KeyPress")
	var typed []string
	for _, k := range keys {
		typed = append(typed, k.KeysymName+"="+k.MbLookup)
	}
	if got := strings.Join(typed, " "); got != "Shift_L= A=A eacute=é" {
		t.Errorf("key presses: %s", got)
	}
}

const sample = `KeyPress event, serial 47, synthetic NO, window 0x400001,
    root 0x50d, subw 0x0, time 3825452, (99,80), root:(100,100),
    state 0x1, keycode 38 (keysym 0x41, A), same_screen YES,
    XLookupString gives 1 bytes: (41) "A"
    XmbLookupString gives 1 bytes: (41) "A"
    XFilterEvent returns: False

KeyPress event, serial 47, synthetic NO, window 0x400001,
    root 0x50d, subw 0x0, time 3825455, (99,80), root:(100,100),
    state 0x0, keycode 93 (keysym 0x10020ac, U20AC), same_screen YES,
    XLookupString gives 3 bytes: (e2 82 ac) "€"

KeyPress event, serial 47, synthetic NO, window 0x400001,
    root 0x50d, subw 0x0, time 3825457, (99,80), root:(100,100),
    state 0x0, keycode 37 (keysym 0xffe3, Control_L), same_screen YES,
    XLookupString gives 0 bytes: 

ButtonPress event, serial 47, synthetic NO, window 0x400001,
    root 0x50d, subw 0x0, time 3825458, (99,80), root:(100,100),
    state 0x100, button 3, same_screen YES
`

func TestParseSample(t *testing.T) {
	evs := Parse(sample)
	if len(evs) != 4 {
		t.Fatalf("%d events", len(evs))
	}
	if e := evs[0]; e.Type != "KeyPress" || e.Keysym != 0x41 || e.KeysymName != "A" || e.Lookup != "A" || e.MbLookup != "A" || !e.HasMb || e.State != 1 || e.RootX != 100 || e.Y != 80 {
		t.Errorf("event 0 = %+v", e)
	}
	if e := evs[1]; e.Keysym != 0x10020ac || e.Lookup != "€" || e.HasMb {
		t.Errorf("event 1 = %+v", e)
	}
	if e := evs[2]; e.Lookup != "" || e.KeysymName != "Control_L" {
		t.Errorf("event 2 = %+v", e)
	}
	if e := evs[3]; e.Type != "ButtonPress" || e.Button != 3 || e.State != 0x100 || e.Time != 3825458 {
		t.Errorf("event 3 = %+v", e)
	}
}
