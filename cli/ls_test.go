package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/eval"
	"github.com/codegirl-games/agentbox/trace"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// lsFixture lays out runs as agentbox run and eval leave them, plus things
// ls must skip or warn about.
func lsFixture(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	base := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	put := func(rel string, r trace.Run) {
		dir := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Join(dir, trace.ScreenshotsDir), 0o755); err != nil {
			t.Fatal(err)
		}
		r.Format, r.Version = trace.Format, trace.Version
		data, _ := json.Marshal(r)
		if err := os.WriteFile(filepath.Join(dir, trace.RunFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("20261129-200000-mover-aaaaaa", trace.Run{ID: "a", Status: trace.StatusComplete, Outcome: trace.Success, Reason: trace.ReasonDone,
		Steps: 4, DurationMS: 2384.35, App: trace.AppInfo{Target: "examples/mover"}, Agent: trace.AgentInfo{Name: "demo"}, Started: base,
		Env: trace.EnvInfo{Backend: "docker", Sandbox: "notes"}})
	put("20261129-200500-mover-bbbbbb", trace.Run{ID: "b", Status: trace.StatusComplete, Outcome: trace.Failure, Reason: trace.ReasonDiverged,
		Steps: 4, DurationMS: 3120, App: trace.AppInfo{Target: "/tmp/mover-half"},
		Agent: trace.AgentInfo{Name: "replay", Options: map[string]string{"source": "a"}}, Started: base.Add(5 * time.Minute)})
	put("20261129-201000-mover-cccccc", trace.Run{ID: "c", Status: trace.StatusRunning, Steps: 17,
		App: trace.AppInfo{Target: "examples/mover"}, Agent: trace.AgentInfo{Name: "idle"}, Started: base.Add(10 * time.Minute)})
	put("suite/mover-script/001", trace.Run{ID: "d", Status: trace.StatusComplete, Outcome: trace.Failure, Reason: trace.ReasonCheckFailed,
		Steps: 9, DurationMS: 3650, App: trace.AppInfo{Target: "mover"},
		Agent: trace.AgentInfo{Name: "script", Options: map[string]string{"file": "examples/mover/play.yaml"}}, Started: base.Add(2 * time.Minute)})
	put("20261129-195500-xterm-dddddd", trace.Run{ID: "e", Status: trace.StatusComplete, Outcome: trace.Error, Reason: trace.ReasonAppStart,
		App: trace.AppInfo{Command: "xterm", InImage: true}, Agent: trace.AgentInfo{Name: "demo"}, Started: base.Add(-5 * time.Minute), DurationMS: 1210})
	// An eval: one line; its episodes are not listed (agentbox ls EVALDIR).
	putEval(t, filepath.Join(root, "20261129-203000-nightly-abcdef"), base.Add(30*time.Minute))
	// Not traces: a stray folder and file, and a trace of a newer format.
	os.MkdirAll(filepath.Join(root, "notes"), 0o755)
	os.WriteFile(filepath.Join(root, "README.txt"), []byte("hi"), 0o644)
	os.MkdirAll(filepath.Join(root, "future"), 0o755)
	os.WriteFile(filepath.Join(root, "future", trace.RunFile), []byte(`{"format":"agentbox-trace","version":9}`), 0o644)
	return root
}

// putEval lays out an eval as agentbox eval leaves it: summary.json and
// a trace per episode.
func putEval(t *testing.T, dir string, started time.Time) {
	t.Helper()
	sum := eval.Summary{Format: eval.SummaryFormat, Version: eval.SummaryVersion, Suite: "nightly", RunID: filepath.Base(dir),
		Parallel: 2, Started: started, Ended: started.Add(5800 * time.Millisecond), DurationMS: 5800,
		Totals: eval.TaskSummary{Name: "total", Episodes: 2, Passed: 1, Failed: 1},
		Tasks:  []eval.TaskSummary{{Name: "mover-script", Episodes: 2, Passed: 1, Failed: 1}},
		Episodes: []eval.Episode{
			{Task: "mover-script", N: 1, Category: eval.Passed, Outcome: trace.Success, Steps: 9, DurationMS: 3650, Trace: "mover-script/001"},
			{Task: "mover-script", N: 2, Category: eval.Failed, Outcome: trace.Failure, Reason: trace.ReasonCheckFailed, Steps: 5, DurationMS: 2100, Trace: "mover-script/002"},
		}}
	for i, ep := range sum.Episodes {
		d := filepath.Join(dir, filepath.FromSlash(ep.Trace))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		r := trace.Run{Format: trace.Format, Version: trace.Version, ID: fmt.Sprintf("ep%d", i+1), Status: trace.StatusComplete,
			Outcome: ep.Outcome, Reason: ep.Reason, Steps: ep.Steps, DurationMS: ep.DurationMS, App: trace.AppInfo{Target: "/src/mover"},
			Agent: trace.AgentInfo{Name: "script", Options: map[string]string{"file": "/src/play.yaml"}}, Started: started.Add(time.Duration(i) * time.Second)}
		data, _ := json.Marshal(r)
		if err := os.WriteFile(filepath.Join(d, trace.RunFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := json.Marshal(sum)
	if err := os.WriteFile(filepath.Join(dir, eval.SummaryFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLsEval: ls EVALDIR lists the eval and its episodes; without DIR, ls
// looks where run and eval write by default and gives paths that work
// from here.
func TestLsEval(t *testing.T) {
	base := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	root := t.TempDir()
	evalDir := filepath.Join(root, "agentbox-evals", "20261129-200000-nightly-abcdef")
	putEval(t, evalDir, base)
	entries, warnings, err := listRuns(evalDir)
	if err != nil || len(warnings) > 0 {
		t.Fatal(err, warnings)
	}
	var b bytes.Buffer
	writeLs(&b, entries, time.UTC)
	golden(t, "ls-eval.golden", b.Bytes())

	t.Chdir(root)
	var so, se bytes.Buffer
	if code := Main([]string{"ls"}, &so, &se); code != 0 {
		t.Fatalf("ls: exit %d: %s", code, se.String())
	}
	want := filepath.Join("agentbox-evals", "20261129-200000-nightly-abcdef")
	if !strings.Contains(so.String(), "EVAL") || !strings.Contains(so.String(), want+"  failed  1/2") || strings.Contains(so.String(), "mover-script/001") {
		t.Errorf("ls without DIR:\n%s\nwant the eval at %s, 1/2 passed, without its episodes", so.String(), want)
	}
	so.Reset()
	if code := Main([]string{"ls", "--json"}, &so, &se); code != 0 {
		t.Fatalf("ls --json: exit %d: %s", code, se.String())
	}
	var got []lsEntry
	if err := json.Unmarshal(so.Bytes(), &got); err != nil || len(got) != 1 || got[0].Kind != lsEval || got[0].Path != want || *got[0].Passed != 1 {
		t.Errorf("ls --json: %s (%v)", so.String(), err)
	}
}

func TestLsGolden(t *testing.T) {
	root := lsFixture(t)
	entries, warnings, err := listRuns(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !bytes.Contains([]byte(warnings[0]), []byte("version 9 is newer")) {
		t.Errorf("warnings %q, want one about the newer trace", warnings)
	}
	var b bytes.Buffer
	writeLs(&b, entries, time.UTC)
	golden(t, "ls.golden", b.Bytes())

	b.Reset()
	if err := writeLsJSON(&b, entries); err != nil {
		t.Fatal(err)
	}
	golden(t, "ls.json.golden", b.Bytes())
}

func TestLsErrors(t *testing.T) {
	for _, dir := range []string{filepath.Join(t.TempDir(), "missing"), lsFixture(t) + "/README.txt"} {
		_, _, err := listRuns(dir)
		var ee *exitError
		if !asExit(err, &ee) || ee.code != ExitUsage {
			t.Errorf("ls %s: %v, want a usage error", dir, err)
		}
	}
	entries, _, err := listRuns(t.TempDir())
	if err != nil || len(entries) != 0 {
		t.Errorf("empty dir: %v %v", entries, err)
	}
}

func asExit(err error, target **exitError) bool {
	e, ok := err.(*exitError)
	if ok {
		*target = e
	}
	return ok
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it):\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

// lsMain runs agentbox with args and returns its stdout, stderr and code.
func lsMain(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var so, se bytes.Buffer
	code := Main(args, &so, &se)
	return so.String(), se.String(), code
}

// TestLsFromIndex: once DIR is indexed, ls answers from the index with
// what reading the traces gives, filters included.
func TestLsFromIndex(t *testing.T) {
	root := lsFixture(t)
	evalDir := filepath.Join(root, "20261129-203000-nightly-abcdef")
	db := filepath.Join(t.TempDir(), "index.db")
	out, errOut, code := lsMain(t, "index", "--index", db, root)
	if code != 0 || !strings.Contains(out, "indexed 7 runs and 1 evals") || !strings.Contains(errOut, "version 9 is newer") {
		t.Fatalf("index: exit %d\n%s%s", code, out, errOut)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string // a line the output has
	}{
		{"all", []string{root}, "20261129-200000-mover-aaaaaa"},
		{"json", []string{root, "--json"}, `"kind": "eval"`},
		{"sandbox", []string{root, "--json"}, `"sandbox": "notes"`},
		{"app", []string{root, "--app", "MOVER"}, "mover-half"},
		{"agent", []string{root, "--agent", "script"}, "suite/mover-script/001"},
		{"outcome", []string{root, "--outcome", "failure"}, "diverged"},
		{"incomplete", []string{root, "--outcome", "incomplete"}, "20261129-201000-mover-cccccc"},
		{"eval outcome", []string{root, "--outcome", "failed"}, "nightly"},
		{"since until", []string{root, "--since", "2026-11-29T20:01:00Z", "--until", "2026-11-29T20:06:00Z"}, "20261129-200500-mover-bbbbbb"},
		{"eval", []string{"--eval", evalDir}, "mover-script/002"},
		{"eval's dir", []string{evalDir}, "mover-script/001"},
		{"none", []string{root, "--app", "nothing-like-this"}, "no matching runs or evals in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			walked, _, code := lsMain(t, append([]string{"ls", "--index", "off"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("ls reading the traces: exit %d", code)
			}
			indexed, errOut, code := lsMain(t, append([]string{"ls", "--index", db}, tc.args...)...)
			if code != 0 || errOut != "" {
				t.Fatalf("ls from the index: exit %d: %s", code, errOut)
			}
			if indexed != walked {
				t.Errorf("from the index:\n%s\nreading the traces:\n%s", indexed, walked)
			}
			if !strings.Contains(indexed, tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, indexed)
			}
		})
	}
	// A trace removed since it was indexed is not listed.
	os.RemoveAll(filepath.Join(root, "20261129-200000-mover-aaaaaa"))
	if out, _, _ := lsMain(t, "ls", "--index", db, root); strings.Contains(out, "mover-aaaaaa") {
		t.Errorf("a removed trace is listed:\n%s", out)
	}
}

// TestLsDamagedIndex: a damaged index is an error of agentbox index that
// names the file and the rebuild; ls warns the same and reads the traces;
// index --rebuild recreates it.
func TestLsDamagedIndex(t *testing.T) {
	root := lsFixture(t)
	db := filepath.Join(t.TempDir(), "index.db")
	if _, e, code := lsMain(t, "index", "--index", db, root); code != 0 {
		t.Fatal(e)
	}
	if err := os.WriteFile(db, bytes.Repeat([]byte("garbage "), 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(db + "-wal")
	os.Remove(db + "-shm")
	_, errOut, code := lsMain(t, "index", "--index", db, root)
	if code != ExitError || !strings.Contains(errOut, db) || !strings.Contains(errOut, "agentbox index --rebuild") {
		t.Errorf("index of a damaged file: exit %d: %s", code, errOut)
	}
	walked, _, _ := lsMain(t, "ls", "--index", "off", root)
	out, errOut, code := lsMain(t, "ls", "--index", db, root)
	if code != 0 || out != walked || !strings.Contains(errOut, db) || !strings.Contains(errOut, "agentbox index --rebuild") {
		t.Errorf("ls over a damaged index: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := lsMain(t, "index", "--rebuild", "--index", db); code != 0 {
		t.Fatalf("rebuild: exit %d: %s", code, errOut)
	}
	if _, errOut, code := lsMain(t, "index", "--index", db, root); code != 0 {
		t.Fatalf("index after the rebuild: exit %d: %s", code, errOut)
	}
	if out, errOut, code := lsMain(t, "ls", "--index", db, root); code != 0 || out != walked || errOut != "" {
		t.Errorf("ls after the rebuild: exit %d\n%s%s", code, out, errOut)
	}
}

// TestLiveIndexUnusable: an index that cannot be opened is a warning and
// no indexer; the run goes on.
func TestLiveIndexUnusable(t *testing.T) {
	var se bytes.Buffer
	dir := t.TempDir() // a directory where the file should be
	ix := openLiveIndex(&se, indexFlags{path: dir})
	defer ix.close()
	if ix.indexer() != nil || !strings.Contains(se.String(), "warning: not indexing") {
		t.Errorf("indexer %v, stderr %q", ix.indexer(), se.String())
	}
	if ix := openLiveIndex(&se, indexFlags{path: filepath.Join(t.TempDir(), "i.db"), off: true}); ix.indexer() != nil {
		t.Error("--no-index indexes")
	}
}
