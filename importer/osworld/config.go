package osworld

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
)

// relatedPrograms maps OSWorld's related_apps onto programs of the
// office image.
var relatedPrograms = map[string]string{
	"libreoffice_calc":    "localc",
	"libreoffice_writer":  "lowriter",
	"libreoffice_impress": "loimpress",
	"gimp":                "gimp",
	"chrome":              "chromium",
	"chromium":            "chromium",
	"mousepad":            "mousepad",
	"gedit":               "mousepad",
	"text_editor":         "mousepad",
}

// gnomeApps are related_apps that are the GNOME desktop itself.
var gnomeApps = map[string]bool{"os": true, "gnome": true, "nautilus": true, "settings": true}

// programs maps a program a launch names onto the office image's.
var programs = map[string]string{
	"localc": "localc", "lowriter": "lowriter", "loimpress": "loimpress",
	"soffice": "soffice", "libreoffice": "soffice",
	"gimp": "gimp", "mousepad": "mousepad", "gedit": "mousepad",
	"chromium": "chromium", "chromium-browser": "chromium", "chrome": "chromium",
	"google-chrome": "chromium", "google-chrome-stable": "chromium",
}

// byExtension is the program an open step's file is opened with.
var byExtension = map[string]string{
	".xlsx": "localc", ".xls": "localc", ".ods": "localc", ".csv": "localc", ".tsv": "localc",
	".docx": "lowriter", ".doc": "lowriter", ".odt": "lowriter", ".rtf": "lowriter",
	".pptx": "loimpress", ".ppt": "loimpress", ".odp": "loimpress",
	".png": "gimp", ".jpg": "gimp", ".jpeg": "gimp", ".xcf": "gimp", ".gif": "gimp", ".bmp": "gimp", ".tif": "gimp", ".tiff": "gimp", ".webp": "gimp",
	".txt": "mousepad", ".md": "mousepad", ".py": "mousepad", ".json": "mousepad", ".xml": "mousepad", ".yaml": "mousepad", ".yml": "mousepad", ".sh": "mousepad", ".c": "mousepad", ".log": "mousepad",
	".html": "chromium", ".htm": "chromium", ".pdf": "chromium",
}

// simpleCommands are the set-up commands an execute step may run: file
// operations, run by sh before the app starts.
var simpleCommands = []string{"mkdir", "touch", "cp", "mv", "rm", "chmod", "ln"}

// converter converts one task.
type converter struct {
	o      Options
	raw    *rawTask
	dir    string // the task's directory, relative to the suite's
	t      Task
	app    Manifest
	copies []Copy

	program string   // the app, once a step opened or launched it
	args    []string // its arguments (~/ for the home)
	pre     []string // sh commands run before the app
	related string   // the program related_apps names, if one
}

func (c *converter) convert() (*Task, error) {
	c.t = Task{Target: path.Join(c.dir, "app"), Image: Image, Task: c.raw.Instruction}
	if strings.TrimSpace(c.raw.Instruction) == "" {
		return nil, skipf(ReasonMalformed, "no instruction")
	}
	if err := c.relatedApps(); err != nil {
		return nil, err
	}
	for i, st := range c.raw.Config {
		if err := c.configStep(st); err != nil {
			if se, ok := err.(*skipError); ok {
				se.detail = fmt.Sprintf("config[%d] %s: %s", i, st.Type, se.detail)
			}
			return nil, err
		}
	}
	if c.program == "" {
		if c.related == "" {
			return nil, skipf(ReasonNoApp, "no config step opens or launches an app, and related_apps names none of the image's")
		}
		c.program = c.related
	}
	if err := c.evaluator(); err != nil {
		return nil, err
	}
	c.app.Command, c.app.Args = c.program, c.args
	if len(c.pre) > 0 {
		script := strings.Join(c.pre, " && ") + " && exec " + shellWord(c.program)
		for _, a := range c.args {
			script += " " + shellWord(a)
		}
		c.app.Command, c.app.Args = "sh", []string{"-c", script}
	}
	return &c.t, nil
}

func (c *converter) relatedApps() error {
	var progs []string
	for _, a := range c.raw.RelatedApps {
		switch p, ok := relatedPrograms[a]; {
		case gnomeApps[a]:
			return skipf(ReasonGNOME, "related_apps names %q", a)
		case a == "multi_apps":
			return skipf(ReasonSeveralApps, "related_apps names multi_apps")
		case !ok:
			return skipf(ReasonNoApp, "related_apps names %q", a)
		case !slices.Contains(progs, p):
			progs = append(progs, p)
		}
	}
	if len(progs) > 1 {
		return skipf(ReasonSeveralApps, "related_apps names %s", strings.Join(c.raw.RelatedApps, ", "))
	}
	if len(progs) == 1 {
		c.related = progs[0]
	}
	return nil
}

// params decodes a step's parameters.
func params(st rawStep, v any) error {
	if len(st.Parameters) == 0 {
		return skipf(ReasonMalformed, "no parameters")
	}
	if err := json.Unmarshal(st.Parameters, v); err != nil {
		return skipf(ReasonMalformed, "parameters: %v", err)
	}
	return nil
}

// command is an execute, command or launch step's parameters.
type command struct {
	Command json.RawMessage `json:"command"`
	Shell   bool            `json:"shell"`
}

// argv is the command as words: a list as given, a string split as sh
// would when it holds no shell syntax.
func (p command) argv() ([]string, error) {
	var l []string
	if json.Unmarshal(p.Command, &l) == nil {
		if len(l) == 0 {
			return nil, skipf(ReasonMalformed, "empty command")
		}
		return l, nil
	}
	var s string
	if err := json.Unmarshal(p.Command, &s); err != nil {
		return nil, skipf(ReasonMalformed, "command: want a string or a list of strings")
	}
	return splitWords(s)
}

func (c *converter) configStep(st rawStep) error {
	switch st.Type {
	case "download":
		var p struct {
			Files []struct {
				URL  string `json:"url"`
				Path string `json:"path"`
			} `json:"files"`
		}
		if err := params(st, &p); err != nil {
			return err
		}
		for _, f := range p.Files {
			rel, err := homePath(f.Path)
			if err != nil {
				return err
			}
			name, err := c.cached(f.URL, path.Base(f.Path))
			if err != nil {
				return err
			}
			from := path.Join(c.dir, "inputs", rel)
			c.copies = append(c.copies, Copy{From: name, To: from})
			c.t.Inputs = append(c.t.Inputs, Input{From: from, To: "~/" + rel})
		}
	case "open":
		var p struct {
			Path string `json:"path"`
		}
		if err := params(st, &p); err != nil {
			return err
		}
		rel, err := homePath(p.Path)
		if err != nil {
			return err
		}
		prog := c.related
		if prog == "" {
			prog = byExtension[strings.ToLower(path.Ext(rel))]
		}
		if prog == "" {
			return skipf(ReasonNoApp, "no app of the image opens %s", path.Base(rel))
		}
		if err := c.start(prog); err != nil {
			return err
		}
		c.args = append(c.args, "~/"+rel)
	case "launch":
		var p command
		if err := params(st, &p); err != nil {
			return err
		}
		argv, err := p.argv()
		if err != nil {
			return err
		}
		return c.launch(argv)
	case "execute", "command":
		var p command
		if err := params(st, &p); err != nil {
			return err
		}
		argv, err := p.argv()
		if err != nil {
			if strings.Contains(string(p.Command), "gsettings") {
				return skipf(ReasonGNOME, "runs gsettings")
			}
			return err
		}
		return c.execute(argv)
	case "sleep":
		// Set-up waits for the app to be ready; agentbox waits for its
		// window (activate_window: by its title) before the task starts.
		var p struct {
			Seconds float64 `json:"seconds"`
		}
		return params(st, &p)
	case "activate_window":
		title, err := windowTitle(st)
		if err != nil {
			return err
		}
		if c.program == "" {
			return skipf(ReasonConfigStep, "no app started before it")
		}
		c.app.WindowTitle = title
	case "chrome_open_tabs", "googledrive", "login", "proxy":
		return skipf(ReasonNetwork, "set-up step %s reaches outside the sandbox", st.Type)
	default:
		return skipf(ReasonConfigStep, "unknown config step %q", st.Type)
	}
	return nil
}

// cached finds a file in the cache by the file's name or the base name
// of its URL; it returns the name found.
func (c *converter) cached(url, name string) (string, error) {
	names := []string{}
	if name != "" && name != "." && name != "/" {
		names = append(names, name)
	}
	if u := urlBase(url); u != "" && !slices.Contains(names, u) {
		names = append(names, u)
	}
	for _, n := range names {
		if c.o.Cache == nil || !fs.ValidPath(n) {
			continue
		}
		if fi, err := fs.Stat(c.o.Cache, n); err == nil && fi.Mode().IsRegular() {
			return n, nil
		}
	}
	return "", skipf(ReasonNotCached, "%s: no %s in the cache", url, strings.Join(quoteAll(names), " or "))
}

func quoteAll(l []string) []string {
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// urlBase is the last element of a URL's path, without query or fragment.
func urlBase(u string) string {
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
		if j := strings.IndexByte(u, '/'); j >= 0 {
			u = u[j:]
		} else {
			return ""
		}
	}
	b := path.Base(u)
	if b == "." || b == "/" {
		return ""
	}
	return b
}

// start records the app a step opens; a second, different one is a
// second app.
func (c *converter) start(prog string) error {
	if c.program != "" && c.program != prog {
		return skipf(ReasonSeveralApps, "starts %s after %s", prog, c.program)
	}
	c.program = prog
	return nil
}

var gnomeProgram = regexp.MustCompile(`^(gsettings|dconf|nautilus|gnome-.*|xdg-settings)$`)

func (c *converter) launch(argv []string) error {
	base := path.Base(argv[0])
	if gnomeProgram.MatchString(base) {
		return skipf(ReasonGNOME, "launches %s", base)
	}
	prog, ok := programs[base]
	if !ok {
		return skipf(ReasonNoApp, "launches %s", base)
	}
	var args []string
	for _, a := range argv[1:] {
		switch {
		case prog == "soffice" && (a == "--calc" || a == "--writer" || a == "--impress"):
			prog = "lo" + strings.TrimPrefix(a, "--")
		case prog == "chromium" && strings.HasPrefix(a, "--remote-debugging-"):
			// The debugging port OSWorld's getters read the browser by:
			// nothing here uses it.
		case strings.HasPrefix(a, "http://") || strings.HasPrefix(a, "https://"):
			return skipf(ReasonNetwork, "opens %s", a)
		case strings.HasPrefix(a, "/home/user/") || strings.HasPrefix(a, "~/"):
			rel, err := homePath(a)
			if err != nil {
				return err
			}
			args = append(args, "~/"+rel)
		default:
			args = append(args, a)
		}
	}
	if err := c.start(prog); err != nil {
		return err
	}
	c.args = append(c.args, args...)
	return nil
}

func (c *converter) execute(argv []string) error {
	base := path.Base(argv[0])
	all := strings.Join(argv, " ")
	switch {
	case gnomeProgram.MatchString(base) || strings.Contains(all, "gsettings "):
		return skipf(ReasonGNOME, "runs %s", base)
	case strings.Contains(all, "pyautogui"):
		return skipf(ReasonExecute, "drives the GUI through pyautogui before the task")
	case !slices.Contains(simpleCommands, base):
		return skipf(ReasonExecute, "%s is not a simple file command (%s)", base, strings.Join(simpleCommands, ", "))
	case c.program != "":
		return skipf(ReasonExecute, "runs after the app started")
	}
	words := []string{shellWord(base)}
	for _, a := range argv[1:] {
		if strings.HasPrefix(a, "/home/user/") {
			a = "~/" + strings.TrimPrefix(a, "/home/user/")
		}
		words = append(words, shellWord(a))
	}
	c.pre = append(c.pre, strings.Join(words, " "))
	return nil
}

// shellWord quotes a word for sh; a leading ~/ becomes "$HOME"/.
func shellWord(s string) string {
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	if rest, ok := strings.CutPrefix(s, "~/"); ok {
		return `"$HOME"/` + q(rest)
	}
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=+,:") == "" {
		return s
	}
	return q(s)
}

// splitWords splits a command line as sh would, when it holds nothing
// but words: quotes are read, any other shell syntax is refused.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in := false // a word is under way
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, skipf(ReasonExecute, "unterminated quote in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			in = true
		case ch == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				switch {
				case s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0:
					i++
					cur.WriteByte(s[i])
				case s[i] == '$' || s[i] == '`':
					return nil, skipf(ReasonExecute, "shell expansion in %q", s)
				default:
					cur.WriteByte(s[i])
				}
			}
			if i >= len(s) {
				return nil, skipf(ReasonExecute, "unterminated quote in %q", s)
			}
			in = true
		case ch == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		case strings.IndexByte("|&;<>()$`*?[]{}#!", ch) >= 0:
			return nil, skipf(ReasonExecute, "shell syntax %q in %q", string(ch), s)
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, skipf(ReasonMalformed, "empty command")
	}
	return words, nil
}

// windowTitle is an activate_window step's window as a title pattern:
// OSWorld matches a part of the title, or (strict) the whole of it.
func windowTitle(st rawStep) (string, error) {
	var p struct {
		WindowName string `json:"window_name"`
		Strict     bool   `json:"strict"`
		ByClass    bool   `json:"by_class"`
	}
	if err := params(st, &p); err != nil {
		return "", err
	}
	switch {
	case p.ByClass:
		return "", skipf(ReasonConfigStep, "activate_window by class: agentbox waits for a title")
	case p.WindowName == "":
		return "", skipf(ReasonMalformed, "activate_window without window_name")
	case strings.ContainsAny(p.WindowName, "*?"):
		if p.Strict {
			return "/^" + regexp.QuoteMeta(p.WindowName) + "$/", nil
		}
		return "/" + regexp.QuoteMeta(p.WindowName) + "/", nil
	case p.Strict:
		return p.WindowName, nil
	}
	return "*" + p.WindowName + "*", nil
}
