package keysym

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Errors a *ChordError can wrap besides those from Lookup.
var (
	// ErrEmptyChord: the chord is empty or only whitespace.
	ErrEmptyChord = errors.New("empty key chord")
	// ErrEmptyPart: a part between "+" separators is empty, as in
	// "ctrl+", "+a", "ctrl++a" or "++".
	ErrEmptyPart = errors.New("empty key name")
	// ErrDuplicateKey: the chord names the same keysym twice, as in
	// "ctrl+control+c".
	ErrDuplicateKey = errors.New("key appears twice")
)

// ParseChord parses an xdotool-style key chord such as "ctrl+shift+t",
// "super", "Return" or "ctrl + c" into its keysyms, in the order written.
// Modifiers usually come first and the key last, but any order is accepted
// and kept. Each part is resolved with [Lookup] after trimming surrounding
// whitespace.
//
// The "+" key itself is written "plus" anywhere ("ctrl+plus"), or as a
// literal "+" in the last position: "ctrl++" is Control_L+plus, "a++" is
// a+plus, and a lone "+" is plus. A literal "+" anywhere else is a
// separator, so "++a", "ctrl++a", "+a", "ctrl+" and "++" all contain an
// empty part and are rejected with ErrEmptyPart rather than guessed at.
//
// ParseChord also rejects empty or whitespace-only chords (ErrEmptyChord)
// and chords naming one keysym twice (ErrDuplicateKey, e.g.
// "ctrl+control"). Every error is a [*ChordError] naming the chord and the
// offending part; errors.As reaches the underlying [*UnknownKeyError] or
// [*AmbiguousKeyError].
func ParseChord(s string) ([]Keysym, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return nil, &ChordError{Chord: s, Err: ErrEmptyChord}
	}
	trailingPlus := false
	if strings.HasSuffix(t, "+") {
		rest := strings.TrimRightFunc(t[:len(t)-1], unicode.IsSpace)
		switch {
		case rest == "": // a lone "+"
			return []Keysym{xkPlus}, nil
		case strings.HasSuffix(rest, "+"): // "…++": the last "+" is the key
			trailingPlus = true
			t = rest[:len(rest)-1]
		default: // "ctrl+": the "+" is a separator with nothing after it
			n := strings.Count(t, "+") + 1
			return nil, &ChordError{Chord: s, Index: n, Err: ErrEmptyPart}
		}
	}
	parts := strings.Split(t, "+")
	keys := make([]Keysym, 0, len(parts)+1)
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			return nil, &ChordError{Chord: s, Index: i + 1, Err: ErrEmptyPart}
		}
		k, err := Lookup(p)
		if err != nil {
			return nil, &ChordError{Chord: s, Part: p, Index: i + 1, Err: err}
		}
		if slices.Contains(keys, k) {
			return nil, &ChordError{Chord: s, Part: p, Index: i + 1, Err: ErrDuplicateKey}
		}
		keys = append(keys, k)
	}
	if trailingPlus {
		if slices.Contains(keys, xkPlus) {
			return nil, &ChordError{Chord: s, Part: "+", Index: len(parts) + 1, Err: ErrDuplicateKey}
		}
		keys = append(keys, xkPlus)
	}
	return keys, nil
}

// ChordError reports why ParseChord rejected a chord.
type ChordError struct {
	Chord string // the chord as given
	Part  string // the offending part, trimmed; "" for empty parts and chords
	Index int    // 1-based position of the offending part; 0 for the whole chord
	Err   error  // ErrEmptyChord, ErrEmptyPart, ErrDuplicateKey or a Lookup error
}

func (e *ChordError) Error() string {
	switch {
	case e.Index == 0:
		return fmt.Sprintf("invalid key chord %q: %v", e.Chord, e.Err)
	case errors.Is(e.Err, ErrEmptyPart):
		return fmt.Sprintf("invalid key chord %q: part %d is empty (write the + key as \"plus\", or as a final \"++\")", e.Chord, e.Index)
	case errors.Is(e.Err, ErrDuplicateKey):
		return fmt.Sprintf("invalid key chord %q: part %d %q: %v", e.Chord, e.Index, e.Part, e.Err)
	}
	return fmt.Sprintf("invalid key chord %q: part %d: %v", e.Chord, e.Index, e.Err)
}

// Unwrap returns the underlying error.
func (e *ChordError) Unwrap() error { return e.Err }
