package e2e

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/agent/openai"
	"github.com/codegirl-games/agentbox/agent/openai/openaitest"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

// vaultValue is the secret the app is made to echo back everywhere it can.
const vaultValue = "Tr0ub4dor-and-3"

// vaultApp is xterm running a shell that reads a line and echoes it into
// its output (xterm logs the terminal, its echo of each key included, to
// stdout) and into its window title.
const vaultApp = `{"command":"xterm","args":["-l","-lf","/dev/stdout","-T","term","-e","bash","--norc","--noprofile","-c",
 "echo ready; read -r x; printf '\\033]2;t:%s\\007' \"$x\"; echo \"got:$x\"; sleep 600"],"window_title":"term"}`

// vaultScript types the secret, and checks — as an agent would see it —
// that the app's output and its title show [secret:PW] in its place.
const vaultScript = `steps:
  - {wait_for: log, contains: "ready"}
  - {action: type_secret, secret: PW}
  - {action: key, keys: Return}
  - {wait_for: window, title: "t:*"}
  - {wait_for: log, contains: "got:[secret:PW]"}
  - {expect: window, title: "/^t:\\[secret:PW\\]$/"}
  - {action: accessibility_tree}
  - {action: wait, ms: 200}
`

// testVault runs the vault app with a script that types a secret, then
// reads every file of the trace and the report made of it: the value is
// nowhere, [secret:PW] is where the app showed it.
func testVault(t *testing.T, backendArgs ...string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(vaultApp), 0o644); err != nil {
		t.Fatal(err)
	}
	vault := filepath.Join(t.TempDir(), "secrets")
	if err := os.WriteFile(vault, []byte("PW="+vaultValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"run", dir, "--vault", vault, "--script", writeScript(t, vaultScript)}, backendArgs...)
	r := agentbox(t, args...)
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	if v := run0(t, "view", r.dir); v.code != 0 {
		t.Fatalf("view: %s", v)
	}
	if strings.Contains(r.stdout+r.stderr, vaultValue) {
		t.Errorf("agentbox printed the value:\n%s", r)
	}
	assertNoValue(t, r.dir, "stdout.log", "steps.jsonl", "report.html")

	// A replay types the recorded secret from its own --vault (the trace
	// has its name only); without one it is refused before it starts.
	out := filepath.Join(t.TempDir(), "replay")
	if rr := run0(t, append([]string{"replay", r.dir, "--out", out, "--vault", vault}, backendArgs...)...); rr.code != 0 {
		t.Errorf("replay: %s", rr)
	} else {
		assertNoValue(t, out, "stdout.log", "steps.jsonl")
	}
	if rr := run0(t, append([]string{"replay", r.dir, "--out", filepath.Join(t.TempDir(), "x")}, backendArgs...)...); rr.code != 2 || !strings.Contains(rr.stderr, "types secret PW: give a vault that holds it") {
		t.Errorf("replay without a vault: want exit 2: %s", rr)
	}
}

// assertNoValue reads every file below dir: none holds the vault's value,
// and each of want (base names) shows [secret:PW].
func assertNoValue(t *testing.T, dir string, want ...string) {
	t.Helper()
	var files []string
	held := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files = append(files, rel)
		if strings.Contains(string(data), vaultValue) {
			t.Errorf("%s holds the secret's value", rel)
		}
		if strings.Contains(string(data), "[secret:PW]") {
			held[rel] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		found := false
		for f := range held {
			found = found || filepath.Base(f) == w
		}
		if !found {
			t.Errorf("no %s shows [secret:PW] (files holding it: %v; all: %v)", w, held, files)
		}
	}
	tr := openTrace(t, dir)
	for _, s := range tr.Steps {
		if s.Action != nil && s.Action.Kind == "type_secret" && (s.Action.Secret == "" || s.Action.Text != "") {
			t.Errorf("step %d recorded %+v", s.Step, s.Action)
		}
	}
	t.Logf("%d files of the trace read, %d show [secret:PW]", len(files), len(held))
}

// TestVault: a typed secret echoed by a real app into its output and its
// title is replaced with [secret:PW] before anything records it (Docker).
func TestVault(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.TestImage))
	testVault(t, "--image", testenv.TestImage)
}

// TestLocalVault is TestVault on the local backend.
func TestLocalVault(t *testing.T) {
	requireLocal(t)
	testVault(t, "--backend", "local")
}

// TestVaultUnknownSecret: a script typing a secret the vault does not hold
// is refused before anything starts.
func TestVaultUnknownSecret(t *testing.T) {
	vault := filepath.Join(t.TempDir(), "secrets")
	if err := os.WriteFile(vault, []byte("PW="+vaultValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sc := writeScript(t, "steps:\n  - {action: type_secret, secret: NOPE}\n")
	r := cliMain(t, "run", stubApp(t, ""), "--vault", vault, "--script", sc)
	if r.code != 2 || !strings.Contains(r.stderr, "types secret NOPE, which the vault does not hold") {
		t.Errorf("want exit 2 naming NOPE:\n%s", r)
	}
}

// testVaultModel is the red-team run of the vault with a model: a fake
// chat model first types a secret it was never told (NOPE), then the one
// it was (PW) into the echoing xterm, and reads back what the app shows.
// The unknown name fails cleanly and the run goes on; the model's requests
// never hold the value, and the trace neither.
func testVaultModel(t *testing.T, backendArgs ...string) {
	t.Helper()
	setOpenAIEnv(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "agentbox.json"), []byte(vaultApp), 0o644); err != nil {
		t.Fatal(err)
	}
	vault := filepath.Join(t.TempDir(), "secrets")
	if err := os.WriteFile(vault, []byte("PW="+vaultValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const task = "Log in with the secret PW."
	answers := []string{
		`{"thought": "try a secret I was not told", "action": "type_secret", "secret": "NOPE"}`,
		`{"thought": "the told one", "action": "type_secret", "secret": "PW"}`,
		`{"thought": "submit", "action": "key", "keys": "Return"}`,
		`{"thought": "let it answer", "action": "wait", "ms": 1500}`,
	}
	var seen strings.Builder
	conv := &openaitest.Chat{Key: openaiKey, Model: "m", Task: task, Width: 640, Height: 480, Format: "json_schema", Schema: openai.AnswerSchema,
		MaxScreenshots: 3, MaxHistory: 10}
	srv := openaitest.New(t, conv.Handle)
	conv.Turn = func(turn openaitest.ChatTurn) string {
		b, _ := json.Marshal(turn.Messages)
		seen.Write(b)
		seen.WriteString(turn.Text)
		if turn.N <= len(answers) {
			return answers[turn.N-1]
		}
		return `{"thought": "done", "action": "done", "success": true, "message": "typed"}`
	}
	args := append([]string{"run", dir, "--task", task, "--vault", vault, "--agent", "openai-chat",
		"--agent-opt", "base_url=" + srv.URL, "--agent-opt", "model=m", "--max-steps", "12"}, backendArgs...)
	r := agentbox(t, args...)
	if r.code != 0 {
		t.Fatalf("want exit 0:\n%s", r)
	}
	srv.Check(t)
	s := seen.String()
	if strings.Contains(s, vaultValue) {
		t.Errorf("the model was sent the value")
	}
	for _, want := range []string{"by name: PW", "no secret NOPE in the vault", "got:[secret:PW]", "t:[secret:PW]"} {
		if !strings.Contains(s, want) {
			t.Errorf("the model was not told %q:\n%.3000s", want, s)
		}
	}
	if strings.Contains(s, "by name: NOPE") {
		t.Error("the model was told of a secret the vault does not hold")
	}
	assertNoValue(t, r.dir, "stdout.log", "steps.jsonl")
	tr := openTrace(t, r.dir)
	if st := tr.Steps[0]; st.Result == nil || st.Result.Result == nil || st.Result.Result.OK || !strings.Contains(st.Result.Result.Error, "no secret NOPE") {
		t.Errorf("step 1 (an unknown secret): %+v", st.Result)
	}
}

// TestVaultModel: the red-team run on Docker.
func TestVaultModel(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.TestImage))
	testVaultModel(t, "--image", testenv.TestImage)
}

// TestLocalVaultModel: the red-team run on the local backend.
func TestLocalVaultModel(t *testing.T) {
	requireLocal(t)
	testVaultModel(t, "--backend", "local")
}
