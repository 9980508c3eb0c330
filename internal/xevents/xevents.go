// Package xevents parses what the X11 event tester xev prints, so tests can
// compare what an application received with what was sent: the guest's own
// X11 tests read a live xev, the conformance suite reads a run's output.
package xevents

import (
	"bufio"
	"regexp"
	"strconv"
	"strings"
)

// Event is one event as xev printed it.
type Event struct {
	Type       string // KeyPress, KeyRelease, ButtonPress, ButtonRelease, MotionNotify, …
	X, Y       int    // window-relative position
	RootX      int
	RootY      int
	State      uint32
	Keycode    int
	Keysym     uint32
	KeysymName string
	Lookup     string // XLookupString's bytes
	MbLookup   string // XmbLookupString's bytes (KeyPress only, when HasMb)
	HasMb      bool
	Button     int
	Time       uint32
}

var (
	reHeader = regexp.MustCompile(`^(\w+) event, serial \d+, synthetic (?:YES|NO), window 0x[0-9a-f]+,`)
	rePos    = regexp.MustCompile(`time (\d+), \((-?\d+),(-?\d+)\), root:\((-?\d+),(-?\d+)\)`)
	reState  = regexp.MustCompile(`state 0x([0-9a-f]+)`)
	reKey    = regexp.MustCompile(`keycode (\d+) \(keysym 0x([0-9a-f]+), ([^)]*)\)`)
	reButton = regexp.MustCompile(`button (\d+),`)
	// The hex bytes, not the quoted text: xev does not escape the latter.
	reLookup = regexp.MustCompile(`^\s*X(mb)?LookupString gives \d+ bytes: (?:\(([0-9a-f ]*)\) )?"`)
)

// Parser reads xev's output a line at a time.
type Parser struct{ cur *Event }

// Line takes one line of output and returns the event it completed, if
// any: an event is complete at its last line, at a blank line, or when the
// next one begins, so a caller never sees half an event.
func (p *Parser) Line(line string) *Event {
	if strings.TrimSpace(line) == "" {
		return p.Flush()
	}
	if m := reHeader.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
		done := p.Flush()
		p.cur = &Event{Type: m[1]}
		return done
	}
	cur := p.cur
	if cur == nil {
		return nil
	}
	if m := rePos.FindStringSubmatch(line); m != nil {
		t, _ := strconv.ParseUint(m[1], 10, 32)
		cur.Time = uint32(t)
		cur.X, _ = strconv.Atoi(m[2])
		cur.Y, _ = strconv.Atoi(m[3])
		cur.RootX, _ = strconv.Atoi(m[4])
		cur.RootY, _ = strconv.Atoi(m[5])
	}
	if m := reState.FindStringSubmatch(line); m != nil {
		v, _ := strconv.ParseUint(m[1], 16, 32)
		cur.State = uint32(v)
	}
	if m := reKey.FindStringSubmatch(line); m != nil {
		cur.Keycode, _ = strconv.Atoi(m[1])
		v, _ := strconv.ParseUint(m[2], 16, 32)
		cur.Keysym, cur.KeysymName = uint32(v), m[3]
	}
	if m := reButton.FindStringSubmatch(line); m != nil {
		cur.Button, _ = strconv.Atoi(m[1])
	}
	if m := reLookup.FindStringSubmatch(line); m != nil {
		var b []byte
		for _, h := range strings.Fields(m[2]) {
			v, _ := strconv.ParseUint(h, 16, 8)
			b = append(b, byte(v))
		}
		if m[1] == "mb" {
			cur.MbLookup, cur.HasMb = string(b), true
		} else {
			cur.Lookup = string(b)
		}
	}
	switch cur.Type {
	case "KeyPress", "KeyRelease":
		if strings.Contains(line, "XFilterEvent returns") {
			return p.Flush()
		}
	case "ButtonPress", "ButtonRelease", "MotionNotify":
		if strings.Contains(line, "same_screen") {
			return p.Flush()
		}
	case "FocusIn", "FocusOut":
		if strings.Contains(line, "detail ") {
			return p.Flush()
		}
	}
	return nil
}

// Flush returns the event being read, if any, as it stands.
func (p *Parser) Flush() *Event {
	e := p.cur
	p.cur = nil
	return e
}

// Parse parses a whole output.
func Parse(out string) []Event {
	var evs []Event
	var p Parser
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		if e := p.Line(sc.Text()); e != nil {
			evs = append(evs, *e)
		}
	}
	if e := p.Flush(); e != nil {
		evs = append(evs, *e)
	}
	return evs
}

// Filter returns the events of the given types.
func Filter(evs []Event, types ...string) []Event {
	var out []Event
	for _, e := range evs {
		for _, t := range types {
			if e.Type == t {
				out = append(out, e)
			}
		}
	}
	return out
}
