package keysym

import (
	"cmp"
	"slices"
	"strings"
)

// suggest returns up to n known names (X keysym names and aliases) closest
// to name by case-insensitive edit distance (optimal string alignment:
// insertions, deletions, substitutions and adjacent transpositions), best
// first. Names farther than maxDistance are never suggested.
func suggest(name string, n int) []string {
	in := []rune(strings.ToLower(name))
	limit := maxDistance(len(in))
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	consider := func(c string) {
		// Candidates are ASCII, so len(c) counts runes; a length gap
		// alone bounds the distance from below.
		if len(c) < len(in)-limit || len(c) > len(in)+limit {
			return
		}
		if d := distance(in, c, limit); d <= limit {
			cs = append(cs, cand{c, d})
		}
	}
	for i := range table {
		consider(table[i].name)
	}
	for a := range aliases {
		if lo, hi := foldRange(a); lo == hi { // "return" is already there as "Return"
			consider(a)
		}
	}
	slices.SortFunc(cs, func(a, b cand) int {
		return cmp.Or(cmp.Compare(a.d, b.d), cmp.Compare(strings.ToLower(a.name), strings.ToLower(b.name)), cmp.Compare(a.name, b.name))
	})
	var out []string
	for _, c := range cs[:min(n, len(cs))] {
		out = append(out, c.name)
	}
	return out
}

// maxDistance is how many edits a suggestion may be away from an input of
// n runes.
func maxDistance(n int) int {
	switch {
	case n <= 4:
		return 1
	case n <= 8:
		return 2
	}
	return 3
}

// distance is the optimal-string-alignment distance between a and the
// lower-cased ASCII string b. It returns limit+1 as soon as the result is
// known to exceed limit.
func distance(a []rune, b string, limit int) int {
	// Three rows: two back (for transpositions), previous, current.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			bj := rune(lowerASCII(b[j-1]))
			cost := 1
			if a[i-1] == bj {
				cost = 0
			}
			d := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == rune(lowerASCII(b[j-2])) && a[i-2] == bj {
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
	return prev[len(b)]
}
