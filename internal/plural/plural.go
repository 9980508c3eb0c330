// Package plural writes counts in English: "1 step", "3 steps", "0 steps".
package plural

import "strconv"

// Count is n with the noun that agrees with it: one for 1, many
// otherwise ("1 line of output", "2 lines of output").
func Count(n int, one, many string) string {
	if n == 1 || n == -1 {
		return strconv.Itoa(n) + " " + one
	}
	return strconv.Itoa(n) + " " + many
}

// S is Count for a noun whose plural adds an s ("step" → "steps").
func S(n int, noun string) string { return Count(n, noun, noun+"s") }
