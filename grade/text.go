package grade

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/codegirl-games/agentbox/internal/textcut"
)

// quote shows text from a file in a detail, shortened.
func quote(s string) string { return strconv.Quote(textcut.Runes(s, 80, "…")) }

func checkText(c *Check, data []byte) result {
	if !utf8.Valid(data) {
		return malformed("%s is not UTF-8 text", c.File)
	}
	s := normalize(c, string(data))
	switch {
	case c.Regex != nil:
		if c.Regex.MatchString(s) {
			return held("matches %s", c.Regex)
		}
		return incorrect("%s does not match %s", c.File, c.Regex)
	case c.Contains != "":
		if strings.Contains(s, normalize(c, c.Contains)) {
			return held("contains %s", quote(c.Contains))
		}
		return incorrect("%s does not contain %s", c.File, quote(c.Contains))
	}
	want := normalize(c, c.Equals.(string))
	if s == want {
		return held("equals %s", quote(want))
	}
	return incorrect("%s is %s, want %s", c.File, quote(s), quote(want))
}

func normalize(c *Check, s string) string {
	if c.Whitespace {
		s = strings.Join(strings.Fields(s), " ")
	}
	if c.Case {
		s = strings.ToLower(s)
	}
	return s
}

// pathElem is one step of a json path: a key, or an index.
type pathElem struct {
	key   string
	index int // when key == "" and isIndex
	isIdx bool
}

// parsePath reads a.b[0].c (keys separated by dots, [N] indexes; a key
// with a dot or a bracket can be written ["a.b"]).
func parsePath(p string) ([]pathElem, error) {
	var out []pathElem
	rest := p
	for rest != "" {
		switch {
		case strings.HasPrefix(rest, "["):
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, fmt.Errorf("path %q: [ without ]", p)
			}
			inner := rest[1:end]
			if strings.HasPrefix(inner, `"`) {
				k, err := strconv.Unquote(inner)
				if err != nil {
					return nil, fmt.Errorf("path %q: %s: %v", p, inner, err)
				}
				out = append(out, pathElem{key: k})
			} else {
				n, err := strconv.Atoi(inner)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("path %q: [%s]: want an index such as [0] or a quoted key", p, inner)
				}
				out = append(out, pathElem{index: n, isIdx: true})
			}
			rest = rest[end+1:]
		case strings.HasPrefix(rest, "."):
			if len(out) == 0 || len(rest) == 1 || rest[1] == '.' || rest[1] == '[' {
				return nil, fmt.Errorf("path %q: an empty key", p)
			}
			rest = rest[1:]
		default:
			if len(out) > 0 && !strings.HasPrefix(p[len(p)-len(rest)-1:], ".") {
				return nil, fmt.Errorf("path %q: want . or [ before %q", p, rest)
			}
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			out = append(out, pathElem{key: rest[:end]})
			rest = rest[end:]
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("path is empty")
	}
	return out, nil
}

func formatPath(p []pathElem) string {
	var b strings.Builder
	for i, e := range p {
		switch {
		case e.isIdx:
			fmt.Fprintf(&b, "[%d]", e.index)
		case strings.ContainsAny(e.key, ".[]\""):
			fmt.Fprintf(&b, "[%q]", e.key)
		default:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(e.key)
		}
	}
	return b.String()
}

func checkJSON(c *Check, data []byte) result {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return malformed("%s is not JSON: %v", c.File, err)
	}
	if _, err := dec.Token(); err == nil {
		return malformed("%s is not JSON: more than one value", c.File)
	}
	for i, e := range c.JSONPath {
		at := formatPath(c.JSONPath[:i+1])
		switch x := v.(type) {
		case map[string]any:
			if e.isIdx {
				return incorrect("%s: %s is an object, not a list", c.File, formatPath(c.JSONPath[:i]))
			}
			var ok bool
			if v, ok = x[e.key]; !ok {
				return incorrect("%s: %s is missing", c.File, at)
			}
		case []any:
			if !e.isIdx {
				return incorrect("%s: %s is a list, not an object", c.File, formatPath(c.JSONPath[:i]))
			}
			if e.index >= len(x) {
				return incorrect("%s: %s is missing (the list has %d)", c.File, at, len(x))
			}
			v = x[e.index]
		default:
			return incorrect("%s: %s is missing (%s is not an object or a list)", c.File, at, formatPath(c.JSONPath[:i]))
		}
	}
	if jsonEqual(v, c.Equals) {
		return held("%s equals %s", formatPath(c.JSONPath), show(c.Equals))
	}
	return incorrect("%s: %s is %s, want %s", c.File, formatPath(c.JSONPath), show(v), show(c.Equals))
}

// jsonEqual compares a decoded value (numbers as json.Number) with a
// wanted one (numbers as float64): numbers by value.
func jsonEqual(got, want any) bool {
	switch w := want.(type) {
	case float64:
		n, ok := got.(json.Number)
		if !ok {
			return false
		}
		f, err := strconv.ParseFloat(string(n), 64)
		return err == nil && (f == w || math.Abs(f-w) <= 1e-12*math.Max(math.Abs(f), math.Abs(w)))
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !jsonEqual(g[i], w[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok || !jsonEqual(gv, wv) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(got, want)
}

// show renders a JSON value for a detail, shortened.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return textcut.Runes(string(b), 80, "…")
}
