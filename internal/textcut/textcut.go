// Package textcut is the one way agentbox shortens text: a cut that never
// splits a UTF-8 sequence.
//
// Bytes and Runes keep at most n bytes (runes) of s and append a suffix
// such as "…" when they cut; Fit is for a hard bound, where the suffix
// counts toward n. Invalid UTF-8 is kept as it is: each invalid byte is one
// byte and one rune (as in a for-range loop over a string), a cut never
// backs up more than utf8.UTFMax-1 bytes, and a result is valid UTF-8
// whenever s and suffix are. Callers that need valid UTF-8 from untrusted
// text pass the result through strings.ToValidUTF8.
package textcut

import "unicode/utf8"

// Bytes returns s if it is at most n bytes long. Otherwise it returns the
// longest prefix of s that is at most n bytes long and does not end inside
// a UTF-8 sequence, followed by suffix: the result is at most n+len(suffix)
// bytes. For n <= 0 the prefix is empty.
func Bytes(s string, n int, suffix string) string {
	if len(s) <= n {
		return s
	}
	return s[:boundary(s, n)] + suffix
}

// Runes returns s if it has at most n runes. Otherwise it returns the first
// n runes of s (n <= 0: none), followed by suffix.
func Runes(s string, n int, suffix string) string {
	count := 0
	for i := range s {
		if count >= n {
			return s[:i] + suffix
		}
		count++
	}
	return s
}

// Fit returns s if it is at most n bytes long. Otherwise it returns the
// longest prefix of s that, with suffix appended, is at most n bytes long
// and does not end inside a UTF-8 sequence, followed by suffix. When suffix
// alone is longer than n, the result is the prefix of at most n bytes
// without the suffix, so the result never exceeds n bytes (n <= 0: "").
func Fit(s string, n int, suffix string) string {
	if len(s) <= n {
		return s
	}
	if n < len(suffix) {
		return s[:boundary(s, n)]
	}
	return s[:boundary(s, n-len(suffix))] + suffix
}

// boundary returns the largest i' <= i (and >= 0) such that cutting s at i'
// does not split a valid UTF-8 sequence. It requires i < len(s).
func boundary(s string, i int) int {
	if i <= 0 {
		return 0
	}
	if utf8.RuneStart(s[i]) {
		return i
	}
	// Byte i continues a sequence: find where that sequence starts, at
	// most UTFMax-1 bytes back, and cut before it only if it decodes to a
	// valid rune that reaches past i (otherwise the bytes are invalid and
	// count one by one).
	for j := i - 1; j >= 0 && j > i-utf8.UTFMax; j-- {
		if !utf8.RuneStart(s[j]) {
			continue
		}
		if r, size := utf8.DecodeRuneInString(s[j:]); size > i-j && (r != utf8.RuneError || size > 1) {
			return j
		}
		return i
	}
	return i
}
