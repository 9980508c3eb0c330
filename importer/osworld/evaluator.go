package osworld

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// gimpConfigDir is where GIMP 2.10 (Debian bookworm's) keeps gimprc and
// sessionrc, below the home.
const gimpConfigDir = ".config/GIMP/2.10"

// maxInlineText bounds an expected text file written into the suite.
const maxInlineText = 64 << 10

// getter is an OSWorld result or expected getter.
type getter struct {
	Type    string          `json:"type"`
	Path    json.RawMessage `json:"path"`
	Dest    json.RawMessage `json:"dest"`
	Command json.RawMessage `json:"command"`
	Multi   bool            `json:"multi"`
	Rules   json.RawMessage `json:"rules"`
}

func (g getter) str(raw json.RawMessage, field string) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", skipf(ReasonUnknownGetter, "getter %s with %s other than one text (several files)", g.Type, field)
	}
	return s, nil
}

func (c *converter) evaluator() error {
	ev := c.raw.Evaluator
	var funcs []string
	for _, f := range list(ev.Func) {
		var s string
		if err := json.Unmarshal(f, &s); err != nil {
			return skipf(ReasonMalformed, "evaluator func: want a name or a list of names")
		}
		funcs = append(funcs, s)
	}
	if len(funcs) == 0 {
		return skipf(ReasonMalformed, "evaluator has no func")
	}
	if len(funcs) > 1 && ev.Conj != "" && ev.Conj != "and" {
		return skipf(ReasonOption, "conj %q: a grade holds when every check holds", ev.Conj)
	}
	results, expected, options := list(ev.Result), list(ev.Expected), list(ev.Options)
	at := func(l []json.RawMessage, i int) json.RawMessage {
		switch {
		case len(funcs) == 1 && len(l) == 1:
			return l[0]
		case i < len(l):
			return l[i]
		}
		return nil
	}
	for i, fn := range funcs {
		if err := c.check(fn, at(results, i), at(expected, i), at(options, i)); err != nil {
			return err
		}
	}
	return c.postconfig()
}

func decodeGetter(raw json.RawMessage, what string) (*getter, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var g getter
	if err := json.Unmarshal(raw, &g); err != nil {
		return nil, skipf(ReasonMalformed, "%s: %v", what, err)
	}
	return &g, nil
}

// collected is the file a result getter reads, relative to the home;
// it is added to collect.
func (c *converter) collected(raw json.RawMessage) (string, error) {
	g, err := decodeGetter(raw, "result")
	if err != nil {
		return "", err
	}
	if g == nil {
		return "", skipf(ReasonMalformed, "evaluator has no result")
	}
	var rel string
	switch g.Type {
	case "vm_file":
		if g.Multi {
			return "", skipf(ReasonUnknownGetter, "vm_file with multi")
		}
		p, err := g.str(g.Path, "path")
		if err != nil {
			return "", err
		}
		if rel, err = homePath(p); err != nil {
			return "", err
		}
	case "gimp_config_file":
		d, err := g.str(g.Dest, "dest")
		if err != nil {
			return "", err
		}
		if d != "gimprc" && d != "sessionrc" {
			return "", skipf(ReasonUnknownGetter, "gimp_config_file %q (gimprc or sessionrc)", d)
		}
		rel = path.Join(gimpConfigDir, d)
	case "vm_command_line":
		// The output of `cat FILE` is the file.
		var argv []string
		if err := json.Unmarshal(g.Command, &argv); err != nil {
			var s string
			if json.Unmarshal(g.Command, &s) != nil {
				return "", skipf(ReasonMalformed, "vm_command_line without a command")
			}
			if argv, err = splitWords(s); err != nil {
				return "", skipf(ReasonUnknownGetter, "vm_command_line %q is not cat FILE", s)
			}
		}
		if len(argv) != 2 || path.Base(argv[0]) != "cat" {
			return "", skipf(ReasonUnknownGetter, "vm_command_line %q is not cat FILE", strings.Join(argv, " "))
		}
		var err error
		if rel, err = homePath(argv[1]); err != nil {
			return "", err
		}
	default:
		return "", skipf(ReasonUnknownGetter, "result getter %q", g.Type)
	}
	if !slices.Contains(c.t.Collect, "~/"+rel) {
		c.t.Collect = append(c.t.Collect, "~/"+rel)
	}
	return rel, nil
}

// expectedFile copies a cloud_file from the cache next to the suite and
// returns the name found in the cache and its path relative to the suite.
func (c *converter) expectedFile(raw json.RawMessage) (name, rel string, err error) {
	if name, err = c.expectedName(raw); err != nil {
		return "", "", err
	}
	rel = path.Join(c.dir, "expected", name)
	if !slices.ContainsFunc(c.copies, func(cp Copy) bool { return cp.To == rel }) {
		c.copies = append(c.copies, Copy{From: name, To: rel})
	}
	return name, rel, nil
}

// expectedName finds a cloud_file in the cache.
func (c *converter) expectedName(raw json.RawMessage) (string, error) {
	g, err := decodeGetter(raw, "expected")
	if err != nil {
		return "", err
	}
	if g == nil {
		return "", skipf(ReasonMalformed, "no expected file")
	}
	if g.Type != "cloud_file" {
		return "", skipf(ReasonUnknownGetter, "expected getter %q (want cloud_file)", g.Type)
	}
	if g.Multi {
		return "", skipf(ReasonUnknownGetter, "cloud_file with multi")
	}
	url, err := g.str(g.Path, "path")
	if err != nil {
		return "", err
	}
	var dest string
	if len(g.Dest) > 0 {
		if dest, err = g.str(g.Dest, "dest"); err != nil {
			return "", err
		}
	}
	return c.cached(url, path.Base(dest))
}

// rules is an expected rule getter's rules, decoded into v.
func rules(raw json.RawMessage, v any) error {
	g, err := decodeGetter(raw, "expected")
	if err != nil {
		return err
	}
	if g == nil || g.Type != "rule" {
		t := "none"
		if g != nil {
			t = g.Type
		}
		return skipf(ReasonUnknownGetter, "expected getter %s (want rule)", t)
	}
	if err := json.Unmarshal(g.Rules, v); err != nil {
		return skipf(ReasonMalformed, "rules: %v", err)
	}
	return nil
}

// check converts one evaluator function into grade checks.
func (c *converter) check(fn string, result, expected, options json.RawMessage) error {
	var opts map[string]json.RawMessage
	if len(options) > 0 && string(options) != "null" {
		if err := json.Unmarshal(options, &opts); err != nil {
			return skipf(ReasonMalformed, "options: %v", err)
		}
	}
	known := []string{"compare_table", "compare_csv", "exact_match", "check_include_exclude", "compare_text_file",
		"check_config_status", "check_auto_saving_time", "check_libre_locale"}
	if !slices.Contains(known, fn) {
		return skipf(ReasonUnknownFunction, "unknown function %s", fn)
	}
	file, err := c.collected(result)
	if err != nil {
		return err
	}
	add := func(ch Check) { ch.Name = fn; c.t.Grade = append(c.t.Grade, ch) }
	onlyOptions := func(allowed ...string) error {
		for k := range opts {
			if !slices.Contains(allowed, k) {
				return skipf(ReasonOption, "%s option %q", fn, k)
			}
		}
		return nil
	}
	switch fn {
	case "compare_table", "compare_csv":
		if err := onlyOptions("rules"); err != nil {
			return err
		}
		if err := tableRules(fn, opts["rules"]); err != nil {
			return err
		}
		_, exp, err := c.expectedFile(expected)
		if err != nil {
			return err
		}
		add(Check{Table: file, Expected: exp})
	case "compare_text_file":
		if err := onlyOptions("ignore_blanks", "ignore_case"); err != nil {
			return err
		}
		name, err := c.expectedName(expected) // its text is written into the suite
		if err != nil {
			return err
		}
		data, err := fs.ReadFile(c.o.Cache, name)
		if err != nil {
			return skipf(ReasonNotCached, "%s: %v", name, err)
		}
		if len(data) > maxInlineText || !utf8.Valid(data) {
			return skipf(ReasonOption, "compare_text_file: %s is not text of at most %d KiB (the text check takes its expected text inline)", name, maxInlineText>>10)
		}
		ch := Check{Text: file, Equals: string(data)}
		for _, o := range []struct{ opt, norm string }{{"ignore_blanks", "whitespace"}, {"ignore_case", "case"}} {
			var on bool
			if raw, ok := opts[o.opt]; ok && json.Unmarshal(raw, &on) == nil && on {
				ch.Normalize = append(ch.Normalize, o.norm)
			}
		}
		add(ch)
	case "exact_match":
		var r struct {
			Expected *string `json:"expected"`
		}
		if err := rules(expected, &r); err != nil {
			return err
		}
		if r.Expected == nil {
			return skipf(ReasonMalformed, "exact_match rules without expected text")
		}
		add(Check{Text: file, Equals: *r.Expected})
	case "check_include_exclude":
		var r struct {
			Include []string `json:"include"`
			Exclude []string `json:"exclude"`
		}
		if err := rules(expected, &r); err != nil {
			return err
		}
		if len(r.Exclude) > 0 {
			return skipf(ReasonOption, "check_include_exclude: exclude needs a text check that a file does not contain something; docs/tasks.md has none")
		}
		for _, s := range r.Include {
			add(Check{Text: file, Contains: s})
		}
	case "check_config_status":
		if !strings.HasPrefix(file, gimpConfigDir+"/") {
			return skipf(ReasonUnknownGetter, "check_config_status reads GIMP's settings (gimp_config_file)")
		}
		var r struct {
			Key   json.RawMessage `json:"key"`
			Value string          `json:"value"`
		}
		if err := rules(expected, &r); err != nil {
			return err
		}
		var keys []string
		if err := json.Unmarshal(r.Key, &keys); err != nil {
			var k string
			if json.Unmarshal(r.Key, &k) != nil {
				return skipf(ReasonMalformed, "check_config_status: key is a name or two")
			}
			keys = []string{k}
		}
		if len(keys) < 1 || len(keys) > 2 || r.Value == "" {
			return skipf(ReasonMalformed, "check_config_status: key is a name or two, with a value")
		}
		// A line "(KEY [KEY2] … VALUE)": its first words the keys, its
		// last the value, as OSWorld reads it.
		re := `(?m)^[ \t]*\(*` + regexp.QuoteMeta(keys[0]) + `[ \t]+`
		if len(keys) == 2 {
			re += regexp.QuoteMeta(keys[1]) + `[ \t]+`
		}
		re += `(?:[^\n]*[ \t])?` + regexp.QuoteMeta(r.Value) + `\)*[ \t]*$`
		add(Check{Text: file, Regex: re})
	case "check_auto_saving_time":
		var r struct {
			Minutes *int `json:"minutes"`
		}
		if err := rules(expected, &r); err != nil {
			return err
		}
		if r.Minutes == nil {
			return skipf(ReasonMalformed, "check_auto_saving_time rules without minutes")
		}
		add(Check{Text: file, Regex: xcuItem("/org.openoffice.Office.Common/Save/Document", "AutoSaveTimeIntervall", regexp.QuoteMeta(strconv.Itoa(*r.Minutes)))})
	case "check_libre_locale":
		var r struct {
			LocaleSet []string `json:"locale_set"`
		}
		if err := rules(expected, &r); err != nil {
			return err
		}
		if len(r.LocaleSet) == 0 {
			return skipf(ReasonMalformed, "check_libre_locale rules without locale_set")
		}
		var alts []string
		for _, g := range r.LocaleSet {
			alts = append(alts, globRegex(g))
		}
		add(Check{Text: file, Regex: xcuItem("/org.openoffice.Setup/L10N", "ooSetupSystemLocale", "(?:"+strings.Join(alts, "|")+")(?:-[^<]*)?")})
	}
	return nil
}

// xcuItem matches a setting in LibreOffice's registrymodifications.xcu,
// which writes one item a line:
// <item oor:path="P"><prop oor:name="N" oor:op="fuse"><value>V</value></prop></item>
func xcuItem(itemPath, prop, value string) string {
	return `<item oor:path="` + regexp.QuoteMeta(itemPath) + `"><prop oor:name="` + regexp.QuoteMeta(prop) + `"[^>]*><value>` + value + `</value>`
}

// globRegex is an fnmatch pattern (*, ?) as a regular expression over one
// language tag's first part.
func globRegex(g string) string {
	var b strings.Builder
	for _, r := range g {
		switch r {
		case '*':
			b.WriteString(`[^<-]*`)
		case '?':
			b.WriteString(`[^<-]`)
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	return b.String()
}

// tableRules accepts compare_table's rules when they compare the first
// sheets' data, which is what the table check does with an expected file.
func tableRules(fn string, raw json.RawMessage) error {
	if len(raw) == 0 {
		return nil
	}
	var rs []map[string]any
	if err := json.Unmarshal(raw, &rs); err != nil {
		return skipf(ReasonMalformed, "%s rules: %v", fn, err)
	}
	first := func(v any, prefix string) bool {
		switch x := v.(type) {
		case nil:
			return true
		case float64:
			return x == 0
		case string:
			return x == prefix+"I0" || x == "0"
		}
		return false
	}
	for _, r := range rs {
		if r["type"] != "sheet_data" {
			return skipf(ReasonOption, "%s rule %v: only sheet_data has a built-in check", fn, r["type"])
		}
		for k, v := range r {
			switch {
			case k == "type":
			case k == "sheet_idx0" && first(v, "R"), k == "sheet_idx1" && first(v, "E"):
			default:
				return skipf(ReasonOption, "%s rule sheet_data with %s %v: the table check compares first sheets", fn, k, v)
			}
		}
	}
	return nil
}

// postconfig turns OSWorld's post-config into before_collect steps when
// it only presses keys, waits, or waits for a window.
func (c *converter) postconfig() error {
	for i, st := range c.raw.Evaluator.Postconfig {
		fail := func(err error) error {
			if se, ok := err.(*skipError); ok {
				se.detail = fmt.Sprintf("postconfig[%d] %s: %s", i, st.Type, se.detail)
			}
			return err
		}
		switch st.Type {
		case "sleep":
			var p struct {
				Seconds float64 `json:"seconds"`
			}
			if err := params(st, &p); err != nil {
				return fail(err)
			}
			c.t.BeforeCollect = append(c.t.BeforeCollect, waitStep(p.Seconds))
		case "activate_window":
			title, err := windowTitle(st)
			if err != nil {
				return fail(err)
			}
			c.t.BeforeCollect = append(c.t.BeforeCollect, Step{Action: "wait", Until: "window", Title: title, MS: 5000})
		case "execute", "command":
			var p command
			if err := params(st, &p); err != nil {
				return fail(err)
			}
			argv, err := p.argv()
			if err != nil {
				return fail(skipf(ReasonPostconfig, "%s", strings.TrimPrefix(err.Error(), ReasonExecute+": ")))
			}
			steps, err := pyautoguiSteps(argv)
			if err != nil {
				return fail(err)
			}
			c.t.BeforeCollect = append(c.t.BeforeCollect, steps...)
		default:
			return fail(skipf(ReasonPostconfig, "only key presses, waits and activate_window are converted"))
		}
	}
	return nil
}

func waitStep(seconds float64) Step {
	ms := int(seconds*1000 + 0.5)
	if ms < 1 {
		ms = 1
	}
	return Step{Action: "wait", MS: ms}
}
