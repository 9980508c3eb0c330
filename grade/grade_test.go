package grade

import (
	"context"
	"errors"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/codegirl-games/agentbox/internal/yamlwalk"
	"github.com/codegirl-games/agentbox/trace"
)

var errBad = errors.New("invalid suite")

// parseYAML parses a task mapping's grade field the way a suite does.
func parseYAML(t *testing.T, dir, doc string) (*Spec, error) {
	t.Helper()
	w := yamlwalk.Walker{File: "suite.yaml", Class: errBad}
	root, err := w.Root([]byte(doc), "a task")
	if err != nil {
		t.Fatal(err)
	}
	var s *Spec
	err = w.Mapping(root, "a task", []string{"grade"}, func(k, v *yaml.Node) (err error) {
		s, err = Parse(w.In("task 1"), k, v, Options{Dir: dir})
		return err
	})
	return s, err
}

func TestParseErrors(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string][]byte{"want.png": makePNG(t, 2, 2, color.NRGBA{A: 255}, 0), "check.sh": []byte("#!/bin/sh\n")})
	for _, tt := range []struct{ name, in, want string }{
		{"fine", "grade:\n  - exists: a.txt\n  - {text: a.txt, contains: x, normalize: [case]}\n  - {table: s.ods, cell: Sheet1.B10, equals: 3}\n  - {image: a.png, expected: want.png}\n  - {command: [./check.sh, x], timeout: 5s}\n", ""},
		{"not a list", "grade: {exists: a}\n", `suite.yaml:1: task 1: field "grade": want a non-empty list`},
		{"empty list", "grade: []\n", `field "grade": want a non-empty list`},
		{"no kind", "grade:\n  - {file: a.txt}\n", `suite.yaml:2: task 1: grade check 1: a check names one of exists, text, json, table, image, command`},
		{"kind misspelt", "grade:\n  - {tabel: a.ods}\n", `("tabel": did you mean table?)`},
		{"two kinds", "grade:\n  - {exists: a, text: b, equals: x}\n", `not exists and text`},
		{"unknown field", "grade:\n  - exists: a\n  - table: s.ods\n    cel: B1\n    equals: 1\n", `suite.yaml:4: task 1: grade check 2: unknown field "cel" (did you mean cell?) (a table check has table, sheet, cell, range, equals, expected, tolerance, name, weight)`},
		{"field of another kind", "grade:\n  - {exists: a, equals: x}\n", `unknown field "equals"`},
		{"field twice", "grade:\n  - exists: a\n    exists: b\n", `field "exists" appears twice`},
		{"text without a test", "grade:\n  - {text: a}\n", `a text check takes one of equals, contains, regex`},
		{"text with two tests", "grade:\n  - {text: a, equals: x, contains: y}\n", `a text check takes one of equals, contains, regex`},
		{"text equals a number", "grade:\n  - {text: a, equals: 7}\n", `field "equals": must be text (quote it)`},
		{"bad regex", "grade:\n  - {text: a, regex: '('}\n", `field "regex": error parsing regexp`},
		{"bad normalize", "grade:\n  - {text: a, equals: x, normalize: [cases]}\n", `unknown normalization cases (did you mean case?)`},
		{"path out", "grade:\n  - exists: ../run.json\n", `field "exists": "../run.json": want a path below the collected files`},
		{"path absolute", "grade:\n  - exists: /etc/passwd\n", `want a path below the collected files`},
		{"json without equals", "grade:\n  - {json: a.json, path: a}\n", `a json check needs equals`},
		{"json bad path", "grade:\n  - {json: a.json, path: 'a[x]', equals: 1}\n", `want an index such as [0]`},
		{"bad cell", "grade:\n  - {table: s.csv, cell: B0, equals: 1}\n", `"B0" is not a cell such as B10`},
		{"cell and range", "grade:\n  - {table: s.csv, cell: B1, range: 'A1:B2', equals: 1}\n", `one of cell, range, expected`},
		{"cell without equals", "grade:\n  - {table: s.csv, cell: B1}\n", `a table check with cell needs equals`},
		{"range of the wrong shape", "grade:\n  - {table: s.csv, range: 'A1:B2', equals: [[1, 2]]}\n", `equals must be a list of 2 rows, each a list of 2 values`},
		{"range backwards", "grade:\n  - {table: s.csv, range: 'B2:A1', equals: [[1]]}\n", `the first cell is the top left one`},
		{"sheets disagree", "grade:\n  - {table: s.ods, cell: Sheet1.B1, sheet: Sheet2, equals: 1}\n", `field "sheet": "Sheet2", and the cell or range names sheet "Sheet1"`},
		{"expected missing", "grade:\n  - {table: s.ods, expected: nope.csv}\n", `nope.csv: no such file`},
		{"image without expected", "grade:\n  - {image: a.png}\n", `an image check needs expected`},
		{"image tolerance over 1", "grade:\n  - {image: a.png, expected: want.png, tolerance: 2}\n", `field "tolerance": out of range`},
		{"threshold", "grade:\n  - {image: a.png, expected: want.png, threshold: 300}\n", `want a whole number 0 to 255`},
		{"command empty", "grade:\n  - {command: []}\n", `want a list of text`},
		{"command missing", "grade:\n  - {command: [./nope.sh]}\n", `nope.sh: no such file`},
		{"timeout", "grade:\n  - {command: ['true'], timeout: soon}\n", `want a duration like 60s`},
		{"weight", "grade:\n  - {exists: a, weight: -1}\n", `field "weight": must be a positive number`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseYAML(t, dir, tt.in)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want == "":
			case err == nil:
				t.Fatalf("no error, want %q", tt.want)
			case !strings.Contains(err.Error(), tt.want):
				t.Errorf("error %q\nwant %q", err, tt.want)
			case !errors.Is(err, errBad):
				t.Errorf("error %q does not wrap the caller's class", err)
			}
		})
	}
}

func TestParseJSON(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string][]byte{"want.png": makePNG(t, 2, 2, color.NRGBA{A: 255}, 0)})
	for _, tt := range []struct {
		name, in string
		o        Options
		want     string
	}{
		{"fine", `[{"table": "Documents/s.ods", "cell": "Sheet1.B10", "equals": 1234}, {"json": "a.json", "path": "a.b[0]", "equals": {"x": [1, null]}}]`, Options{NoHost: true}, ""},
		{"unknown field", `[{"text": "a", "equal": "x"}]`, Options{}, `invalid grade: grade: check 1: unknown field "equal" (did you mean equals?)`},
		{"not a list", `{"exists": "a"}`, Options{}, `grade: want a list of checks`},
		{"empty", `[]`, Options{}, `want a non-empty list`},
		{"a command from a remote client", `[{"command": ["sh", "-c", "id"]}]`, Options{NoHost: true}, `a command check runs a program on the host and cannot be named here`},
		{"a host file from a remote client", `[{"image": "a.png", "expected": "/etc/passwd"}]`, Options{NoHost: true}, `field "expected": a host file cannot be named here`},
		{"expected with a dir", `[{"image": "a.png", "expected": "want.png"}]`, Options{Dir: dir}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseJSON("grade", []byte(tt.in), tt.o)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want == "":
				if len(s.Checks) == 0 {
					t.Fatal("no checks")
				}
			case err == nil:
				t.Fatalf("no error, want %q", tt.want)
			case !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrInvalid):
				t.Errorf("error %q\nwant %q", err, tt.want)
			}
		})
	}
}

func TestLoadList(t *testing.T) {
	dir := t.TempDir()
	for _, doc := range []string{"- exists: a.txt\n", "grade:\n  - exists: a.txt\n"} {
		s := loadSpec(t, dir, doc)
		if len(s.Checks) != 1 || s.Checks[0].File != "a.txt" {
			t.Errorf("%q: %+v", doc, s.Checks)
		}
	}
	write(t, dir, map[string][]byte{"bad.yaml": []byte("grade:\n  - exists: a\ngrde: 1\n")})
	if _, err := Load(filepath.Join(dir, "bad.yaml")); err == nil || !strings.Contains(err.Error(), `bad.yaml:3: unknown field "grde" (did you mean grade?)`) {
		t.Errorf("error %v", err)
	}
}

// TestChecks runs each kind of check against files that satisfy it, fail
// it and cannot be read as it says.
func TestChecks(t *testing.T) {
	sales := map[string][][]odsCell{
		"Sheet1": {
			{{text: "item"}, {text: "amount"}},
			{{text: "a"}, {num: num(1000), text: "1,000.00"}},
			{{text: "b"}, {num: num(234), text: "234.00"}},
			{{}, {}, {text: "merged"}, {cover: true}},
			{{text: "  two  spaces", rep: 2}},
			{{text: "total"}, {num: num(1234.0000000001), text: "1,234.00"}},
		},
		"Notes": {{{text: "hello"}}},
	}
	ods := makeODS(t, sales, []string{"Sheet1", "Notes"})
	xlsx := makeXLSX(t, map[string]map[string]any{
		"Data":  {"A1": "item", "B1": "amount", "A2": "a", "B2": 1000, "B6": 1234.0, "A6": "total", "C3": true},
		"Other": {"A1": "x"},
	}, []string{"Data", "Other"})
	csvData := []byte("item,amount\na,1000\nb,234\n\"q,uoted\",x\n")
	files := map[string][]byte{
		"files/Documents/sales.ods":  ods,
		"files/Documents/sales.xlsx": xlsx,
		"files/out.csv":              csvData,
		"files/notes.txt":            []byte("Hello   World\nsecond line\n"),
		"files/data.json":            []byte(`{"a": {"b": [3, {"c": "x"}]}, "n": 1.50}`),
		"files/shot.png":             makePNG(t, 100, 10, color.NRGBA{R: 200, A: 255}, 20),
		"files/bad.json":             []byte(`{"a": `),
		"files/text.ods":             []byte("just text\n"),
		"files/zip.ods":              zipOf(t, "", map[string][]byte{"a.txt": []byte("x")}),
		"files/bin.csv":              {0xff, 0xfe, 0, 1},
		"files/notpng.png":           []byte("GIF89a"),
		"want.png":                   makePNG(t, 100, 10, color.NRGBA{R: 200, A: 255}, 0),
		"small.png":                  makePNG(t, 50, 10, color.NRGBA{R: 200, A: 255}, 0),
		"want.csv":                   []byte("item,amount\na,1000.0\nb,234\n,,merged\n  two  spaces,  two  spaces\ntotal,1234\n"),
		"want-xlsx.csv":              []byte("item,amount\na,1000\n"),
	}
	for _, tt := range []struct {
		name, spec string
		outcome    string
		score      float64
	}{
		{"exists", "- exists: notes.txt", trace.GradeVerified, 1},
		{"exists, ~/", "- exists: ~/Documents/sales.ods", trace.GradeVerified, 1},
		{"not collected", "- exists: nope.txt", trace.GradeIncorrect, 0},
		{"text contains", "- {text: notes.txt, contains: 'second line'}", trace.GradeVerified, 1},
		{"text equals normalised", "- {text: notes.txt, equals: 'hello world second line', normalize: [whitespace, case]}", trace.GradeVerified, 1},
		{"text equals not normalised", "- {text: notes.txt, equals: 'hello world second line'}", trace.GradeIncorrect, 0},
		{"text regex", "- {text: notes.txt, regex: '^Hello\\s+World'}", trace.GradeVerified, 1},
		{"text not UTF-8", "- {text: bin.csv, contains: x}", trace.GradeMalformed, 0},
		{"text missing", "- {text: nope.txt, contains: x}", trace.GradeIncorrect, 0},
		{"json equals", "- {json: data.json, path: 'a.b[1].c', equals: x}", trace.GradeVerified, 1},
		{"json equals a number", "- {json: data.json, path: n, equals: 1.5}", trace.GradeVerified, 1},
		{"json equals a list", "- {json: data.json, path: a.b, equals: [3, {c: x}]}", trace.GradeVerified, 1},
		{"json differs", "- {json: data.json, path: 'a.b[0]', equals: 4}", trace.GradeIncorrect, 0},
		{"json path missing", "- {json: data.json, path: 'a.b[5]', equals: 4}", trace.GradeIncorrect, 0},
		{"json broken", "- {json: bad.json, path: a, equals: 1}", trace.GradeMalformed, 0},
		{"ods cell", "- {table: Documents/sales.ods, cell: Sheet1.B6, equals: 1234}", trace.GradeVerified, 1},
		{"ods cell, first sheet", "- {table: Documents/sales.ods, cell: B2, equals: 1000}", trace.GradeVerified, 1},
		{"ods cell as text", "- {table: Documents/sales.ods, cell: B2, equals: '1,000.00'}", trace.GradeVerified, 1},
		{"ods cell, tolerance too tight", "- {table: Documents/sales.ods, cell: B6, equals: 1234, tolerance: 1e-12}", trace.GradeIncorrect, 0},
		{"ods cell wrong", "- {table: Documents/sales.ods, cell: B6, equals: 1200}", trace.GradeIncorrect, 0},
		{"ods cell after a merge", "- {table: Documents/sales.ods, cell: C4, equals: merged}", trace.GradeVerified, 1},
		{"ods covered cell is empty", "- {table: Documents/sales.ods, cell: D4, equals: null}", trace.GradeVerified, 1},
		{"ods repeated cell", "- {table: Documents/sales.ods, cell: B5, equals: '  two  spaces'}", trace.GradeVerified, 1},
		{"ods far cell is empty", "- {table: Documents/sales.ods, cell: Z900000, equals: null}", trace.GradeVerified, 1},
		{"ods other sheet", "- {table: Documents/sales.ods, sheet: Notes, cell: A1, equals: hello}", trace.GradeVerified, 1},
		{"ods no such sheet", "- {table: Documents/sales.ods, sheet: Nope, cell: A1, equals: hello}", trace.GradeIncorrect, 0},
		{"ods range", "- {table: Documents/sales.ods, range: 'A2:B3', equals: [[a, 1000], [b, 234]]}", trace.GradeVerified, 1},
		{"ods range wrong", "- {table: Documents/sales.ods, range: 'A2:B3', equals: [[a, 1000], [b, 235]]}", trace.GradeIncorrect, 0},
		{"ods whole sheet", "- {table: Documents/sales.ods, expected: want.csv, tolerance: 0.001}", trace.GradeVerified, 1},
		{"ods whole sheet differs", "- {table: Documents/sales.ods, expected: want-xlsx.csv}", trace.GradeIncorrect, 0},
		{"xlsx cell", "- {table: Documents/sales.xlsx, cell: Data.B6, equals: 1234}", trace.GradeVerified, 1},
		{"xlsx text", "- {table: Documents/sales.xlsx, cell: A6, equals: total}", trace.GradeVerified, 1},
		{"xlsx bool", "- {table: Documents/sales.xlsx, cell: C3, equals: true}", trace.GradeVerified, 1},
		{"xlsx wrong", "- {table: Documents/sales.xlsx, cell: B2, equals: 999}", trace.GradeIncorrect, 0},
		{"xlsx range", "- {table: Documents/sales.xlsx, range: 'A1:B2', equals: [[item, amount], [a, 1000]]}", trace.GradeVerified, 1},
		{"xlsx other sheet", "- {table: Documents/sales.xlsx, cell: Other.A1, equals: x}", trace.GradeVerified, 1},
		{"xlsx no such sheet", "- {table: Documents/sales.xlsx, cell: Nope.A1, equals: x}", trace.GradeIncorrect, 0},
		{"xlsx whole sheet", "- {table: Documents/sales.xlsx, sheet: Other, expected: want-xlsx.csv}", trace.GradeIncorrect, 0},
		{"csv cell", "- {table: out.csv, cell: A4, equals: 'q,uoted'}", trace.GradeVerified, 1},
		{"csv whole sheet", "- {table: out.csv, expected: want-xlsx.csv}", trace.GradeIncorrect, 0},
		{"csv not UTF-8", "- {table: bin.csv, cell: A1, equals: 1}", trace.GradeMalformed, 0},
		{"ods that is text", "- {table: text.ods, cell: A1, equals: 1}", trace.GradeMalformed, 0},
		{"zip that is no spreadsheet", "- {table: zip.ods, cell: A1, equals: 1}", trace.GradeMalformed, 0},
		{"image over the tolerance", "- {image: shot.png, expected: want.png}", trace.GradeIncorrect, 0},
		{"image within a looser tolerance", "- {image: shot.png, expected: want.png, tolerance: 0.05}", trace.GradeVerified, 1},
		{"image of another size", "- {image: shot.png, expected: small.png}", trace.GradeIncorrect, 0},
		{"image not a PNG", "- {image: notpng.png, expected: want.png}", trace.GradeMalformed, 0},
		{"weights", "- {exists: notes.txt, weight: 3}\n- {exists: nope.txt}", trace.GradeIncorrect, 0.75},
		{"malformed over incorrect", "- {exists: nope.txt}\n- {json: bad.json, path: a, equals: 1}\n- exists: notes.txt", trace.GradeMalformed, 1.0 / 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, files)
			g := gradeIn(loadSpec(t, dir, tt.spec+"\n"), dir)
			if g.Outcome != tt.outcome || g.Score != tt.score {
				t.Errorf("outcome %s score %v, want %s %v; %s", g.Outcome, g.Score, tt.outcome, tt.score, g.Message)
			}
			for _, c := range g.Checks {
				if c.OK == (c.Class != "") || c.Detail == "" || c.Check == "" {
					t.Errorf("check %+v: ok and class disagree, or no detail", c)
				}
			}
			t.Logf("%s: %s", g.Outcome, g.Message)
		})
	}
}

func TestNothingCollected(t *testing.T) {
	dir := t.TempDir()
	g := loadSpec(t, dir, "- exists: a.txt\n- {table: s.ods, cell: A1, equals: 1}\n").Grade(context.Background(), filepath.Join(dir, "files"), dir)
	if g.Outcome != trace.GradeIncorrect || g.Score != 0 || len(g.Checks) != 2 || !strings.Contains(g.Message, "a.txt was not collected") {
		t.Errorf("%+v", g)
	}
}

// TestLinkOut: a collected link that leads out of the files is not
// followed.
func TestLinkOut(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string][]byte{"secret.txt": []byte("secret"), "files/x": nil})
	if err := os.Symlink(filepath.Join(dir, "secret.txt"), filepath.Join(dir, "files", "link.txt")); err != nil {
		t.Fatal(err)
	}
	g := gradeIn(loadSpec(t, dir, "- {text: link.txt, contains: secret}\n"), dir)
	if g.Outcome == trace.GradeVerified {
		t.Errorf("a link out of the files was followed: %+v", g)
	}
}

func TestInterrupted(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g := loadSpec(t, dir, "- exists: a.txt\n").Grade(ctx, filepath.Join(dir, "files"), dir)
	if g.Outcome != trace.GradeInfrastructure {
		t.Errorf("%+v", g)
	}
}

func TestCommand(t *testing.T) {
	scripts := map[string][]byte{
		"ok.sh":       []byte("#!/bin/sh\ntest -f \"$AGENTBOX_FILES/a.txt\" && test -d \"$AGENTBOX_TRACE\" && test -f ./ok.sh && echo '{\"outcome\": \"verified\", \"score\": 1, \"message\": \"fine\"}'\n"),
		"half.sh":     []byte("#!/bin/sh\necho '{\"outcome\": \"incorrect\", \"score\": 0.5, \"message\": \"half\"}'\n"),
		"garbage.sh":  []byte("#!/bin/sh\necho 'all good!'\n"),
		"extra.sh":    []byte("#!/bin/sh\necho '{\"outcome\": \"verified\", \"socre\": 1}'\n"),
		"range.sh":    []byte("#!/bin/sh\necho '{\"outcome\": \"verified\", \"score\": 7}'\n"),
		"crash.sh":    []byte("#!/bin/sh\necho '{\"outcome\": \"verified\"}'\necho boom >&2\nexit 3\n"),
		"flood.sh":    []byte("#!/bin/sh\nexec yes\n"),
		"hang.sh":     []byte("#!/bin/sh\nsleep 1000 &\nsleep 1000\n"),
		"files/a.txt": []byte("x"),
	}
	for _, tt := range []struct {
		name, spec string
		outcome    string
		score      float64
		detail     string
	}{
		{"verified", "- command: [./ok.sh]", trace.GradeVerified, 1, "fine"},
		{"its own score", "- command: [./half.sh]\n- exists: a.txt", trace.GradeIncorrect, 0.75, "half"},
		{"garbage", "- command: [./garbage.sh]", trace.GradeInfrastructure, 0, `printed something else`},
		{"a field it does not know", "- command: [./extra.sh]", trace.GradeInfrastructure, 0, `unknown field "socre"`},
		{"score out of range", "- command: [./range.sh]", trace.GradeInfrastructure, 0, `the score 7`},
		{"crash", "- command: [./crash.sh]", trace.GradeInfrastructure, 0, "crashed (exit status 3): boom"},
		{"flood", "- command: [./flood.sh]", trace.GradeInfrastructure, 0, "printed more than 1048576 bytes"},
		{"hang", "- {command: [./hang.sh], timeout: 1s}", trace.GradeInfrastructure, 0, "timed out after 1s and was killed"},
		{"not on PATH", "- command: [no-such-program-agentbox]", trace.GradeInfrastructure, 0, "could not run"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, scripts)
			start := time.Now()
			g := gradeIn(loadSpec(t, dir, tt.spec+"\n"), dir)
			if took := time.Since(start); took > 30*time.Second {
				t.Errorf("grading took %v", took)
			}
			if g.Outcome != tt.outcome || g.Score != tt.score || !strings.Contains(g.Checks[0].Detail, tt.detail) {
				t.Errorf("outcome %s score %v detail %q, want %s %v %q", g.Outcome, g.Score, g.Checks[0].Detail, tt.outcome, tt.score, tt.detail)
			}
		})
	}
}
