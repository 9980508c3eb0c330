package envtest

import (
	"bufio"
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"
)

// XevEvent is one event as xev printed it.
type XevEvent struct {
	Type       string // KeyPress, KeyRelease, ButtonPress, ButtonRelease, MotionNotify, …
	X, Y       int    // window-relative position
	RootX      int
	RootY      int
	State      uint32
	Keycode    int
	Keysym     uint32
	KeysymName string
	Text       []byte // XLookupString's bytes
	Button     int
	Time       uint32
}

var (
	reHead   = regexp.MustCompile(`^(\w+) event, serial`)
	rePos    = regexp.MustCompile(`time (\d+), \((-?\d+),(-?\d+)\), root:\((-?\d+),(-?\d+)\)`)
	reState  = regexp.MustCompile(`state 0x([0-9a-f]+)`)
	reKey    = regexp.MustCompile(`keycode (\d+) \(keysym 0x([0-9a-f]+), ([^)]*)\)`)
	reButton = regexp.MustCompile(`button (\d+),`)
	reLookup = regexp.MustCompile(`^XLookupString gives (\d+) bytes: (?:\(([0-9a-f ]+)\))?`)
)

// ParseXev parses xev's output into events; lines it does not know are
// skipped.
func ParseXev(out string) []XevEvent {
	var evs []XevEvent
	var cur *XevEvent
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := reHead.FindStringSubmatch(line); m != nil {
			evs = append(evs, XevEvent{Type: m[1]})
			cur = &evs[len(evs)-1]
			continue
		}
		if cur == nil {
			continue
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
		if m := reLookup.FindStringSubmatch(line); m != nil && m[2] != "" {
			cur.Text, _ = hex.DecodeString(strings.ReplaceAll(m[2], " ", ""))
		}
	}
	return evs
}

// Filter returns the events of the given types.
func Filter(evs []XevEvent, types ...string) []XevEvent {
	var out []XevEvent
	for _, e := range evs {
		for _, t := range types {
			if e.Type == t {
				out = append(out, e)
			}
		}
	}
	return out
}
