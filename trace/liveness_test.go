package trace

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/codegirl-games/agentbox/action"
)

// TestLiveness: a trace being written is running; a finalised one
// finished; one whose writer died (its lock let go while run.json says
// running) crashed; MarkCrashed finalises it as crashed; a claim takes it
// once, and a second claim is refused while the first holds it.
func TestLiveness(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	w, err := Create(dir, Run{ID: "r"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if lv, err := CheckLiveness(dir); err != nil || lv != Live {
		t.Fatalf("while writing: %v, %v", lv, err)
	}
	if _, err := ClaimCrashed(dir, false); err == nil || !strings.Contains(err.Error(), "live agentbox") {
		t.Fatalf("claim of a live trace: %v", err)
	}
	if err := MarkCrashed(dir); err == nil {
		t.Fatal("MarkCrashed of a live trace succeeded")
	}
	if err := w.Finish(func(r *Run) { r.Outcome = Success }); err != nil {
		t.Fatal(err)
	}
	if lv, err := CheckLiveness(dir); err != nil || lv != Finished {
		t.Fatalf("finished: %v, %v", lv, err)
	}
	if _, err := os.Stat(filepath.Join(dir, LockFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("writer.lock left after Finish: %v", err)
	}
	if _, err := ClaimCrashed(dir, true); err == nil {
		t.Fatal("claimed a finished trace")
	}
}

// crashed leaves a trace whose writer (a child process) was killed after
// n complete steps and the intent of one more.
func crashed(t *testing.T, n int) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "t")
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "AGENTBOX_LIVENESS_WRITER="+dir, fmt.Sprintf("AGENTBOX_LIVENESS_STEPS=%d", n))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("writer: %v\n%s", err, out)
	}
	return dir
}

// livenessWriter writes n steps with their results, the intent of step
// n+1, and kills itself.
func livenessWriter(dir string, n int) {
	w, err := Create(dir, Run{ID: "crash"}, Options{})
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	a := action.Action{Kind: action.Key, Key: "Right"}
	for step := 1; step <= n+1; step++ {
		w.Record(Record{Type: TypeStep, Step: step, Action: &a})
		if step <= n {
			w.Record(Record{Type: TypeResult, Step: step, Result: &action.Result{OK: true}})
		}
	}
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
}

func TestCrashedClaim(t *testing.T) {
	dir := crashed(t, 5)
	if lv, err := CheckLiveness(dir); err != nil || lv != Crashed {
		t.Fatalf("killed writer: %v, %v", lv, err)
	}
	tr, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := LastCompleted(tr); got != 5 {
		t.Fatalf("LastCompleted = %d, want 5 (step 6 has its intent only)", got)
	}
	c, err := ClaimCrashed(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if lv, _ := CheckLiveness(dir); lv != Resuming {
		t.Fatalf("claimed: %v, want resuming", lv)
	}
	if _, err := ClaimCrashed(dir, true); err == nil || !strings.Contains(err.Error(), "being resumed") {
		t.Fatalf("second claim: %v", err)
	}
	if err := MarkCrashed(dir); err == nil {
		t.Fatal("MarkCrashed of a claimed trace succeeded")
	}
	if err := c.Release("/tmp/next"); err != nil {
		t.Fatal(err)
	}
	run, err := ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != StatusComplete || run.Reason != ReasonCrashed || run.ResumedBy != "/tmp/next" || run.Steps != 6 {
		t.Fatalf("released: %+v", run)
	}
	if lv, _ := CheckLiveness(dir); lv != Crashed {
		t.Fatalf("released: %v, want crashed", lv)
	}
	if _, err := ClaimCrashed(dir, false); err == nil || !strings.Contains(err.Error(), "resumed already") {
		t.Fatalf("claim of a resumed trace: %v", err)
	}
	c, err = ClaimCrashed(dir, true)
	if err != nil {
		t.Fatalf("--force claim: %v", err)
	}
	c.Release("")
}

func TestMarkCrashed(t *testing.T) {
	dir := crashed(t, 3)
	if err := MarkCrashed(dir); err != nil {
		t.Fatal(err)
	}
	run, err := ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != StatusComplete || run.Outcome != Error || run.Reason != ReasonCrashed || run.ExitCode != 3 ||
		!strings.Contains(run.Message, "agentbox resume") {
		t.Fatalf("marked: %+v", run)
	}
	if lv, _ := CheckLiveness(dir); lv != Crashed {
		t.Fatalf("marked: %v", lv)
	}
	if err := MarkCrashed(dir); err != nil {
		t.Fatalf("second MarkCrashed: %v", err)
	}
}

// BenchmarkRecordStep is one step's records (the intent, then the result)
// with and without the fdatasync each is followed by, in the same run.
func BenchmarkRecordStep(b *testing.B) {
	for _, bc := range []struct {
		name   string
		noSync bool
	}{{"nosync", true}, {"sync", false}} {
		b.Run(bc.name, func(b *testing.B) {
			w, err := Create(filepath.Join(b.TempDir(), "t"), Run{ID: "b"}, Options{noSync: bc.noSync})
			if err != nil {
				b.Fatal(err)
			}
			a := action.Action{Kind: action.Key, Key: "Right"}
			obs := &Observation{Screenshot: "screenshots/000001.png", FrameHash: "abc", Width: 640, Height: 480}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := w.Record(Record{Type: TypeStep, Step: i + 1, Observation: obs, Action: &a}); err != nil {
					b.Fatal(err)
				}
				if err := w.Record(Record{Type: TypeResult, Step: i + 1, Result: &action.Result{OK: true}}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			w.Finish(nil)
		})
	}
}

func TestValidate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	w, err := Create(dir, Run{ID: "r", ResumedFrom: &ResumedFrom{Trace: "/x", Step: 2}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := action.Action{Kind: action.Key, Key: "Right"}
	for step := 1; step <= 3; step++ {
		f := frame(8, 4, byte(step))
		w.Record(Record{Type: TypeStep, Step: step, Observation: &Observation{Screenshot: w.Screenshot(step, f), FrameHash: FrameHash(f.Hash)}, Action: &a})
		w.Record(Record{Type: TypeResult, Step: step, Result: &action.Result{OK: true}})
	}
	tr, _ := Open(dir)
	if bad := Validate(tr); len(bad) == 0 || !strings.Contains(bad[0], "status") {
		t.Fatalf("running trace: %v", bad)
	}
	if err := w.Finish(func(r *Run) { r.Outcome = Success }); err != nil {
		t.Fatal(err)
	}
	tr, _ = Open(dir)
	if bad := Validate(tr); bad != nil {
		t.Fatalf("whole trace: %v", bad)
	}
	os.WriteFile(filepath.Join(dir, "screenshots", "000002.png"), []byte("not a png"), 0o644)
	os.Remove(filepath.Join(dir, "screenshots", "000003.png"))
	tr, _ = Open(dir)
	if bad := Validate(tr); len(bad) != 2 {
		t.Fatalf("damaged screenshots: %v", bad)
	}
}

// TestMarkCrashedUnder: serve's start finalises the crashed traces of its
// root, and leaves live and finished ones alone.
func TestMarkCrashedUnder(t *testing.T) {
	root := t.TempDir()
	dead := crashed(t, 2)
	if err := os.Rename(dead, filepath.Join(root, "dead")); err != nil {
		t.Fatal(err)
	}
	live, err := Create(filepath.Join(root, "live"), Run{ID: "live"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Finish(nil)
	fin, err := Create(filepath.Join(root, "sub", "finished"), Run{ID: "fin"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fin.Finish(nil)
	marked, errs := MarkCrashedUnder(root, 2)
	if len(errs) > 0 || len(marked) != 1 || filepath.Base(marked[0]) != "dead" {
		t.Fatalf("marked %v, errors %v", marked, errs)
	}
	if lv, _ := CheckLiveness(filepath.Join(root, "live")); lv != Live {
		t.Fatalf("the live trace: %v", lv)
	}
}
