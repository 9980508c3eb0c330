package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

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
		Steps: 4, DurationMS: 2384.35, App: trace.AppInfo{Target: "examples/mover"}, Agent: trace.AgentInfo{Name: "demo"}, Started: base})
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
	// Not traces: a stray folder and file, and a trace of a newer format.
	os.MkdirAll(filepath.Join(root, "notes"), 0o755)
	os.WriteFile(filepath.Join(root, "README.txt"), []byte("hi"), 0o644)
	os.MkdirAll(filepath.Join(root, "future"), 0o755)
	os.WriteFile(filepath.Join(root, "future", trace.RunFile), []byte(`{"format":"agentbox-trace","version":9}`), 0o644)
	return root
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
