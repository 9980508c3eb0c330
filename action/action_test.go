package action

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    string // String() of the result
		wantErr string // substring
	}{
		{`{"action":"key_down","key":"Right"}`, "key_down Right", ""},
		{`{"action":"click","x":10,"y":20,"button":"right","count":2}`, "click right x2 10,20", ""},
		{`{"action":"click","x":10.0,"y":20}`, "click 10,20", ""},
		{`{"action":"mouse_move","dx":-5,"dy":3}`, "mouse_move -5,+3", ""},
		{`{"action":"type","text":"héllo ✓"}`, `type "héllo ✓"`, ""},
		{`{"action":"wait","ms":1000}`, "wait 1000ms", ""},
		{`{"action":"wait","until":"stable","stable_ms":300}`, "wait until stable", ""},
		// wait until file takes its file under either name.
		{`{"action":"wait","until":"file","file":"~/a.ods"}`, "wait until file ~/a.ods", ""},
		{`{"action":"wait","until":"file","path":"~/Documents/a.ods","ms":60000}`, "wait until file ~/Documents/a.ods", ""},
		{`{"action":"wait","until":"file","path":"~/a","file":"~/a"}`, "", `field "path": give file or path`},
		{`{"action":"wait","until":"file","path":[[1,2]]}`, "", `field "path": must be a string`},
		{`{"action":"click","file":"~/a"}`, "", `field "file": unknown field`},
		{`{"action":"done","success":false,"message":"x"}`, "done (gave up)", ""},
		{`{"action":"drag","path":[[1,2],[3,4]]}`, "drag", ""},
		{`{"action":"screenshot","region":[0,0,10,10]}`, "screenshot", ""},
		{`{"action":"key","keys":"ctrl+c","x":null}`, "", `unknown field`},
		// key takes its key under either name, as key_down and key_up do.
		{`{"action":"key","key":"Return"}`, "key Return", ""},
		{`{"action":"key","key":"ctrl+c","repeat":2}`, "key ctrl+c", ""},
		{`{"action":"key","keys":"Return","key":"Return"}`, "", `field "key": give keys (a key or chord) or key (one key), not both`},
		{`{"action":"key","key":"Return","keys":null}`, "key Return", ""},
		{`{"action":"cursor_position"}`, "cursor_position", ""},
		{`{"action":"jump"}`, "", `unknown action "jump"`},
		{`{"key":"a"}`, "", `field "action": missing`},
		{`{"action":3}`, "", `must be a string`},
		{`{"action":"click","x":1.5,"y":2}`, "", `field "x": must be an integer, got 1.5`},
		{`{"action":"click","x":"1","y":2}`, "", `field "x": must be an integer`},
		{`{"action":"click","x":1e300,"y":2}`, "", `out of range`},
		{`{"action":"click","text":"a"}`, "", `field "text": unknown field; click takes x, y, button, count, keys`},
		{`{"action":"done","success":"yes"}`, "", `must be true or false`},
		{`{"action":"drag","path":[[1,2,3]]}`, "", `point 0 must be [x, y]`},
		{`{"action":"drag","path":"a"}`, "", `list of [x, y] points`},
		{`[1,2]`, "", `not a JSON object`},
		{`{"action":"key"} {}`, "", `trailing data`},
		{`null`, "", `not a JSON object`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			a, err := Parse([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
				}
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("err does not wrap ErrInvalid")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := a.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			// Round trip: encoding and parsing again yields the same action.
			b, err := json.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			b2, err := Parse(b)
			if err != nil {
				t.Fatalf("re-parse %s: %v", b, err)
			}
			if b2.String() != a.String() {
				t.Errorf("round trip %s: %q != %q", b, b2.String(), a.String())
			}
		})
	}
}

func TestValidate(t *testing.T) {
	l := DefaultLimits(640, 480)
	tests := []struct {
		in      string
		wantErr string
	}{
		{`{"action":"key","keys":"ctrl+shift+t"}`, ""},
		{`{"action":"key","keys":"ctrl+Retrun"}`, `did you mean "Return"`},
		{`{"action":"key"}`, `field "keys": required`},
		{`{"action":"key","keys":"a","repeat":1000}`, `repeat`},
		{`{"action":"key_down","key":"RIGHT"}`, ""},
		{`{"action":"key_down","key":"Rihgt"}`, `unknown key`},
		{`{"action":"type","text":"a\u0007b"}`, `cannot be typed`},
		{`{"action":"type","text":""}`, `required`},
		{`{"action":"mouse_move","x":639,"y":479}`, ""},
		{`{"action":"mouse_move","x":640,"y":0}`, `outside the 640x480 screen`},
		{`{"action":"mouse_move","x":-1,"y":0}`, `outside`},
		{`{"action":"mouse_move","x":5}`, `field "y": required with x`},
		{`{"action":"mouse_move","x":5,"y":5,"dx":1}`, `not both`},
		{`{"action":"mouse_move"}`, `needs x and y`},
		{`{"action":"click"}`, ""},
		{`{"action":"click","button":"side"}`, `unknown button`},
		{`{"action":"click","count":4}`, `1, 2 or 3`},
		{`{"action":"click","keys":"shift"}`, ""},
		{`{"action":"click","keys":"a"}`, `not a modifier`},
		{`{"action":"drag","path":[[1,1]]}`, `at least two points`},
		{`{"action":"drag","path":[[1,1],[700,1]]}`, `path[1]`},
		{`{"action":"scroll","dy":3}`, ""},
		{`{"action":"scroll"}`, `needs dx or dy`},
		{`{"action":"scroll","dy":1000}`, `between -100 and 100`},
		{`{"action":"wait","ms":-1}`, `between 0 and`},
		{`{"action":"wait","until":"window"}`, `field "title": required`},
		{`{"action":"wait","until":"soon"}`, `unknown condition`},
		{`{"action":"wait","title":"x"}`, `need until`},
		{`{"action":"wait","until":"file"}`, `field "file": required with until: file`},
		{`{"action":"wait","until":"file","file":"~/a","stable_ms":200,"ms":60000}`, ""},
		{`{"action":"wait","until":"stable","path":"~/a"}`, `field "file": (or path) is only for until: file`},
		{`{"action":"wait","path":"~/a"}`, `is only for until: file`},
		{`{"action":"wait","until":"file","file":"~/a","title":"x"}`, `field "title": only with until: window`},
		{`{"action":"wait","until":"file","file":"~/a","stable_ms":-1}`, `field "stable_ms"`},
		{`{"action":"wait","until":"file","file":"/etc/passwd"}`, `below the home`},
		{`{"action":"wait","until":"file","file":"a.ods"}`, `below the home`},
		{`{"action":"wait","until":"file","file":"~/"}`, `want a file below the home`},
		{`{"action":"wait","until":"file","file":"~/../x"}`, `leaves the home`},
		{`{"action":"wait","until":"file","file":"~/a/../../x"}`, `leaves the home`},
		{`{"action":"wait","until":"file","file":"~/a//b"}`, `empty or . segment`},
		{`{"action":"wait","until":"file","file":"~/./a"}`, `empty or . segment`},
		{`{"action":"screenshot","region":[0,0,641,10]}`, `inside the 640x480 screen`},
		{`{"action":"screenshot","scale":2}`, `(0, 1]`},
		{`{"action":"done"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			a, err := Parse([]byte(tt.in))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			err = Validate(a, l)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
			}
			if !IsInvalid(err) {
				t.Errorf("not an ErrInvalid: %v", err)
			}
		})
	}
	long := Action{Kind: Type, Text: strings.Repeat("a", l.MaxText+1)}
	if err := Validate(long, l); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("long text: err = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"action":"key_down","key":"Right"}`,
		`{"action":"click","x":10,"y":20,"button":"right","count":2,"keys":"shift"}`,
		`{"action":"drag","path":[[1,2],[3,4]]}`,
		`{"action":"wait","until":"window","title":"/re/"}`,
		`{"action":"wait","until":"file","path":"~/Documents/a.ods"}`,
		`{"action":"type","text":"日本"}`,
		`{"action":"click","target":{"role":"push button","name":"O*","index":0,"ancestor":{"role":"dialog","name":"/^A/"}}}`,
		`{"action":"type","text":"x","target":{"id":"1.2/8"}}`,
		`{"action":"click","mark":7}`,
		`{"action":"accessibility_tree"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		_ = Validate(a, DefaultLimits(640, 480))
		_ = a.String()
		if _, err := json.Marshal(a); err != nil {
			t.Fatalf("marshal: %v", err)
		}
	})
}

// TestEveryKindHasASpec: every kind in Kinds has its row in kindSpecs (its
// fields, needs and checks), every row is a kind of Kinds, and a row's
// needs are among its fields and can be told apart from absent.
func TestEveryKindHasASpec(t *testing.T) {
	for _, k := range Kinds {
		spec, ok := kindSpecs[k]
		if !ok {
			t.Errorf("kind %s has no row in kindSpecs (action/validate.go): its fields, needs and checks", k)
			continue
		}
		if spec.fields == nil {
			t.Errorf("kind %s: its row lists no fields (want []string{} for none)", k)
		}
		for _, n := range spec.need {
			if !slices.Contains(spec.fields, n.field) {
				t.Errorf("kind %s needs %s, which is not among its fields %v", k, n.field, spec.fields)
			}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("kind %s needs %s: %v", k, n.field, r)
					}
				}()
				has(Action{Kind: k}, n.field)
			}()
		}
	}
	for k := range kindSpecs {
		if !slices.Contains(Kinds, k) {
			t.Errorf("kindSpecs has a row for %s, which is not in Kinds", k)
		}
	}
}

// TestWaitFileJSON: a wait until file is encoded with its file under
// "file" (how the host sends it to the guest and records it), which Parse
// reads back; "path" is the same field on the way in.
func TestWaitFileJSON(t *testing.T) {
	a := Action{Kind: Wait, Until: UntilFile, File: "~/Documents/a.ods", MS: 60000}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"action":"wait","ms":60000,"until":"file","file":"~/Documents/a.ods"}`; string(b) != want {
		t.Errorf("marshalled %s, want %s", b, want)
	}
	for _, in := range []string{string(b), `{"action":"wait","ms":60000,"until":"file","path":"~/Documents/a.ods"}`} {
		back, err := Parse([]byte(in))
		if err != nil || !reflect.DeepEqual(back, a) {
			t.Errorf("Parse(%s) = %+v, %v; want %+v", in, back, err, a)
		}
	}
}
