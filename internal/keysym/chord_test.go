package keysym

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

const (
	kCtrl  Keysym = 0xffe3
	kShift Keysym = 0xffe1
	kAlt   Keysym = 0xffe9
	kSuper Keysym = 0xffeb
	kPlus  Keysym = 0x2b
)

func TestParseChord(t *testing.T) {
	tests := []struct {
		in   string
		want []Keysym
	}{
		{"ctrl+shift+t", []Keysym{kCtrl, kShift, 't'}},
		{"ctrl+shift+T", []Keysym{kCtrl, kShift, 'T'}},
		{"super", []Keysym{kSuper}},
		{"Return", []Keysym{0xff0d}},
		{"ctrl+c", []Keysym{kCtrl, 'c'}},
		{"ctrl + c", []Keysym{kCtrl, 'c'}},
		{"  ctrl\t+\tc  ", []Keysym{kCtrl, 'c'}},
		{"CTRL+SHIFT+ARROWLEFT", []Keysym{kCtrl, kShift, 0xff51}},
		{"alt+F4", []Keysym{kAlt, 0xffc1}},
		{"alt+f4", []Keysym{kAlt, 0xffc1}},
		{"cmd+space", []Keysym{kSuper, ' '}},
		{"CMD+SPACE", []Keysym{kSuper, ' '}},
		{"Control_L+Page_Up", []Keysym{kCtrl, 0xff55}},
		{"c+ctrl", []Keysym{'c', kCtrl}}, // any order, kept
		{"ctrl++", []Keysym{kCtrl, kPlus}},
		{"ctrl+plus", []Keysym{kCtrl, kPlus}},
		{"ctrl + +", []Keysym{kCtrl, kPlus}},
		{"ctrl+shift++", []Keysym{kCtrl, kShift, kPlus}},
		{"a++", []Keysym{'a', kPlus}},
		{"+", []Keysym{kPlus}},
		{" + ", []Keysym{kPlus}},
		{"plus", []Keysym{kPlus}},
		{"plus+ctrl", []Keysym{kPlus, kCtrl}},
		{"shift+/", []Keysym{kShift, '/'}},
		{"shift+?", []Keysym{kShift, '?'}},
		{"ctrl+-", []Keysym{kCtrl, '-'}},
		{"ctrl+=", []Keysym{kCtrl, '='}},
		{"ctrl+é", []Keysym{kCtrl, 0xe9}},
		{"ctrl+€", []Keysym{kCtrl, 0x10020ac}},
		{"XF86AudioPlay", []Keysym{0x1008ff14}},
		{"super+0xff0d", []Keysym{kSuper, 0xff0d}},
		{"ctrl+alt+Delete", []Keysym{kCtrl, kAlt, 0xffff}},
		{"meta+a", []Keysym{kSuper, 'a'}},
		{"Meta_L+a", []Keysym{0xffe7, 'a'}},
		{"ctrl+Control_R", []Keysym{kCtrl, 0xffe4}}, // different keysyms
	}
	for _, tt := range tests {
		got, err := ParseChord(tt.in)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ParseChord(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseChordErrors(t *testing.T) {
	tests := []struct {
		in    string
		is    error  // sentinel, or nil
		part  string // ChordError.Part
		index int    // ChordError.Index
		msg   string // substring of the message besides the chord itself
	}{
		{"", ErrEmptyChord, "", 0, "empty key chord"},
		{"   ", ErrEmptyChord, "", 0, "empty key chord"},
		{"\t\n", ErrEmptyChord, "", 0, "empty key chord"},
		{"ctrl+", ErrEmptyPart, "", 2, "part 2 is empty"},
		{"ctrl+ ", ErrEmptyPart, "", 2, "part 2 is empty"},
		{"ctrl+shift+", ErrEmptyPart, "", 3, "part 3 is empty"},
		{"+a", ErrEmptyPart, "", 1, "part 1 is empty"},
		{"++a", ErrEmptyPart, "", 1, "part 1 is empty"},
		{"ctrl++a", ErrEmptyPart, "", 2, "part 2 is empty"},
		{"ctrl+ +a", ErrEmptyPart, "", 2, "part 2 is empty"},
		{"++", ErrEmptyPart, "", 1, `"plus"`},
		{"+++", ErrEmptyPart, "", 1, ""},
		{"ctrl+++", ErrEmptyPart, "", 2, ""},
		{"ctrl+control+c", ErrDuplicateKey, "control", 2, "appears twice"},
		{"a+a", ErrDuplicateKey, "a", 2, ""},
		{"plus++", ErrDuplicateKey, "+", 2, ""},
		{"ctrl+Retrun", nil, "Retrun", 2, `unknown key "Retrun" (did you mean "Return"?)`},
		{"ctrl+AACUTE", nil, "AACUTE", 2, "differ only in case"},
		{"ctrl+page up", nil, "page up", 2, `"Page_Up"`},
		{"ctrl+\x01", nil, "\x01", 2, "unknown key"},
	}
	for _, tt := range tests {
		got, err := ParseChord(tt.in)
		var ce *ChordError
		if !errors.As(err, &ce) {
			t.Errorf("ParseChord(%q) = %v, %v; want *ChordError", tt.in, got, err)
			continue
		}
		if got != nil {
			t.Errorf("ParseChord(%q) returned keys %v with error", tt.in, got)
		}
		if tt.is != nil && !errors.Is(err, tt.is) {
			t.Errorf("ParseChord(%q) error %v is not %v", tt.in, err, tt.is)
		}
		if ce.Chord != tt.in || ce.Part != tt.part || ce.Index != tt.index {
			t.Errorf("ParseChord(%q) error = {Chord:%q Part:%q Index:%d}, want {%q %q %d}", tt.in, ce.Chord, ce.Part, ce.Index, tt.in, tt.part, tt.index)
		}
		msg := err.Error()
		if !strings.Contains(msg, strconv.Quote(tt.in)) || !strings.Contains(msg, tt.msg) {
			t.Errorf("ParseChord(%q) error %q should name the chord and contain %q", tt.in, msg, tt.msg)
		}
	}

	// Lookup errors stay reachable through the chord error.
	_, err := ParseChord("ctrl+Retrun")
	var ue *UnknownKeyError
	if !errors.As(err, &ue) || ue.Name != "Retrun" || !slices.Equal(ue.Suggestions, []string{"Return"}) {
		t.Errorf("errors.As(%v, *UnknownKeyError) = %+v", err, ue)
	}
	_, err = ParseChord("shift+EACUTE")
	var ae *AmbiguousKeyError
	if !errors.As(err, &ae) || !slices.Equal(ae.Candidates, []string{"Eacute", "eacute"}) {
		t.Errorf("errors.As(%v, *AmbiguousKeyError) = %+v", err, ae)
	}
	if want := `invalid key chord "ctrl+Retrun": part 2: unknown key "Retrun" (did you mean "Return"?)`; !strings.Contains(errString(ParseChord("ctrl+Retrun")), want) {
		t.Errorf("message = %q, want %q", errString(ParseChord("ctrl+Retrun")), want)
	}
}

func errString(_ []Keysym, err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func FuzzParseChord(f *testing.F) {
	for _, s := range []string{
		"ctrl+shift+t", "ctrl++", "ctrl+plus", "+", "++", "++a", "ctrl+", "shift+/",
		" ctrl + c ", "super", "Return", "AACUTE", "é", "€", "0xff0d", "U+20AC",
		"ctrl+control", "f35", "\xff", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		keys, err := ParseChord(s)
		if err != nil {
			var ce *ChordError
			if !errors.As(err, &ce) || ce.Chord != s || err.Error() == "" {
				t.Fatalf("ParseChord(%q): error %v (%T) is not a proper *ChordError", s, err, err)
			}
			if keys != nil {
				t.Fatalf("ParseChord(%q) = %v with error %v", s, keys, err)
			}
			return
		}
		if len(keys) == 0 {
			t.Fatalf("ParseChord(%q) returned no keys and no error", s)
		}
		for i, k := range keys {
			if k == NoSymbol || k > maxKeysym {
				t.Fatalf("ParseChord(%q)[%d] = %#x", s, i, uint32(k))
			}
			if slices.Contains(keys[:i], k) {
				t.Fatalf("ParseChord(%q) repeats %v", s, k)
			}
			// Every result survives a round trip through its name.
			if got, err := Lookup(Name(k)); err != nil || got != k {
				t.Fatalf("Lookup(Name(%#x) = %q) = %#x, %v", uint32(k), Name(k), uint32(got), err)
			}
		}
		// Single keys resolve the same way through Lookup.
		if len(keys) == 1 && utf8.ValidString(s) && !strings.Contains(s, "+") {
			if k, err := Lookup(strings.TrimSpace(s)); err != nil || k != keys[0] {
				t.Fatalf("Lookup(%q) = %v, %v; ParseChord gave %v", s, k, err, keys[0])
			}
		}
	})
}
