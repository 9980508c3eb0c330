package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
)

// taskApp is an app directory whose app is sh: it copies the input
// ~/docs/in.txt (named in its arguments) to ~/out/out.txt, adds a line, says "copied", then does
// what then says (sleep on, or crash). The manifest names the input and
// what to collect.
func taskApp(t *testing.T, then string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte("hello from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The input comes in as an argument: "~/docs/in.txt" (args' ~/ is the
	// home; the shell would not expand it inside "$1").
	shell := "mkdir -p ~/out && cp \"$1\" ~/out/out.txt && echo more >> ~/out/out.txt && ln -s /etc/passwd ~/out/link.txt && echo copied && " + then
	m := map[string]any{
		"command":         "sh",
		"args":            []string{"-c", shell, "sh", "~/docs/in.txt"},
		"wait_for_window": false,
		"ready_output":    "copied",
		"inputs":          []map[string]string{{"from": "in.txt", "to": "~/docs/in.txt"}},
		"collect":         []string{"~/out/*.txt", "~/docs/**"},
		"before_collect":  []map[string]any{{"action": "wait", "ms": 50}},
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agentbox.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestTaskFiles: an input is staged into the home before the app starts,
// the app changes it, and what collect names is copied into the trace's
// files/ when the episode ends — after a success, a timeout and an app
// that crashed — with run.json's inputs, files and files_refused, and the
// before_collect step recorded as the actor collect's. Both backends.
func TestTaskFiles(t *testing.T) {
	backends := map[string]func(t *testing.T) []string{
		"docker": func(t *testing.T) []string {
			testenv.Require(t, testenv.Image(testenv.TestImage))
			return []string{"--backend", "docker", "--image", testenv.TestImage}
		},
		"local": func(t *testing.T) []string {
			requireLocal(t)
			return []string{"--backend", "local"}
		},
	}
	cases := []struct {
		name, then, steps string
		args              []string
		outcome, reason   string
	}{
		{"success", "sleep 60", "  - {action: wait, ms: 300}\n", nil, "success", ""},
		{"timeout", "sleep 60", "  - {action: wait, ms: 60000}\n", []string{"--timeout", "3s"}, "failure", trace.ReasonTimeout},
		{"crash", "sleep 1; kill -SEGV $$", "  - {wait_for: exited, timeout_ms: 30000}\n", nil, "", ""},
	}
	for name, flags := range backends {
		t.Run(name, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					bf := flags(t)
					play := filepath.Join(t.TempDir(), "play.yaml")
					if err := os.WriteFile(play, []byte("task: copy the file\nsteps:\n"+tc.steps), 0o644); err != nil {
						t.Fatal(err)
					}
					args := append([]string{"run", taskApp(t, tc.then), "--script", play}, bf...)
					r := agentbox(t, append(args, tc.args...)...)
					tr := openTrace(t, r.dir)
					if tc.outcome != "" && string(tr.Run.Outcome) != tc.outcome || tc.reason != "" && tr.Run.Reason != tc.reason {
						t.Errorf("outcome %s (%s), want %s (%s):\n%s", tr.Run.Outcome, tr.Run.Reason, tc.outcome, tc.reason, r)
					}
					if tc.name == "crash" && (tr.Run.AppExit == nil || tr.Run.AppExit.Signal != "SIGSEGV") {
						t.Errorf("app exit %v, want SIGSEGV:\n%s", tr.Run.AppExit, r)
					}
					checkTaskFiles(t, r, tr)
				})
			}
		})
	}
}

func checkTaskFiles(t *testing.T, r result, tr *trace.Trace) {
	t.Helper()
	in := "hello from the host\n"
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	if got := tr.Run.Inputs; len(got) != 1 || got[0].Path != "docs/in.txt" || got[0].Size != int64(len(in)) || got[0].SHA256 != sum(in) {
		t.Errorf("run.json inputs = %+v, want docs/in.txt (%d bytes, %s)", got, len(in), sum(in))
	}
	want := map[string]string{"docs/in.txt": in, "out/out.txt": in + "more\n"}
	got := map[string]trace.FileInfo{}
	for _, f := range tr.Run.Files {
		got[f.Path] = f
	}
	if len(got) != len(want) {
		t.Errorf("run.json files = %+v, want %v\n%s", tr.Run.Files, want, r)
	}
	for p, text := range want {
		f, ok := got[p]
		if !ok {
			continue
		}
		data, err := os.ReadFile(filepath.Join(r.dir, trace.FilesDir, filepath.FromSlash(p)))
		if err != nil {
			t.Errorf("files/%s: %v", p, err)
			continue
		}
		if string(data) != text || f.Size != int64(len(text)) || f.SHA256 != sum(text) {
			t.Errorf("files/%s = %q (run.json %+v), want %q", p, data, f, text)
		}
	}
	refused := false
	for _, f := range tr.Run.FilesRefused {
		if f.Path == "out/link.txt" && strings.Contains(f.Reason, "symbolic link") {
			refused = true
		}
	}
	if !refused {
		t.Errorf("run.json files_refused = %+v, want out/link.txt refused as a link", tr.Run.FilesRefused)
	}
	if _, err := os.Lstat(filepath.Join(r.dir, trace.FilesDir, "out", "link.txt")); err == nil {
		t.Error("the link was copied out")
	}
	// The before_collect step, recorded as the actor collect's.
	f, err := os.Open(filepath.Join(r.dir, "steps.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	collectSteps := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var rec trace.Record
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Type == trace.TypeStep && rec.Actor == trace.ActorCollect {
			collectSteps++
		}
	}
	if collectSteps != 1 {
		t.Errorf("%d steps of the actor collect, want 1", collectSteps)
	}
	if _, ok := tr.Run.Timings["collect"]; !ok {
		t.Errorf("no collect timing: %v", tr.Run.Timings)
	}
}

// TestTaskFilesRefusedUpfront: a bad input or collect pattern, in a
// manifest or a script's header, is a usage error (exit 2) naming the file
// and the field, before a trace or a sandbox exists.
func TestTaskFilesRefusedUpfront(t *testing.T) {
	testenv.Require(t, testenv.Docker())
	outside := t.TempDir()
	linked := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(linked, "escape")); err != nil {
		t.Fatal(err)
	}
	withInputs := func(inputs string) string {
		return stubApp(t, `{"command": "mover", "window_title": "mover", "inputs": `+inputs+`}`)
	}
	script := func(header string) string {
		p := filepath.Join(t.TempDir(), "play.yaml")
		if err := os.WriteFile(p, []byte(header+"steps:\n  - {expect: running}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"to leaves the home", []string{"run", withInputs(`[{"from": "mover", "to": "~/../../etc/x"}]`), "--agent", "idle"}, `agentbox.json: field "inputs"[0].to: "~/../../etc/x" leaves the home (..)`},
		{"missing input", []string{"run", withInputs(`[{"from": "nope.txt", "to": "~/x"}]`), "--agent", "idle"}, "inputs[0].from: lstat "},
		{"input with a link out", []string{"run", withInputs(`[{"from": "` + linked + `", "to": "~/x"}]`), "--agent", "idle"}, "symbolic link to " + outside + " leaves the input's directory"},
		{"collect outside the home", []string{"run", stubApp(t, ""), "--script", script("collect: [/etc/shadow]\n")}, `play.yaml:1: field "collect"[0]: "/etc/shadow" is not below the home`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := cliMain(t, c.args...)
			if r.code != 2 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("want exit 2 and %q:\n%s", c.want, r)
			}
			if _, err := os.Stat(r.dir); err == nil {
				t.Error("a trace was started")
			}
		})
	}
}
