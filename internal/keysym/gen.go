//go:build ignore

// gen.go reads the X11 keysym headers (keysymdef.h and XF86keysym.h, from
// Debian's x11proto-dev) and writes zz_table.go, the name/value/code point
// table used by package keysym.
//
// Usage (normally via "go generate" in this directory):
//
//	go run gen.go [-dir /usr/include/X11] [-o zz_table.go]
//
// The output depends only on the header contents, never on -dir or -o, so a
// regenerated copy can be compared byte for byte with the committed one
// (see TestTableUpToDate).
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"go/format"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

type header struct {
	file   string // base name inside -dir
	prefix string // macro prefix, e.g. "XK_"
	rename string // what the prefix becomes in the X name, e.g. "XF86"
}

var headers = []header{
	{"keysymdef.h", "XK_", ""},
	{"XF86keysym.h", "XF86XK_", "XF86"},
}

// sym is one "#define" line.
type sym struct {
	name       string
	value      uint32
	cp         rune // Unicode code point from the comment, 0 if none
	deprecated bool // comment says "deprecated" (but not "non-deprecated")
	order      int  // position across all headers, for "first listed wins"
}

var (
	// #define XK_eacute 0x00e9 /* U+00E9 LATIN SMALL LETTER E WITH ACUTE */
	// #define XF86XK_Info _EVDEVK(0x166) /* KEY_INFO */
	defineRE = regexp.MustCompile(`^#define\s+([A-Za-z_0-9]+)\s+(?:0x([0-9a-fA-F]+)|_EVDEVK\(0x([0-9a-fA-F]+)\))\s*(?:/\*(.*?)\*/)?\s*$`)
	// "U+00E9 NAME" (one-to-one) or "(U+2500 NAME)" (legacy, not one-to-one).
	unicodeRE    = regexp.MustCompile(`^\s*\(?U\+([0-9A-Fa-f]{4,6})[\s)]`)
	deprecatedRE = regexp.MustCompile(`(?i)(^|[^-a-z])deprecated`)
)

const evdevBase = 0x10081000 // #define _EVDEVK(_v) (0x10081000 + _v)

func main() {
	log.SetFlags(0)
	log.SetPrefix("keysym/gen: ")
	dir := flag.String("dir", "/usr/include/X11", "directory holding keysymdef.h and XF86keysym.h")
	out := flag.String("o", "zz_table.go", "output file")
	flag.Parse()

	var syms []sym
	for _, h := range headers {
		s, err := parse(filepath.Join(*dir, h.file), h, len(syms))
		if err != nil {
			log.Fatal(err)
		}
		syms = append(syms, s...)
	}
	src, err := generate(syms)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		log.Fatal(err)
	}
}

func parse(path string, h header, order int) ([]sym, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var syms []sym
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if !strings.HasPrefix(text, "#define "+h.prefix) {
			continue
		}
		m := defineRE.FindStringSubmatch(text)
		if m == nil || !strings.HasPrefix(m[1], h.prefix) {
			// Fail loudly rather than silently dropping a keysym
			// when the header format changes.
			return nil, fmt.Errorf("%s:%d: unrecognized define: %s", path, line, text)
		}
		s := sym{name: h.rename + strings.TrimPrefix(m[1], h.prefix), order: order}
		order++
		hex, base := m[2], uint64(0)
		if hex == "" {
			hex, base = m[3], evdevBase
		}
		v, err := strconv.ParseUint(hex, 16, 32)
		if err != nil || base+v > 0x1fffffff || base+v == 0 {
			return nil, fmt.Errorf("%s:%d: bad keysym value in: %s", path, line, text)
		}
		s.value = uint32(base + v)
		comment := m[4]
		if u := unicodeRE.FindStringSubmatch(comment); u != nil {
			cp, _ := strconv.ParseUint(u[1], 16, 32)
			s.cp = rune(cp)
		}
		s.deprecated = deprecatedRE.MatchString(comment)
		syms = append(syms, s)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(syms) == 0 {
		return nil, fmt.Errorf("%s: no %s defines found", path, h.prefix)
	}
	return syms, nil
}

func generate(syms []sym) ([]byte, error) {
	// Names must be unique; a value may have several names.
	seen := map[string]bool{}
	for _, s := range syms {
		if seen[s.name] {
			return nil, fmt.Errorf("duplicate keysym name %q", s.name)
		}
		seen[s.name] = true
	}

	// One code point per value: the first one any of its names gives.
	cps := map[uint32]rune{}
	for _, s := range syms {
		if s.cp == 0 {
			continue
		}
		if old, ok := cps[s.value]; ok && old != s.cp {
			log.Printf("warning: keysym 0x%x: names give U+%04X and U+%04X; keeping the first", s.value, old, s.cp)
			continue
		}
		cps[s.value] = s.cp
	}

	// Table order: by lower-cased name, then exact name, so that one binary
	// search finds both exact and case-insensitive matches.
	byName := slices.Clone(syms)
	slices.SortFunc(byName, func(a, b sym) int {
		return cmp.Or(cmp.Compare(strings.ToLower(a.name), strings.ToLower(b.name)), cmp.Compare(a.name, b.name))
	})
	index := map[string]int{}
	for i, s := range byName {
		index[s.name] = i
	}

	// Reverse index: by value; for equal values the preferred name first
	// (non-deprecated before deprecated, then header order).
	byValue := slices.Clone(syms)
	slices.SortFunc(byValue, func(a, b sym) int {
		return cmp.Or(cmp.Compare(a.value, b.value), cmpBool(a.deprecated, b.deprecated), cmp.Compare(a.order, b.order))
	})

	var values, withCP int
	for i, s := range byValue {
		if i == 0 || byValue[i-1].value != s.value {
			values++
			if cps[s.value] != 0 {
				withCP++
			}
		}
	}
	var deprecated int
	for _, s := range syms {
		if s.deprecated {
			deprecated++
		}
	}

	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by gen.go from keysymdef.h and XF86keysym.h; DO NOT EDIT.\n\n")
	fmt.Fprintf(&b, "package keysym\n\n")
	fmt.Fprintf(&b, "// Generated table statistics.\n")
	fmt.Fprintf(&b, "const (\n")
	fmt.Fprintf(&b, "\tnumNames      = %d // names, including %d marked deprecated\n", len(syms), deprecated)
	fmt.Fprintf(&b, "\tnumValues     = %d // distinct keysym values\n", values)
	fmt.Fprintf(&b, "\tnumCodePoints = %d // values with a Unicode code point\n", withCP)
	fmt.Fprintf(&b, ")\n\n")
	fmt.Fprintf(&b, "// table holds every keysym name with its value and Unicode code point\n")
	fmt.Fprintf(&b, "// (0 if none), sorted by lower-cased name, then name.\n")
	fmt.Fprintf(&b, "var table = [numNames]entry{\n")
	for _, s := range byName {
		if cp := cps[s.value]; cp != 0 {
			fmt.Fprintf(&b, "{%q, 0x%x, 0x%x},\n", s.name, s.value, cp)
		} else {
			fmt.Fprintf(&b, "{%q, 0x%x, 0},\n", s.name, s.value)
		}
	}
	fmt.Fprintf(&b, "}\n\n")
	fmt.Fprintf(&b, "// byValue indexes table sorted by value; among names for one value the\n")
	fmt.Fprintf(&b, "// preferred one (first non-deprecated in header order) comes first.\n")
	fmt.Fprintf(&b, "var byValue = [numNames]uint16{")
	for i, s := range byValue {
		if i%16 == 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%d, ", index[s.name])
	}
	fmt.Fprintf(&b, "\n}\n")
	if len(syms) > 1<<16 {
		return nil, fmt.Errorf("%d names do not fit the uint16 index", len(syms))
	}
	return format.Source(b.Bytes())
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	default:
		return 1
	}
}
