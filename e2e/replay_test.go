package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/testenv"
)

// replaySummary is the part of replay.json the tests read.
type replaySummary struct {
	Verdict  string `json:"verdict"`
	Message  string `json:"message"`
	Replayed int    `json:"replayed"`
	Source   struct {
		ID    string `json:"id"`
		Steps int    `json:"steps"`
	} `json:"source"`
	Divergence *struct {
		Step    int    `json:"step"`
		Kind    string `json:"kind"`
		Diff    string `json:"diff"`
		Compare string `json:"compare"`
	} `json:"divergence"`
	Comparisons []struct {
		Step   int  `json:"step"`
		Match  bool `json:"match"`
		Pixels int  `json:"pixels"`
	} `json:"comparisons"`
	Notes []string `json:"notes"`
}

func readSummary(t *testing.T, dir string) replaySummary {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "replay.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s replaySummary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// The mover in these tests moves a fixed distance per arrow key press
// (-step), so the picture depends on the keys alone: a mover that moves by
// time × speed moves as far as a loaded machine's timing lets it (at load
// 25 on two cores a replayed 1 s hold ended 24 px from the recording, 240
// ms at 100 px/s: a divergence with nothing wrong). The variant moves half as far per
// press, 30 px short after the first press, so 2400 of the square's pixels
// differ (0.8% of the compared area, above the default 0.5%).
const (
	moverStep60Manifest = `{"command": "mover", "args": ["-step", "60"], "window_title": "mover", "ready_output": "mover: ready", "ready_timeout": "20s"}`
	moverHalfManifest   = `{"command": "mover", "args": ["-step", "30"], "window_title": "mover", "ready_output": "mover: ready", "ready_timeout": "20s"}`
)

// replayScript is the recording TestReplay replays: a wait (nothing
// moves), a tap of Right (the next screen is the first the variant
// changes), a second tap, and the script's end (done): four steps. Taps,
// not a held key: a hold longer than the server's autorepeat delay would
// add presses as the machine's timing allows. The settle lets a loaded
// machine's mover draw before each screenshot.
const replayScript = `steps:
  - action: wait
    ms: 100
  - action: key
    key: Right
  - action: key
    key: Right
`

// recordReplaySource records replayScript against appDir.
func recordReplaySource(t *testing.T, appDir string) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "taps.yaml")
	if err := os.WriteFile(script, []byte(replayScript), 0o644); err != nil {
		t.Fatal(err)
	}
	r := agentbox(t, "run", appDir, "--script", script, "--settle", "stable:1s")
	if r.code != 0 {
		t.Fatalf("recording the mover run: want exit 0:\n%s", r)
	}
	return r.dir
}

// TestReplay records a scripted mover run, replays it against the same app
// (it matches) and against a variant that moves half as far per key press
// (it diverges at the first step observed after a press).
func TestReplay(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	appDir := moverApp(t, moverStep60Manifest)
	rec := recordReplaySource(t, appDir)
	src := openTrace(t, rec)
	if len(src.Steps) != 4 || src.Steps[0].Action.Kind != action.Wait || src.Steps[1].Action.Kind != action.Key {
		t.Fatalf("unexpected recording: %+v", src.Steps)
	}
	heldStep := src.Steps[1].Step + 1 // the first screen observed after a press (a step records what was seen before its action)

	t.Run("matches", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "replay")
		t0 := time.Now()
		r := run0(t, "replay", rec, "--out", out)
		t.Logf("replay of %d steps took %v", len(src.Steps), time.Since(t0).Round(time.Millisecond))
		if r.code != 0 || !strings.HasPrefix(r.stdout, "matched: all 4 recorded steps and the final screen match") {
			t.Fatalf("want exit 0, matched:\n%s", r)
		}
		s := readSummary(t, out)
		if s.Verdict != "matched" || s.Replayed != 4 || s.Source.ID != src.Run.ID {
			t.Errorf("replay.json: %+v", s)
		}
		if len(s.Comparisons) != 4 {
			t.Errorf("%d screens compared, want 4", len(s.Comparisons))
		}
		for _, c := range s.Comparisons {
			t.Logf("step %d: %d pixels differ", c.Step, c.Pixels)
		}
		if !strings.Contains(strings.Join(s.Notes, "\n"), "the same build as recorded") {
			t.Errorf("notes %q do not compare the app's fingerprint", s.Notes)
		}
		// The replay is a run of its own with a trace.
		tr := openTrace(t, out)
		if tr.Run.Agent.Name != "replay" || tr.Run.Outcome != "success" || tr.Run.App.Digest != src.Run.App.Digest {
			t.Errorf("replay trace: agent %q outcome %q digest %q", tr.Run.Agent.Name, tr.Run.Outcome, tr.Run.App.Digest)
		}
		if tr.Run.Env.Screen != src.Run.Env.Screen || tr.Run.Settings == nil || tr.Run.Settings.Settle != src.Run.Settings.Settle {
			t.Errorf("replay did not use the recorded screen and settings: %+v %+v", tr.Run.Env.Screen, tr.Run.Settings)
		}
		for i, s := range tr.Steps {
			if s.Action == nil || i >= len(src.Steps) || s.Action.Kind != src.Steps[i].Action.Kind {
				t.Errorf("replayed step %d: %v, recorded %v", s.Step, s.Action, src.Steps[i].Action)
			}
		}
		assertNoContainers(t, tr.Run.ID)
	})

	t.Run("half step diverges", func(t *testing.T) {
		variant := moverApp(t, moverHalfManifest)
		out := filepath.Join(t.TempDir(), "replay")
		r := run0(t, "replay", rec, "--target", variant, "--out", out)
		if r.code != 1 || !strings.Contains(r.stdout, fmt.Sprintf("diverged: diverged at step %d:", heldStep)) {
			t.Fatalf("want exit 1, diverged at step %d:\n%s", heldStep, r)
		}
		s := readSummary(t, out)
		if s.Verdict != "diverged" || s.Divergence == nil || s.Divergence.Step != heldStep || s.Divergence.Kind != "screen" {
			t.Fatalf("replay.json: %+v %+v", s, s.Divergence)
		}
		// The screen before the first press matched.
		for _, c := range s.Comparisons {
			if c.Step < heldStep && !c.Match {
				t.Errorf("step %d diverged before the key was held (%d pixels)", c.Step, c.Pixels)
			}
		}
		for _, f := range []string{s.Divergence.Diff, s.Divergence.Compare, fmt.Sprintf("replay/expected-%06d.png", heldStep), fmt.Sprintf("replay/actual-%06d.png", heldStep)} {
			img := readPNG(t, filepath.Join(out, f))
			if f == s.Divergence.Diff && (img.Bounds().Dx() != 640 || img.Bounds().Dy() != 480) {
				t.Errorf("diff image is %v, want 640x480", img.Bounds())
			}
		}
		if !strings.Contains(r.stdout, filepath.Join(out, s.Divergence.Diff)) {
			t.Errorf("stdout does not name the diff image:\n%s", r.stdout)
		}
		if !strings.Contains(strings.Join(s.Notes, "\n"), `app arguments: ["-step" "30"]`) {
			t.Errorf("notes %q do not say the app differs", s.Notes)
		}
		tr := openTrace(t, out)
		if tr.Run.Outcome != "failure" || tr.Run.Reason != "diverged" {
			t.Errorf("replay trace outcome %s (%s), want failure (diverged)", tr.Run.Outcome, tr.Run.Reason)
		}
		// The replay's report shows the divergence.
		if v := run0(t, "view", out); v.code != 0 {
			t.Fatalf("view: %s", v)
		}
		page, _ := os.ReadFile(filepath.Join(out, "report.html"))
		if !strings.Contains(string(page), `"verdict":"diverged"`) || !strings.Contains(string(page), fmt.Sprintf("replay/compare-%06d.png", heldStep)) {
			t.Errorf("the replay's report does not show the divergence")
		}
	})

	t.Run("bad input", func(t *testing.T) {
		tmp := t.TempDir()
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--max-diff", "7"}, "--max-diff"},
			{[]string{"--tolerance", "300"}, "tolerance 300"},
			{[]string{"--ignore", "10,10,5,5"}, "--ignore"},
			{[]string{"--area", "desk"}, `area "desk"`},
			{[]string{"--timing", "slow"}, `timing "slow"`},
			{[]string{"--target", filepath.Join(tmp, "nothing")}, "nothing"},
		} {
			r := run0(t, append([]string{"replay", rec}, c.args...)...)
			if r.code != 2 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("replay %v: want exit 2 and %q:\n%s", c.args, c.want, r)
			}
		}
		// A recorded app that is not here any more.
		gone := filepath.Join(tmp, "gone")
		synthTrace(t, gone, 2, 64, 64, true)
		r := run0(t, "replay", gone)
		if r.code != 2 || !strings.Contains(r.stderr, "/nonexistent/synthetic-app") || !strings.Contains(r.stderr, "--target") {
			t.Errorf("replay of a trace whose app is gone: want exit 2 naming it:\n%s", r)
		}
	})
}

// TestReplayFromAnotherDirectory: a run of an executable given by a
// relative path is named after the file (not its directory), records the
// target's absolute path, and replays from any directory.
func TestReplayFromAnotherDirectory(t *testing.T) {
	testenv.Require(t, testenv.Image(testenv.RuntimeImage))
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "builds"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(testenv.Build(t, "./examples/mover"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "builds", "mover"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(root, "rec")
	r := runIn(t, root, "run", "builds/mover", "--agent", "idle", "--agent-opt", "ms=300", "--out", rec)
	if r.code != 0 {
		t.Fatalf("run: %s", r)
	}
	tr := openTrace(t, rec)
	if !strings.Contains(tr.Run.ID, "-mover-") || strings.Contains(tr.Run.ID, "-builds-") {
		t.Errorf("run ID %s: want it named after the executable, mover", tr.Run.ID)
	}
	if want := filepath.Join(root, "builds", "mover"); tr.Run.App.TargetPath != want || tr.Run.App.Target != "builds/mover" {
		t.Errorf("target %q, path %q; want builds/mover at %s", tr.Run.App.Target, tr.Run.App.TargetPath, want)
	}
	elsewhere := t.TempDir()
	r = runIn(t, elsewhere, "replay", rec, "--out", filepath.Join(elsewhere, "replay"), "-v")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "matched") {
		t.Fatalf("replay from another directory: want exit 0, matched:\n%s", r)
	}
	if !strings.Contains(r.stderr, "step 1: wait 300ms") {
		t.Errorf("replay -v does not print the steps:\n%s", r.stderr)
	}
}
