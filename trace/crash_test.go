package trace

import (
	"bufio"
	"fmt"
	"image/png"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/internal/lockrank"
)

// TestMain lets the test binary play a trace writer that is killed
// (os/exec's helper-process pattern).
func TestMain(m *testing.M) {
	if dir := os.Getenv("AGENTBOX_CRASH_WRITER"); dir != "" {
		crashWriter(dir)
		return
	}
	if dir := os.Getenv("AGENTBOX_LIVENESS_WRITER"); dir != "" {
		n, _ := strconv.Atoi(os.Getenv("AGENTBOX_LIVENESS_STEPS"))
		livenessWriter(dir, n)
		return
	}
	lockrank.Enable()
	os.Exit(m.Run())
}

// crashWriter writes steps forever, acknowledging each on stdout once
// Record has returned.
func crashWriter(dir string) {
	w, err := Create(dir, Run{ID: "crash"}, Options{Queue: 4})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	out := bufio.NewWriter(os.Stdout)
	a := action.Action{Kind: action.Type, Text: strings.Repeat("long text to make lines big ", 20)}
	for step := 1; ; step++ {
		f := frame(64, 48, byte(step))
		f.Hash = uint64(step)
		shot := w.Screenshot(step, f)
		if err := w.Record(Record{Type: TypeStep, Step: step, Observation: &Observation{Screenshot: shot, FrameHash: FrameHash(f.Hash)}, Action: &a}); err != nil {
			os.Exit(1)
		}
		fmt.Fprintf(out, "ack %d\n", step)
		out.Flush()
		w.Record(Record{Type: TypeResult, Step: step, Result: &action.Result{OK: true}})
	}
}

// TestCrashSafety kills the writer with SIGKILL at random points many
// times: every trace stays readable, every step acknowledged before the
// kill is present, a torn tail is discarded, the run is marked incomplete,
// and every screenshot on disk is a whole PNG.
func TestCrashSafety(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	runs := 40
	if testing.Short() {
		runs = 8
	}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	torn := 0
	for i := 0; i < runs; i++ {
		dir := filepath.Join(t.TempDir(), "t")
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), "AGENTBOX_CRASH_WRITER="+dir)
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acked := 0
		acks := make(chan int, 1024)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if n, err := strconv.Atoi(strings.TrimPrefix(sc.Text(), "ack ")); err == nil {
					acks <- n
				}
			}
			close(acks)
		}()
		// Kill at a random point after the writer has begun.
		if n, ok := <-acks; ok {
			acked = n
		}
		deadline := time.After(time.Duration(rng.Intn(100)) * time.Millisecond)
	wait:
		for {
			select {
			case n, ok := <-acks:
				if !ok {
					break wait
				}
				acked = n
			case <-deadline:
				break wait
			}
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		for n := range acks {
			acked = max(acked, n) // acknowledged before the kill landed
		}

		tr, err := Open(dir)
		if err != nil {
			t.Fatalf("run %d: the killed trace is unreadable: %v", i, err)
		}
		if !tr.Incomplete {
			t.Errorf("run %d: a killed trace is not marked incomplete", i)
		}
		if tr.TornTail {
			torn++
		}
		if got := len(tr.Steps); got < acked {
			t.Errorf("run %d: %d steps acknowledged, %d in the trace", i, acked, got)
		}
		for j, s := range tr.Steps {
			if s.Step != j+1 {
				t.Fatalf("run %d: step %d recorded as %d", i, j+1, s.Step)
			}
		}
		shots, _ := filepath.Glob(filepath.Join(dir, ScreenshotsDir, "*.png"))
		for _, p := range shots {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := png.Decode(f); err != nil {
				t.Errorf("run %d: %s is not a whole PNG: %v", i, filepath.Base(p), err)
			}
			f.Close()
		}
	}
	t.Logf("%d kills, %d left a torn tail that was discarded", runs, torn)
}
