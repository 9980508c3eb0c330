package observe

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestParseScreen: one parser for --screen, suites and scripts, with one
// bound; what eval and scripts used to accept and run at depth 24 anyway
// (640x480xfoo, 640x480x16) is an error.
func TestParseScreen(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Screen
		err  string // a substring of the error; "" for none
	}{
		{"640x480", Screen{640, 480, 24}, ""},
		{"640x480x24", Screen{640, 480, 24}, ""},
		{"1920X1080", Screen{1920, 1080, 24}, ""},
		{"64x64", Screen{64, 64, 24}, ""},
		{"7680x4320", Screen{7680, 4320, 24}, ""},
		{"640x480xfoo", Screen{}, `"640x480xfoo": "foo" is not a positive number`},
		{"x16", Screen{}, `"x16": "" is not a positive number`},
		{"640x480x16", Screen{}, `"640x480x16": only depth 24 is supported`},
		{"0x0", Screen{}, `"0x0": "0" is not a positive number`},
		{"99999x99999", Screen{}, `"99999x99999": width and height must be between 64 and 7680x4320`},
		{"7681x4320", Screen{}, "must be between 64 and 7680x4320"},
		{"63x480", Screen{}, "must be between 64 and 7680x4320"},
		{"640", Screen{}, `"640": want WIDTHxHEIGHT or WIDTHxHEIGHTxDEPTH, e.g. 640x480`},
		{"640x480x24x1", Screen{}, "want WIDTHxHEIGHT or WIDTHxHEIGHTxDEPTH"},
		{"", Screen{}, "want WIDTHxHEIGHT"},
		{"-640x480", Screen{}, "is not a positive number"},
		{" 640x480", Screen{}, "is not a positive number"},
	} {
		got, err := ParseScreen(c.in)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("ParseScreen(%q) = %v, %v; want %v", c.in, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrInvalidScreen)):
			t.Errorf("ParseScreen(%q) = %v, %v; want an ErrInvalidScreen containing %q", c.in, got, err, c.err)
		}
	}
}

func TestScreenValidate(t *testing.T) {
	for _, c := range []struct {
		s   Screen
		err string
	}{
		{DefaultScreen, ""},
		{Screen{}, "must be between"},
		{Screen{640, 480, 0}, "only depth 24"},
		{Screen{100000, 100000, 24}, "must be between"},
		{Screen{640, 480, 8}, "only depth 24"},
	} {
		err := c.s.Validate()
		if (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%v.Validate() = %v, want %q", c.s, err, c.err)
		}
	}
	if got := (Screen{}).OrDefault(); got != DefaultScreen {
		t.Errorf("the zero Screen's default is %v", got)
	}
	if got := (Screen{800, 600, 24}).OrDefault(); got != (Screen{800, 600, 24}) {
		t.Errorf("a given screen's default is %v", got)
	}
	if s := DefaultScreen.String(); s != "640x480x24" {
		t.Errorf("String() = %q", s)
	}
	if back, err := ParseScreen(DefaultScreen.String()); err != nil || back != DefaultScreen {
		t.Errorf("String does not parse back: %v, %v", back, err)
	}
}

// TestScreenJSON: the names traces and the wire protocol have always used.
func TestScreenJSON(t *testing.T) {
	b, err := json.Marshal(Screen{800, 600, 24})
	if err != nil || string(b) != `{"width":800,"height":600,"depth":24}` {
		t.Errorf("JSON %s, %v", b, err)
	}
}
