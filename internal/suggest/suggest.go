// Package suggest finds the known names closest to a mistyped one, for the
// "did you mean" of agentbox's errors: key names, agent names, flags.
package suggest

import (
	"slices"
	"strings"
	"unicode"
)

// MaxDistance is how many edits a suggestion may be away from an input of
// n runes.
func MaxDistance(n int) int {
	switch {
	case n <= 4:
		return 1
	case n <= 8:
		return 2
	}
	return 3
}

// Closest returns the candidates within MaxDistance of name by
// case-insensitive edit distance (Distance), closest first; candidates at
// the same distance keep their order in the list, so a caller lists the
// names it prefers first.
func Closest(name string, candidates []string) []string {
	in := []rune(strings.ToLower(name))
	limit := MaxDistance(len(in))
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	for _, c := range candidates {
		if d := Distance(in, c, limit); d <= limit {
			cs = append(cs, cand{c, d})
		}
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return a.d - b.d })
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.name
	}
	return out
}

// Best is the closest of candidates to name (the first at the least
// distance), or "" when none is within MaxDistance.
func Best(name string, candidates []string) string {
	if c := Closest(name, candidates); len(c) > 0 {
		return c[0]
	}
	return ""
}

// Hint is " (did you mean X?)" for X, the Best of candidates, or "".
func Hint(name string, candidates []string) string {
	if b := Best(name, candidates); b != "" {
		return " (did you mean " + b + "?)"
	}
	return ""
}

// Distance is the optimal-string-alignment distance (insertions,
// deletions, substitutions and adjacent transpositions) between the
// lower-cased runes a and b, compared case-insensitively. It returns
// limit+1 as soon as the result is known to exceed limit.
func Distance(a []rune, b string, limit int) int {
	if n := len(b); n < len(a)-limit || n > 4*(len(a)+limit) {
		return limit + 1 // a length gap alone bounds the distance from below
	}
	br := []rune(b)
	if len(br) < len(a)-limit || len(br) > len(a)+limit {
		return limit + 1
	}
	for i, r := range br {
		br[i] = unicode.ToLower(r)
	}
	// Three rows: two back (for transpositions), previous, current.
	prev2 := make([]int, len(br)+1)
	prev := make([]int, len(br)+1)
	cur := make([]int, len(br)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(br); j++ {
			cost := 1
			if a[i-1] == br[j-1] {
				cost = 0
			}
			d := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == br[j-2] && a[i-2] == br[j-1] {
				d = min(d, prev2[j-2]+1)
			}
			cur[j] = d
			rowMin = min(rowMin, d)
		}
		if rowMin > limit {
			return limit + 1
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(br)]
}
