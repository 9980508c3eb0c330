package yamlwalk

import (
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

var errBad = errors.New("invalid thing")

// walk reads a document with the fields name (text) and items (anything),
// the way suites and scripts do, and returns the error or what it read.
func walk(data string) (map[string]string, error) {
	w := Walker{File: "f.yaml", Class: errBad}
	root, err := w.Root([]byte(data), "a thing is a mapping with name and items")
	if err != nil {
		return nil, err
	}
	got := map[string]string{}
	err = w.Mapping(root, "a thing", []string{"name", "items"}, func(k, v *yaml.Node) error {
		switch k.Value {
		case "name":
			s, err := w.Text(k, v)
			got["name"] = s
			return err
		case "items":
			if v.Kind != yaml.SequenceNode {
				return w.Field(k, v, "want a list")
			}
			for i, it := range v.Content {
				iw := w.In("item " + string(rune('1'+i)))
				if it.Kind != yaml.MappingNode {
					return iw.Errorf(it.Line, "want a mapping")
				}
				if err := iw.Mapping(it, "an item", nil, func(k, v *yaml.Node) error { return nil }); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return got, err
}

func TestWalk(t *testing.T) {
	for _, tt := range []struct {
		name, in, want string // want: "" for no error
	}{
		{"fine", "name: x\nitems:\n  - {a: 1, b: 2}\n", ""},
		{"empty", "", "invalid thing: f.yaml:1: the file is empty (a thing is a mapping with name and items)"},
		{"only a comment", "# later\n", "invalid thing: f.yaml:1: the file is empty (a thing is a mapping with name and items)"},
		{"a list", "\n\n- a\n", "invalid thing: f.yaml:3: a thing is a mapping with name and items"},
		{"a scalar", "hello\n", "invalid thing: f.yaml:1: a thing is a mapping with name and items"},
		{"not YAML", "name: [\n", "invalid thing: f.yaml: yaml: line 1:"},
		{"unknown key, close", "name: x\nitmes: []\n", `invalid thing: f.yaml:2: unknown field "itmes" (did you mean items?) (a thing has name, items)`},
		{"unknown key, nothing close", "name: x\nzzzzzzzz: 1\n", `invalid thing: f.yaml:2: unknown field "zzzzzzzz" (a thing has name, items)`},
		{"key twice", "name: x\nitems: []\nname: y\n", `invalid thing: f.yaml:3: field "name" appears twice`},
		{"key twice comes before each", "name: [x]\nname: y\n", `invalid thing: f.yaml:2: field "name" appears twice`},
		{"wrong type", "name: [x]\n", `invalid thing: f.yaml:1: field "name": must be text`},
		{"null is not text", "name:\nitems: []\n", `invalid thing: f.yaml:1: field "name": must be text`},
		{"number is text", "name: 7\n", ""},
		{"caller's error at the value", "name: x\nitems:\n  {a: 1}\n", `invalid thing: f.yaml:3: field "items": want a list`},
		{"context", "items:\n  - a\n", `invalid thing: f.yaml:2: item 1: want a mapping`},
		{"context, any key, twice", "items:\n  - {a: 1}\n  - a: 1\n    b: 2\n    a: 3\n", `invalid thing: f.yaml:5: item 2: field "a" appears twice`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := walk(tt.in)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want == "":
			case err == nil:
				t.Fatalf("no error, want %q", tt.want)
			case !strings.HasPrefix(err.Error(), tt.want):
				t.Errorf("error %q\nwant %q", err, tt.want)
			case !errors.Is(err, errBad):
				t.Errorf("error %q does not wrap the class", err)
			}
		})
	}
}

func TestTextValue(t *testing.T) {
	got, err := walk("name: 'a # b'\n")
	if err != nil || got["name"] != "a # b" {
		t.Errorf("got %q, %v", got["name"], err)
	}
}
