package keysym

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	didyoumean "github.com/codegirl-games/agentbox/internal/suggest"
)

// common are the key names people mean: the keys of an ordinary keyboard
// by their X names. With the aliases they come first among suggestions at
// the same distance, and an obscure keysym (rightt, a box-drawing glyph)
// farther away than a common name is not offered beside it.
var common = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Fields(`Return Escape Tab BackSpace Delete Insert Home End
		Page_Up Page_Down Prior Next Left Right Up Down space Menu Print Pause
		Scroll_Lock Caps_Lock Num_Lock Shift_L Shift_R Control_L Control_R Alt_L Alt_R
		Super_L Super_R Meta_L Meta_R ISO_Level3_Shift
		minus plus equal comma period slash backslash semicolon apostrophe grave
		bracketleft bracketright asterisk underscore exclam at numbersign dollar
		percent asciicircum ampersand parenleft parenright colon quotedbl less
		greater question bar braceleft braceright asciitilde
		KP_Enter KP_Add KP_Subtract KP_Multiply KP_Divide KP_Decimal`) {
		m[n] = true
	}
	for i := 1; i <= 12; i++ {
		m["F"+strconv.Itoa(i)] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		m[string(c)], m[string(c-'a'+'A')] = true, true
	}
	for c := '0'; c <= '9'; c++ {
		m[string(c)], m["KP_"+string(c)] = true, true
	}
	for a := range aliases {
		m[a] = true
	}
	return m
}()

// candidates are the names suggest offers, in its order of preference at
// one distance: common names first, then alphabetically.
var candidates = sync.OnceValue(func() []string {
	var names []string
	for i := range table {
		names = append(names, table[i].name)
	}
	for a := range aliases {
		if lo, hi := foldRange(a); lo == hi { // "return" is already there as "Return"
			names = append(names, a)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		if common[a] != common[b] {
			if common[a] {
				return -1
			}
			return 1
		}
		if c := strings.Compare(strings.ToLower(a), strings.ToLower(b)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return names
})

// suggest returns up to n known names (X keysym names and aliases) closest
// to name by case-insensitive edit distance (internal/suggest), best first:
// by distance, then common names (common, the aliases) before the rest,
// then alphabetically. When the best common name is closer than an
// obscure one, the obscure one is left out.
func suggest(name string, n int) []string {
	near := didyoumean.Closest(name, candidates())
	in := []rune(strings.ToLower(name))
	limit := didyoumean.MaxDistance(len(in))
	best := -1 // the distance of the closest common name
	var out []string
	for _, c := range near {
		d := didyoumean.Distance(in, c, limit)
		if common[c] && best < 0 {
			best = d
		}
		if !common[c] && best >= 0 && d > best {
			continue
		}
		out = append(out, c)
		if len(out) == n {
			break
		}
	}
	return out
}
