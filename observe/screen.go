package observe

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Screen is the virtual display's geometry. It is the one type for it:
// --screen, a suite's and a script's screen field, the sandbox's
// configuration, the guest's start request and run.json's
// environment.screen all carry it (with these JSON names).
type Screen struct {
	Width  int `json:"width"`
	Height int `json:"height"`
	Depth  int `json:"depth"`
}

// The screens agentbox makes: at least 64×64 (smaller is no desktop), at
// most 8K UHD (7680×4320, 132 MB a frame, and what every screenshot read
// back from a trace is held to), depth 24 only (the guest captures 32
// bits per pixel).
const (
	MinScreenSide   = 64
	MaxScreenWidth  = 7680
	MaxScreenHeight = 4320
	ScreenDepth     = 24
	// MaxScreenPixels bounds any frame: a screenshot, a PNG in a trace.
	MaxScreenPixels = MaxScreenWidth * MaxScreenHeight
)

// DefaultScreen is the screen when none is given: 640×480×24.
var DefaultScreen = Screen{Width: 640, Height: 480, Depth: ScreenDepth}

// ErrInvalidScreen is wrapped by every error of ParseScreen and Validate.
var ErrInvalidScreen = errors.New("invalid screen")

type screenError string

func (e screenError) Error() string { return string(e) }

func (e screenError) Unwrap() error { return ErrInvalidScreen }

// ParseScreen reads WIDTHxHEIGHT or WIDTHxHEIGHTxDEPTH (depth 24 when not
// given) and validates it. Its errors start with the quoted input, for the
// caller to prefix with where it came from: `--screen "x16": …`.
func ParseScreen(s string) (Screen, error) {
	parts := strings.Split(strings.ToLower(s), "x")
	if len(parts) < 2 || len(parts) > 3 {
		return Screen{}, screenError(fmt.Sprintf("%q: want WIDTHxHEIGHT or WIDTHxHEIGHTxDEPTH, e.g. 640x480", s))
	}
	n := [3]int{0, 0, ScreenDepth}
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v <= 0 {
			return Screen{}, screenError(fmt.Sprintf("%q: %q is not a positive number", s, p))
		}
		n[i] = v
	}
	sc := Screen{Width: n[0], Height: n[1], Depth: n[2]}
	if err := sc.Validate(); err != nil {
		return Screen{}, screenError(fmt.Sprintf("%q: %v", s, err))
	}
	return sc, nil
}

// Validate holds a screen to the bounds. Its errors say what is wrong,
// not which screen: the caller names it.
func (s Screen) Validate() error {
	if s.Width < MinScreenSide || s.Height < MinScreenSide || s.Width > MaxScreenWidth || s.Height > MaxScreenHeight {
		return screenError(fmt.Sprintf("width and height must be between %d and %dx%d", MinScreenSide, MaxScreenWidth, MaxScreenHeight))
	}
	if s.Depth != ScreenDepth {
		return screenError(fmt.Sprintf("only depth %d is supported", ScreenDepth))
	}
	return nil
}

// OrDefault is s, or DefaultScreen when s is the zero Screen (not given).
func (s Screen) OrDefault() Screen {
	if s == (Screen{}) {
		return DefaultScreen
	}
	return s
}

// String is WIDTHxHEIGHTxDEPTH, as ParseScreen reads it.
func (s Screen) String() string { return fmt.Sprintf("%dx%dx%d", s.Width, s.Height, s.Depth) }
