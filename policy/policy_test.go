package policy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
)

const example = `# a dialog's Delete is asked every time; passwords are never typed
default: allow
max_asks: 5
rules:
  - name: deleting asks
    kind: [click, press]
    target: {role: push button, name: "/^Delete/"}
    sensitive: true
  - name: no secrets typed
    kind: type
    text: "/hunter2/"
    decision: deny
  - name: the corner is off limits
    region: [0, 0, 10, 10]
    decision: deny
  - name: cancel is fine
    target: {role: push_button, name: Cancel, ancestor: {role: dialog}}
    decision: allow
`

func TestParse(t *testing.T) {
	p, err := Parse("p.yaml", []byte(example))
	if err != nil {
		t.Fatal(err)
	}
	if p.Default != Allow || p.MaxAsks != 5 || len(p.Rules) != 4 {
		t.Fatalf("parsed %+v", p)
	}
	r := p.Rules[0]
	if r.Name != "deleting asks" || r.Decision != Ask || !r.Sensitive || r.Line != 5 || r.Target.Role != "push button" {
		t.Errorf("rule 1 = %+v", r)
	}
	if !p.NeedsTree() {
		t.Error("NeedsTree = false with target rules")
	}
	// JSON is read too; names default to "rule N".
	p, err = Parse("p.json", []byte(`{"default": "deny", "rules": [{"kind": "key", "decision": "allow"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Default != Deny || p.Rules[0].Name != "rule 1" || p.NeedsTree() || p.MaxAsks != DefaultMaxAsks {
		t.Errorf("json policy = %+v", p)
	}
}

// TestParseErrors are golden: each names the file and line.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"empty", ``, `invalid policy: p.yaml:1: the file is empty (a policy is a mapping with default and rules)`},
		{"not yaml", "rules: [", `invalid policy: p.yaml: yaml: line 1: did not find expected node content`},
		{"unknown top", "defualt: deny\n", `invalid policy: p.yaml:1: unknown field "defualt" (did you mean default?) (a policy has default, rules, max_asks, mask)`},
		{"bad default", "default: maybe\n", `invalid policy: p.yaml:1: field "default": "maybe" is not a decision (allow, ask or deny)`},
		{"rules not list", "rules: {}\n", `invalid policy: p.yaml:1: field "rules": must be a list of rules`},
		{"unknown rule field", "rules:\n  - decision: deny\n    kinds: click\n", `invalid policy: p.yaml:3: rule 1: unknown field "kinds" (did you mean kind?) (a rule has name, kind, target, region, text, decision, sensitive)`},
		{"unknown kind", "rules:\n  - decision: deny\n    kind: [key, clik]\n", `invalid policy: p.yaml:3: rule 1: field "kind": unknown action kind "clik" (did you mean click?) (kinds: press, screenshot, key, key_down, key_up, type, mouse_move, click, mouse_down, mouse_up, drag, scroll, wait, cursor_position, done, accessibility_tree, type_secret)`},
		{"unknown role", "rules:\n  - decision: deny\n    target:\n      role: push buton\n", `invalid policy: p.yaml:4: rule 1: field "role": unknown role "push buton" (did you mean push button?) (AT-SPI's roles, such as push button, text, check box, menu item)`},
		{"bad regex", "rules:\n  - decision: deny\n    target: {name: \"/[a/\"}\n", `invalid policy: p.yaml:3: rule 1: field "target": name: bad regular expression /[a/: error parsing regexp: missing closing ]: ` + "`[a`"},
		{"bad text regex", "rules:\n  - decision: deny\n    text: \"/(/\"\n", `invalid policy: p.yaml:3: rule 1: field "text": bad regular expression /(/: error parsing regexp: missing closing ): ` + "`(`"},
		{"unknown selector field", "rules:\n  - decision: deny\n    target: {rol: text}\n", `invalid policy: p.yaml:3: rule 1: unknown field "rol" (did you mean role?) (a selector has id, role, name, index, ancestor)`},
		{"index", "rules:\n  - decision: deny\n    target: {name: x, index: 0}\n", `invalid policy: p.yaml:3: rule 1: field "target": index has no meaning in a policy: a rule matches every element its selector matches`},
		{"no decision", "rules:\n  - kind: click\n", `invalid policy: p.yaml:2: rule 1: a rule needs a decision (allow, ask or deny)`},
		{"sensitive allow", "rules:\n  - decision: allow\n    sensitive: true\n", `invalid policy: p.yaml:2: rule 1: sensitive: true means asked every time; its decision must be ask, not allow`},
		{"bad region", "rules:\n  - decision: deny\n    region: [5, 5, 1, 1]\n", `invalid policy: p.yaml:3: rule 1: field "region": [5 5 1 1] is empty or negative: [x0, y0, x1, y1] with x1 > x0 ≥ 0 and y1 > y0 ≥ 0`},
		{"text without type", "rules:\n  - decision: deny\n    kind: click\n    text: x\n", `invalid policy: p.yaml:2: rule 1: text matches what a type action types, but kind [click] has no type`},
		{"twice", "rules:\n  - decision: deny\n    decision: allow\n", `invalid policy: p.yaml:3: rule 1: field "decision" appears twice`},
		{"same name", "rules:\n  - {name: a, decision: deny}\n  - {name: a, decision: allow}\n", `invalid policy: p.yaml:3: rule name "a" is used twice (first at line 2): results name rules, so names must differ`},
		{"max asks", "max_asks: -1\n", `invalid policy: p.yaml:1: field "max_asks": must be a whole number from 0 to 10000`},
		{"mask not list", "mask: {}\n", `invalid policy: p.yaml:1: field "mask": must be a list of mask rules (each a target or a region)`},
		{"mask neither", "mask:\n  - name: x\n", `invalid policy: p.yaml:2: mask rule 1: a mask rule names a target or a region (one of the two)`},
		{"mask both", "mask:\n  - {target: {role: label}, region: [0, 0, 1, 1]}\n", `invalid policy: p.yaml:2: mask rule 1: a mask rule names a target or a region (one of the two)`},
		{"mask decision", "mask:\n  - {region: [0, 0, 1, 1], decision: deny}\n", `invalid policy: p.yaml:2: mask rule 1: unknown field "decision" (a mask rule has name, target, region)`},
		{"mask bad region", "mask:\n  - region: [0, 0, 0, 1]\n", `invalid policy: p.yaml:2: mask rule 1: field "region": [0 0 0 1] is empty or negative: [x0, y0, x1, y1] with x1 > x0 ≥ 0 and y1 > y0 ≥ 0`},
		{"mask unknown role", "mask:\n  - target: {role: pasword text}\n", `invalid policy: p.yaml:2: mask rule 1: field "role": unknown role "pasword text" (did you mean password text?) (AT-SPI's roles, such as push button, text, check box, menu item)`},
		{"mask same name", "mask:\n  - {name: a, region: [0, 0, 1, 1]}\n  - {name: a, region: [0, 0, 2, 2]}\n", `invalid policy: p.yaml:3: mask rule name "a" is used twice (first at line 2)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(tc.in))
			if err == nil {
				t.Fatalf("no error, want %s", tc.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error is not ErrInvalid: %v", err)
			}
			if err.Error() != tc.want {
				t.Errorf("error\n got %s\nwant %s", err, tc.want)
			}
		})
	}
}

func TestLoadMissing(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "none.yaml"))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "none.yaml") {
		t.Fatalf("Load of a missing file: %v", err)
	}
	f := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(f, []byte(example), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(f); err != nil {
		t.Fatal(err)
	}
}

// dialog is a tree: an app, its dialog, a Delete button (with a label
// inside), a Cancel button, a text field.
func dialog(focus int) *observe.Tree {
	r := func(x0, y0, x1, y1 int) *action.Rect { return &action.Rect{x0, y0, x1, y1} }
	t := &observe.Tree{Apps: 1, Elements: []observe.Element{
		{ID: "1.1/0", Parent: -1, Depth: 0, Role: "application", Name: "app"},
		{ID: "1.1/1", Parent: 0, Depth: 1, Role: "dialog", Name: "Confirm", Bounds: r(0, 0, 400, 300)},
		{ID: "1.1/2", Parent: 1, Depth: 2, Role: "push button", Name: "Delete all", Bounds: r(100, 200, 180, 240), States: []string{"focusable"}},
		{ID: "1.1/3", Parent: 2, Depth: 3, Role: "label", Name: "Delete all", Bounds: r(110, 210, 170, 230)},
		{ID: "1.1/4", Parent: 1, Depth: 2, Role: "push button", Name: "Cancel", Bounds: r(200, 200, 280, 240), States: []string{"focusable"}},
		{ID: "1.1/5", Parent: 1, Depth: 2, Role: "text", Name: "", Bounds: r(20, 20, 380, 50), States: []string{"focusable", "editable"}},
	}}
	if focus > 0 {
		t.Elements[focus].States = append(t.Elements[focus].States, "focused")
	}
	return t
}

func TestDecide(t *testing.T) {
	p, err := Parse("p.yaml", []byte(example))
	if err != nil {
		t.Fatal(err)
	}
	click := func(x, y int) action.Action {
		return action.Action{Kind: action.Click, X: action.Int(x), Y: action.Int(y)}
	}
	key := func(k string) action.Action { return action.Action{Kind: action.Key, Keys: k} }
	typ := func(s string) action.Action { return action.Action{Kind: action.Type, Text: s} }
	sel := &action.Selector{Role: "push button", Name: "Delete all"}
	for _, tc := range []struct {
		name   string
		a      action.Action
		cursor action.Point
		tree   *observe.Tree
		failed bool
		rule   string
		want   Decision
	}{
		{"click on the button", click(120, 205), action.Point{}, dialog(0), false, "deleting asks", Ask},
		{"click on its label", click(140, 220), action.Point{}, dialog(0), false, "deleting asks", Ask},
		{"click by selector", action.Action{Kind: action.Click, Target: sel}, action.Point{}, dialog(0), false, "deleting asks", Ask},
		{"mouse_down at the cursor", action.Action{Kind: action.MouseDown}, action.Point{X: 150, Y: 215}, dialog(0), false, "deleting asks", Ask},
		{"mouse_up at the cursor", action.Action{Kind: action.MouseUp}, action.Point{X: 150, Y: 215}, dialog(0), false, "deleting asks", Ask},
		{"drag onto it", action.Action{Kind: action.Drag, Path: action.Path{{X: 300, Y: 100}, {X: 150, Y: 215}}}, action.Point{}, dialog(0), false, "deleting asks", Ask},
		{"Return on the focused button", key("Return"), action.Point{}, dialog(2), false, "deleting asks", Ask},
		{"space on the focused button", key("space"), action.Point{}, dialog(2), false, "deleting asks", Ask},
		{"KP_Enter down", action.Action{Kind: action.KeyDown, Key: "KP_Enter"}, action.Point{}, dialog(2), false, "deleting asks", Ask},
		{"shift+Return", key("shift+Return"), action.Point{}, dialog(2), false, "deleting asks", Ask},
		{"a newline typed on it", typ("\n"), action.Point{}, dialog(2), false, "deleting asks", Ask},
		{"Tab on it is no press", key("Tab"), action.Point{}, dialog(2), false, "default", Allow},
		{"Return elsewhere", key("Return"), action.Point{}, dialog(4), false, "cancel is fine", Allow},
		{"hover is no press", action.Action{Kind: action.MouseMove, X: action.Int(120), Y: action.Int(205)}, action.Point{}, dialog(0), false, "default", Allow},
		{"click on Cancel", click(210, 210), action.Point{}, dialog(0), false, "cancel is fine", Allow},
		{"a secret typed", typ("pw: hunter2"), action.Point{}, dialog(5), false, "no secrets typed", Deny},
		{"other text typed", typ("hello"), action.Point{}, dialog(5), false, "default", Allow},
		{"the corner", click(3, 3), action.Point{}, nil, false, "the corner is off limits", Deny},
		{"no tree: targets match nothing", click(120, 205), action.Point{}, nil, false, "default", Allow},
		{"tree failed: ask/deny targets hold", click(120, 205), action.Point{}, nil, true, "deleting asks", Ask},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := SubjectOf(tc.a, tc.cursor, tc.tree)
			s.TreeFailed = tc.failed
			v := p.Decide(s)
			if v.RuleName() != tc.rule || v.Decision != tc.want {
				t.Errorf("Decide = %s by %q, want %s by %q", v.Decision, v.RuleName(), tc.want, tc.rule)
			}
		})
	}
}

func TestTTY(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        string
		sensitive bool
		allow     bool
		always    bool
		note      string
	}{
		{"yes", "y\n", false, true, false, ""},
		{"no", "no\n", false, false, false, ""},
		{"always", "a\n", false, true, true, ""},
		{"always is no answer to a sensitive ask", "a\nn\n", true, false, false, ""},
		{"junk then yes", "what\nyes\n", false, true, false, ""},
		{"closed", "", false, false, false, "the terminal closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			tty := NewTTY(strings.NewReader(tc.in), &out)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ans, err := tty.Approve(ctx, Request{Rule: "r", Sensitive: tc.sensitive, Action: action.Action{Kind: action.Key, Keys: "Return"}, Element: `push button "Delete"`, Screenshot: "/tmp/x.png"})
			if err != nil {
				t.Fatal(err)
			}
			if ans.Allow != tc.allow || ans.Always != tc.always || ans.Note != tc.note || ans.By != ApproveTTY {
				t.Errorf("answer %+v", ans)
			}
			for _, want := range []string{`rule "r" asks`, "key Return", `push button "Delete"`, "/tmp/x.png"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("prompt lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

func TestTTYTimeout(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	ans, err := NewTTY(r, &strings.Builder{}).Approve(ctx, Request{Rule: "r"})
	if err != nil || ans.Allow || ans.Note != "timed out" {
		t.Fatalf("answer %+v, %v", ans, err)
	}
}

func TestParseMask(t *testing.T) {
	p, err := Parse("p.yaml", []byte("mask:\n  - name: balance\n    target: {role: label, name: \"/^Balance/\"}\n  - region: [0, 440, 640, 480]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Mask) != 2 || p.Mask[0].Name != "balance" || p.Mask[0].Line != 2 || p.Mask[1].Name != "mask 2" || p.Mask[1].Region == nil {
		t.Fatalf("mask rules %+v", p.Mask)
	}
	if !strings.Contains(p.Describe(), "2 mask rules") {
		t.Errorf("Describe: %s", p.Describe())
	}
}
