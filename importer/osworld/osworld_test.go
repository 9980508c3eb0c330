package osworld

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the importer's output")

// importFixtures converts testdata/tasks with testdata/cache and writes
// the suite into a new directory; it returns the suite's path.
func importFixtures(t *testing.T) (string, *Result) {
	t.Helper()
	srcs, err := ReadDir(filepath.Join("testdata", "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	cache := os.DirFS(filepath.Join("testdata", "cache"))
	res, err := Convert(srcs, Options{Name: "osworld", Dir: "osworld.d", Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	suite := filepath.Join(t.TempDir(), "osworld.yaml")
	if err := res.Write(WriteOptions{Suite: suite, Source: "testdata/tasks", Cache: cache}); err != nil {
		t.Fatal(err)
	}
	return suite, res
}

// tree is every file under dir by its slash path, with its content.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		m[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestGolden: the suite, the report, each task's app and the copied files
// are what testdata/golden holds (go test -update rewrites it).
func TestGolden(t *testing.T) {
	suite, _ := importFixtures(t)
	got := tree(t, filepath.Dir(suite))
	golden := filepath.Join("testdata", "golden")
	if *update {
		if err := os.RemoveAll(golden); err != nil {
			t.Fatal(err)
		}
		for name, data := range got {
			p := filepath.Join(golden, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	want := tree(t, golden)
	for name, data := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("%s was not written", name)
		} else if g != data {
			t.Errorf("%s differs from testdata/golden (go test -update rewrites it); got:\n%s", name, g)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s was written but is not in testdata/golden", name)
		}
	}
}

// TestSuiteShape: the suite is YAML with the fields of docs/tasks.md,
// names no agent, and every file it names is beside it.
func TestSuiteShape(t *testing.T) {
	suitePath, res := importFixtures(t)
	dir := filepath.Dir(suitePath)
	data, err := os.ReadFile(suitePath)
	if err != nil {
		t.Fatal(err)
	}
	var suite struct {
		Name  string           `yaml:"name"`
		Tasks []map[string]any `yaml:"tasks"`
	}
	if err := yaml.Unmarshal(data, &suite); err != nil {
		t.Fatalf("the suite is not YAML: %v", err)
	}
	if suite.Name != "osworld" || len(suite.Tasks) != len(res.Suite.Tasks) || len(suite.Tasks) < 7 {
		t.Fatalf("suite %q with %d tasks", suite.Name, len(suite.Tasks))
	}
	fields := []string{"name", "target", "image", "task", "inputs", "collect", "before_collect", "grade"}
	checks := []string{"exists", "text", "json", "table", "image", "command"}
	for _, task := range suite.Tasks {
		name := task["name"]
		for k := range task {
			if !slices.Contains(fields, k) {
				t.Errorf("task %v: field %q is not a task field", name, k)
			}
		}
		for _, k := range []string{"name", "target", "task", "collect", "grade"} {
			if task[k] == nil {
				t.Errorf("task %v has no %s", name, k)
			}
		}
		if task["image"] != Image {
			t.Errorf("task %v: image %v", name, task["image"])
		}
		if _, err := os.Stat(filepath.Join(dir, task["target"].(string), "agentbox.json")); err != nil {
			t.Errorf("task %v: %v", name, err)
		}
		for _, in := range listOf[map[string]any](t, task["inputs"]) {
			if _, err := os.Stat(filepath.Join(dir, in["from"].(string))); err != nil {
				t.Errorf("task %v: input: %v", name, err)
			}
			if !strings.HasPrefix(in["to"].(string), "~/") {
				t.Errorf("task %v: input to %v is not under ~/", name, in["to"])
			}
		}
		for _, c := range listOf[string](t, task["collect"]) {
			if !strings.HasPrefix(c, "~/") {
				t.Errorf("task %v: collect %q is not under ~/", name, c)
			}
		}
		for _, g := range listOf[map[string]any](t, task["grade"]) {
			n := 0
			for _, k := range checks {
				if g[k] != nil {
					n++
				}
			}
			if n != 1 {
				t.Errorf("task %v: check %v names %d kinds of check", name, g, n)
			}
			if e, ok := g["expected"].(string); ok {
				if _, err := os.Stat(filepath.Join(dir, e)); err != nil {
					t.Errorf("task %v: expected: %v", name, err)
				}
				if strings.HasPrefix(e, task["target"].(string)) {
					t.Errorf("task %v: the expected file %s is inside the app's directory (it would be staged into the sandbox)", name, e)
				}
			}
		}
	}
}

func listOf[T any](t *testing.T, v any) []T {
	t.Helper()
	if v == nil {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		t.Fatalf("%v is not a list", v)
	}
	var out []T
	for _, e := range l {
		x, ok := e.(T)
		if !ok {
			t.Fatalf("%v is not a %T", e, x)
		}
		out = append(out, x)
	}
	return out
}

// TestEveryReason: the fixtures give each reason, each on the task written
// for it.
func TestEveryReason(t *testing.T) {
	_, res := importFixtures(t)
	want := map[string]string{
		"impress-compare-slides.json":   ReasonUnknownFunction,
		"writer-a11y-tree.json":         ReasonUnknownGetter,
		"chrome-open-site.json":         ReasonNetwork,
		"calc-missing-download.json":    ReasonNotCached,
		"calc-and-gimp.json":            ReasonSeveralApps,
		"os-dark-mode.json":             ReasonGNOME,
		"vscode-setting.json":           ReasonNoApp,
		"chrome-history.json":           ReasonConfigStep,
		"calc-select-cell.json":         ReasonExecute,
		"calc-click-save.json":          ReasonPostconfig,
		"text-no-typo.json":             ReasonOption,
		"calc-pivot.json":               ReasonOption,
		"calc-export-tmp.json":          ReasonPath,
		"bad-id.json":                   ReasonMalformed,
		"test_all.json":                 ReasonNotTask,
		"zz-calc-sum-column-again.json": ReasonDuplicate,
	}
	got := map[string]string{}
	for _, s := range res.Skipped {
		got[filepath.Base(s.File)] = s.Reason
		if s.Detail == "" {
			t.Errorf("%s: %s without a detail", s.File, s.Reason)
		}
	}
	for f, r := range want {
		if got[f] != r {
			t.Errorf("%s: reason %q, want %q", f, got[f], r)
		}
	}
	if len(got) != len(want) {
		t.Errorf("not converted: %v, want %v", got, want)
	}
	if c := res.Counts()[ReasonOption]; c != 2 {
		t.Errorf("%d tasks counted as %q, want 2", c, ReasonOption)
	}
}

// TestBadJSON: a file that is not JSON, or whose fields have the wrong
// type, is an error naming the file, the line and the column.
func TestBadJSON(t *testing.T) {
	for _, tt := range []struct{ name, data, want string }{
		{"syntax", "{\n  \"id\": \"a\",\n  \"instruction\": oops\n}", `broken.json:3:18: invalid character 'o'`},
		{"type", "{\n  \"id\": \"a\",\n  \"evaluator\": {},\n  \"config\": 5\n}", `broken.json:4:13: json: cannot unmarshal number`},
		{"truncated", `{"id": "a"`, `broken.json:1:11: unexpected end of JSON input`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Convert([]Source{{File: "broken.json", Data: []byte(tt.data)}}, Options{Name: "x", Dir: "x.d"})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want ErrInvalid with %q", err, tt.want)
			}
		})
	}
	if _, err := ReadDir(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing directory: %v", err)
	}
	if _, err := ReadDir(t.TempDir()); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "no .json file") {
		t.Errorf("an empty directory: %v", err)
	}
}

// TestWriteRefusesToReplace: without Force, an existing suite, report or
// side directory is left as it is and nothing is written.
func TestWriteRefusesToReplace(t *testing.T) {
	suite, res := importFixtures(t)
	before := tree(t, filepath.Dir(suite))
	os.WriteFile(suite, []byte("mine\n"), 0o644)
	err := res.Write(WriteOptions{Suite: suite, Cache: os.DirFS(filepath.Join("testdata", "cache"))})
	if !errors.Is(err, ErrExists) {
		t.Fatalf("got %v, want ErrExists", err)
	}
	if data, _ := os.ReadFile(suite); string(data) != "mine\n" {
		t.Errorf("the suite was replaced")
	}
	if err := res.Write(WriteOptions{Suite: suite, Force: true, Cache: os.DirFS(filepath.Join("testdata", "cache"))}); err != nil {
		t.Fatal(err)
	}
	if after := tree(t, filepath.Dir(suite)); len(after) != len(before) || after[filepath.Base(suite)] != before[filepath.Base(suite)] {
		t.Errorf("--force wrote another tree")
	}
}

// TestSettingsRegexes: the checks of settings files hold on the lines
// GIMP and LibreOffice write and not on others.
func TestSettingsRegexes(t *testing.T) {
	_, res := importFixtures(t)
	regex := map[string][]string{}
	for _, task := range res.Suite.Tasks {
		for _, c := range task.Grade {
			if c.Regex != "" {
				regex[task.Name] = append(regex[task.Name], c.Regex)
			}
		}
	}
	for _, tt := range []struct {
		task    string
		i       int
		text    string
		matches bool
	}{
		{"gimp-dark-theme", 0, "# GIMP gimprc\n(theme \"Dark\")\n(show-tips no)\n", true},
		{"gimp-dark-theme", 0, "(theme \"Light\")\n", false},
		{"gimp-dark-theme", 0, "(icon-theme \"Dark\")\n", false},
		{"gimp-dark-theme", 1, "(session-info \"toolbox\"\n    (factory-entry \"gimp-toolbox\")\n    (position 0 0))\n(session-info toolbox 1)\n", true},
		{"gimp-dark-theme", 1, "(session-info toolbox 0)\n", false},
		{"impress-autosave", 0, `<item oor:path="/org.openoffice.Office.Common/Save/Document"><prop oor:name="AutoSaveTimeIntervall" oor:op="fuse"><value>3</value></prop></item>`, true},
		{"impress-autosave", 0, `<item oor:path="/org.openoffice.Office.Common/Save/Document"><prop oor:name="AutoSaveTimeIntervall" oor:op="fuse"><value>30</value></prop></item>`, false},
		{"writer-locale", 0, `<item oor:path="/org.openoffice.Setup/L10N"><prop oor:name="ooSetupSystemLocale" oor:op="fuse"><value>de-AT</value></prop></item>`, true},
		{"writer-locale", 0, `<item oor:path="/org.openoffice.Setup/L10N"><prop oor:name="ooSetupSystemLocale" oor:op="fuse"><value>en-US</value></prop></item>`, false},
	} {
		l := regex[tt.task]
		if tt.i >= len(l) {
			t.Fatalf("%s has %d regex checks", tt.task, len(l))
		}
		if got := regexp.MustCompile(l[tt.i]).MatchString(tt.text); got != tt.matches {
			t.Errorf("%s check %d (%s) on %q: %v, want %v", tt.task, tt.i, l[tt.i], tt.text, got, tt.matches)
		}
	}
}

// TestPyautogui: key presses become steps; anything else is refused with
// the statement named.
func TestPyautogui(t *testing.T) {
	for _, tt := range []struct {
		code string
		want string // steps as action:value, or the error's text
	}{
		{"import pyautogui; pyautogui.hotkey('ctrl', 's')", "key:ctrl+s"},
		{"import pyautogui\npyautogui.press('enter')  # confirm", "key:enter"},
		{"import pyautogui; pyautogui.press(['tab', 'enter'], presses=2)", "key:tab key:enter key:tab key:enter"},
		{"import time, pyautogui; time.sleep(0.25); pyautogui.hotkey('ctrl', '+')", "wait:250 key:ctrl+plus"},
		{`import pyautogui; pyautogui.typewrite("a;b\n")`, "type:a;b\n"},
		{"import pyautogui; pyautogui.keyDown('shiftleft'); pyautogui.keyUp('shiftleft')", "key_down:Shift_L key_up:Shift_L"},
		{"import pyautogui; pyautogui.click(10, 10)", `"pyautogui.click(10, 10)" is not a key press`},
		{"import os; os.system('x')", "imports os"},
		{"import pyautogui; pyautogui.hotkey('ctrl', 'nosuchkey')", `key "nosuchkey"`},
		{"import pyautogui; pyautogui.press(key)", "arguments other than literals"},
		{"import pyautogui", "presses no key"},
	} {
		steps, err := pyautoguiSteps([]string{"python3", "-c", tt.code})
		var got []string
		for _, s := range steps {
			v := s.Keys + s.Key + s.Text
			if s.MS != 0 {
				v = strconv.Itoa(s.MS)
			}
			got = append(got, s.Action+":"+v)
		}
		g := strings.Join(got, " ")
		if err != nil {
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%q: error %v, want %q", tt.code, err, tt.want)
			}
		} else if g != tt.want {
			t.Errorf("%q: got %q, want %q", tt.code, g, tt.want)
		}
	}
}

// TestSplitWords: a launch or execute string is split as sh would, and
// anything sh would do more with is refused.
func TestSplitWords(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
		err  string
	}{
		{`libreoffice --calc "/home/user/my file.xlsx"`, []string{"libreoffice", "--calc", "/home/user/my file.xlsx"}, ""},
		{`mkdir -p '/home/user/a b' c\ d`, []string{"mkdir", "-p", "/home/user/a b", "c d"}, ""},
		{`echo hi > /home/user/x`, nil, `shell syntax ">"`},
		{`rm -rf $HOME`, nil, `shell syntax "$"`},
		{`echo "$(id)"`, nil, "shell expansion"},
		{`echo 'open`, nil, "unterminated quote"},
	} {
		got, err := splitWords(tt.in)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%q: error %v, want %q", tt.in, err, tt.err)
		case tt.err == "" && (err != nil || !slices.Equal(got, tt.want)):
			t.Errorf("%q: %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestCacheLookup: a download is found in the cache by its file name or
// by its URL's base name; a name that would leave the cache is not looked
// up.
func TestCacheLookup(t *testing.T) {
	c := &converter{o: Options{Cache: fstest.MapFS{"a.xlsx": {Data: []byte("x")}, "b.csv": {Data: []byte("y")}}}}
	for _, tt := range []struct{ url, name, want string }{
		{"https://h/x/a.xlsx", "other.xlsx", "a.xlsx"},
		{"https://h/x/zzz?raw=1", "b.csv", "b.csv"},
		{"https://h/b.csv?download=true#x", "", "b.csv"},
		{"https://h/", "..", ""},
		{"https://h/c.xlsx", "c.xlsx", ""},
	} {
		got, err := c.cached(tt.url, tt.name)
		if got != tt.want || (tt.want == "") != (err != nil) {
			t.Errorf("%s %s: %q, %v; want %q", tt.url, tt.name, got, err, tt.want)
		}
	}
}
