package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyUsage: a policy that does not parse, an unknown role or kind,
// a bad regex, an unknown --approve are usage errors (exit 2) naming the
// file and line before anything starts, for run and eval alike.
func TestPolicyUsage(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	role := write("role.yaml", "rules:\n  - decision: ask\n    target: {role: buton, name: Delete}\n")
	kind := write("kind.yaml", "rules:\n  - {kind: clik, decision: deny}\n")
	re := write("re.yaml", "rules:\n  - decision: deny\n    target: {name: \"/(/\"}\n")
	syntax := write("syntax.yaml", "rules: [\n")
	good := write("good.yaml", "rules:\n  - {kind: key, decision: deny}\n")
	for _, d := range []string{"app", "gated", "gated-ok"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	appDir := filepath.Join(dir, "app")
	write("app/agentbox.json", `{"command": "xterm"}`)
	gated := filepath.Join(dir, "gated")
	write("gated/agentbox.json", `{"command": "xterm", "policy": "../kind.yaml"}`)
	gatedOK := filepath.Join(dir, "gated-ok")
	write("gated-ok/agentbox.json", `{"command": "xterm", "policy": "../good.yaml"}`)
	suite := write("suite.yaml", "name: s\ntasks:\n  - {id: a, app: xterm, agent: idle}\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "/nonexistent", "--agent", "idle", "--policy", role}, `--policy: invalid policy: ` + role + `:3: rule 1: field "role": unknown role "buton" (did you mean push button, radio button`},
		{[]string{"run", "/nonexistent", "--agent", "idle", "--policy", kind}, `--policy: invalid policy: ` + kind + `:2: rule 1: field "kind": unknown action kind "clik" (did you mean click?)`},
		{[]string{"run", "/nonexistent", "--agent", "idle", "--policy", re}, `--policy: invalid policy: ` + re + `:3: rule 1: field "target": name: bad regular expression /(/`},
		{[]string{"run", "/nonexistent", "--agent", "idle", "--policy", syntax}, `--policy: invalid policy: ` + syntax + `: yaml: line`},
		{[]string{"run", "/nonexistent", "--agent", "idle", "--policy", filepath.Join(dir, "none.yaml")}, `--policy: invalid policy: open`},
		{[]string{"run", "/nonexistent", "--agent", "idle", "--policy", good, "--approve", "ttty"}, `--approve "ttty": not a way of answering (did you mean tty?)`},
		{[]string{"run", "/nonexistent", "--agent", "idle", "--policy", good, "--approve", "live"}, `--approve live needs --live: the asks are answered on the live page`},
		{[]string{"eval", suite, "--approve", "live"}, `--approve live needs --live`},
		{[]string{"run", appDir, "--agent", "idle", "--approve", "deny"}, `--approve deny without a policy (--policy, or a manifest's policy): there is nothing to ask`},
		// The manifest's policy is the policy --approve answers: the run
		// gets as far as the backend.
		{[]string{"run", gatedOK, "--agent", "idle", "--approve", "deny"}, `none-such`},
		{[]string{"run", gated, "--agent", "idle"}, `the manifest's policy: invalid policy: ` + kind + `:2: rule 1: field "kind": unknown action kind "clik"`},
		{[]string{"eval", suite, "--policy", kind}, `--policy: invalid policy: ` + kind + `:2:`},
	} {
		args := append(c.args, "--backend", "none-such")
		var so, se bytes.Buffer
		code := Main(args, &so, &se)
		if code != ExitUsage || !strings.Contains(se.String(), c.want) {
			t.Errorf("%q: exit %d, %q; want exit 2 and %q", args, code, se.String(), c.want)
		}
	}
}

// TestServeAppPolicy: serve reads each registered app's manifest policy
// before it listens: one that does not parse is exit 2 naming the app,
// the file and the line.
func TestServeAppPolicy(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(`{"command": "xterm", "policy": "p.yaml"}`), 0o644)
	os.WriteFile(filepath.Join(dir, "p.yaml"), []byte("rules:\n  - name: x\n    kind: clik\n    decision: ask\n"), 0o644)
	var se bytes.Buffer
	code := Main([]string{"serve", "--listen", "127.0.0.1:0", "--app", "x=" + dir, "--write-token", filepath.Join(t.TempDir(), "token")}, io.Discard, &se)
	if want := "--app x: the manifest's policy: invalid policy: " + filepath.Join(dir, "p.yaml") + `:3: rule 1: field "kind": unknown action kind "clik"`; code != ExitUsage || !strings.Contains(se.String(), want) {
		t.Errorf("exit %d, %q; want exit %d saying %q", code, se.String(), ExitUsage, want)
	}
}
