package osworld

import (
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/codegirl-games/agentbox/internal/keysym"
)

// pyautoguiSteps converts a post-config command that only presses keys
// through pyautogui (python -c "import pyautogui; pyautogui.hotkey('ctrl', 's')")
// into before_collect steps: hotkey and press become key, keyDown and
// keyUp key_down and key_up, typewrite and write type, time.sleep wait.
func pyautoguiSteps(argv []string) ([]Step, error) {
	prog := path.Base(argv[0])
	if !regexp.MustCompile(`^python[0-9.]*$`).MatchString(prog) || len(argv) != 3 || argv[1] != "-c" {
		return nil, skipf(ReasonPostconfig, "%s is not python -c with pyautogui", strings.Join(argv, " "))
	}
	stmts, err := pyStatements(argv[2])
	if err != nil {
		return nil, err
	}
	var steps []Step
	call := regexp.MustCompile(`^(pyautogui|time)\.([A-Za-z_]+)\((.*)\)$`)
	for _, s := range stmts {
		if regexp.MustCompile(`^import\s+[A-Za-z_, ]+$`).MatchString(s) {
			for _, m := range strings.Split(strings.TrimSpace(strings.TrimPrefix(s, "import")), ",") {
				if m = strings.TrimSpace(m); m != "pyautogui" && m != "time" {
					return nil, skipf(ReasonPostconfig, "imports %s", m)
				}
			}
			continue
		}
		m := call.FindStringSubmatch(s)
		if m == nil {
			return nil, skipf(ReasonPostconfig, "%q is not a key press", s)
		}
		args, kw, err := pyArgs(m[3])
		if err != nil {
			return nil, skipf(ReasonPostconfig, "%q: %v", s, err)
		}
		fn := m[1] + "." + m[2]
		bad := func() error { return skipf(ReasonPostconfig, "%q is not a key press agentbox can make", s) }
		switch fn {
		case "time.sleep":
			if len(args) != 1 || len(kw) > 0 {
				return nil, bad()
			}
			sec, err := strconv.ParseFloat(args[0].num, 64)
			if err != nil || args[0].isStr || sec < 0 || sec > 600 {
				return nil, bad()
			}
			steps = append(steps, waitStep(sec))
		case "pyautogui.hotkey":
			var keys []string
			for _, a := range args {
				k, err := pyKey(a)
				if err != nil {
					return nil, err
				}
				keys = append(keys, k)
			}
			if len(keys) == 0 || !onlyKw(kw, "interval") {
				return nil, bad()
			}
			steps = append(steps, Step{Action: "key", Keys: strings.Join(keys, "+")})
		case "pyautogui.press":
			if len(args) != 1 || !onlyKw(kw, "presses", "interval") {
				return nil, bad()
			}
			keys := args[0].list
			if !args[0].isList {
				keys = []pyValue{args[0]}
			}
			n := 1
			if p, ok := kw["presses"]; ok {
				if n, err = strconv.Atoi(p.num); err != nil || p.isStr || n < 1 || n > 100 {
					return nil, bad()
				}
			}
			for range n {
				for _, a := range keys {
					k, err := pyKey(a)
					if err != nil {
						return nil, err
					}
					steps = append(steps, Step{Action: "key", Keys: k})
				}
			}
		case "pyautogui.keyDown", "pyautogui.keyUp":
			if len(args) != 1 || len(kw) > 0 {
				return nil, bad()
			}
			k, err := pyKey(args[0])
			if err != nil {
				return nil, err
			}
			kind := "key_down"
			if m[2] == "keyUp" {
				kind = "key_up"
			}
			steps = append(steps, Step{Action: kind, Key: k})
		case "pyautogui.typewrite", "pyautogui.write":
			if len(args) != 1 || !args[0].isStr || !onlyKw(kw, "interval") {
				return nil, bad()
			}
			steps = append(steps, Step{Action: "type", Text: args[0].str})
		default:
			return nil, bad()
		}
	}
	if len(steps) == 0 {
		return nil, skipf(ReasonPostconfig, "python -c presses no key")
	}
	return steps, nil
}

func onlyKw(kw map[string]pyValue, allowed ...string) bool {
	for k := range kw {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			return false
		}
	}
	return true
}

// pyKeyNames maps pyautogui's key names that agentbox spells otherwise.
var pyKeyNames = map[string]string{
	"shiftleft": "Shift_L", "shiftright": "Shift_R",
	"ctrlleft": "Control_L", "ctrlright": "Control_R",
	"altleft": "Alt_L", "altright": "Alt_R",
	"winleft": "Super_L", "winright": "Super_R",
}

// pyKey is a pyautogui key name as an agentbox key name.
func pyKey(v pyValue) (string, error) {
	if !v.isStr || v.str == "" {
		return "", skipf(ReasonPostconfig, "a key is a name in quotes")
	}
	k := v.str
	if n, ok := pyKeyNames[strings.ToLower(k)]; ok {
		k = n
	}
	switch k {
	case "+":
		k = "plus"
	case " ":
		k = "space"
	}
	if _, err := keysym.ParseChord(k); err != nil {
		return "", skipf(ReasonPostconfig, "key %q: %v", v.str, err)
	}
	return k, nil
}

// pyStatements splits Python source into simple statements at ';' and
// newlines outside string literals.
func pyStatements(src string) ([]string, error) {
	var out []string
	var cur strings.Builder
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	for i := 0; i < len(src); i++ {
		ch := src[i]
		switch {
		case ch == '\'' || ch == '"':
			j := i + 1
			for ; j < len(src) && src[j] != ch; j++ {
				if src[j] == '\\' {
					j++
				}
			}
			if j >= len(src) {
				return nil, skipf(ReasonPostconfig, "unterminated string in %q", src)
			}
			cur.WriteString(src[i : j+1])
			i = j
		case ch == ';' || ch == '\n':
			flush()
		case ch == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			flush()
		default:
			cur.WriteByte(ch)
		}
	}
	flush()
	return out, nil
}

// pyValue is a Python literal of a call's arguments.
type pyValue struct {
	isStr, isList bool
	str, num      string
	list          []pyValue
}

// pyArgs parses a call's arguments: string and number literals, lists of
// them, and keyword arguments.
func pyArgs(s string) ([]pyValue, map[string]pyValue, error) {
	p := &pyParser{s: s}
	var args []pyValue
	kw := map[string]pyValue{}
	for {
		p.space()
		if p.done() {
			return args, kw, nil
		}
		if m := regexp.MustCompile(`^([A-Za-z_]+)\s*=`).FindStringSubmatch(p.s[p.i:]); m != nil {
			p.i += len(m[0])
			v, err := p.value()
			if err != nil {
				return nil, nil, err
			}
			kw[m[1]] = v
		} else {
			if len(kw) > 0 {
				return nil, nil, errSyntax()
			}
			v, err := p.value()
			if err != nil {
				return nil, nil, err
			}
			args = append(args, v)
		}
		p.space()
		if p.done() {
			return args, kw, nil
		}
		if p.s[p.i] != ',' {
			return nil, nil, errSyntax()
		}
		p.i++
	}
}

func errSyntax() error { return skipf(ReasonPostconfig, "arguments other than literals") }

type pyParser struct {
	s string
	i int
}

func (p *pyParser) done() bool { return p.i >= len(p.s) }

func (p *pyParser) space() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *pyParser) value() (pyValue, error) {
	p.space()
	if p.done() {
		return pyValue{}, errSyntax()
	}
	switch ch := p.s[p.i]; {
	case ch == '\'' || ch == '"':
		var b strings.Builder
		for j := p.i + 1; j < len(p.s); j++ {
			switch c := p.s[j]; {
			case c == ch:
				p.i = j + 1
				return pyValue{isStr: true, str: b.String()}, nil
			case c == '\\' && j+1 < len(p.s):
				j++
				switch e := p.s[j]; e {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				case '\\', '\'', '"':
					b.WriteByte(e)
				default:
					return pyValue{}, errSyntax()
				}
			default:
				b.WriteByte(c)
			}
		}
		return pyValue{}, errSyntax()
	case ch == '[':
		p.i++
		v := pyValue{isList: true}
		for {
			p.space()
			if !p.done() && p.s[p.i] == ']' {
				p.i++
				return v, nil
			}
			e, err := p.value()
			if err != nil {
				return pyValue{}, err
			}
			v.list = append(v.list, e)
			p.space()
			if !p.done() && p.s[p.i] == ',' {
				p.i++
			}
		}
	default:
		m := regexp.MustCompile(`^-?[0-9]+(\.[0-9]*)?`).FindString(p.s[p.i:])
		if m == "" {
			return pyValue{}, errSyntax()
		}
		p.i += len(m)
		return pyValue{num: m}, nil
	}
}
