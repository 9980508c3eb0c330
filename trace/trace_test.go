package trace

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/observe"
)

func frame(w, h int, g byte) *observe.Frame {
	pix := make([]byte, 4*w*h)
	for i := 0; i < len(pix); i += 4 {
		pix[i+1], pix[i+3] = g, 0xff
	}
	return &observe.Frame{Width: w, Height: h, Pix: pix, Hash: uint64(g) + 1}
}

func TestWriteRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	w, err := Create(dir, Run{ID: "r1", Task: "move"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The run record exists and says running before anything else happens.
	tr, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Incomplete || tr.Run.Status != StatusRunning {
		t.Fatalf("fresh trace: incomplete=%v status=%q", tr.Incomplete, tr.Run.Status)
	}

	f1, f2 := frame(8, 4, 10), frame(8, 4, 20)
	a := action.Action{Kind: action.KeyDown, Key: "Right"}
	for step, f := range []*observe.Frame{f1, f1, f2} {
		shot := w.Screenshot(step+1, f)
		if err := w.Record(Record{Type: TypeStep, Step: step + 1, Observation: &Observation{Screenshot: shot, FrameHash: FrameHash(f.Hash)}, Action: &a}); err != nil {
			t.Fatal(err)
		}
		if err := w.Record(Record{Type: TypeResult, Step: step + 1, Result: &action.Result{OK: true}}); err != nil {
			t.Fatal(err)
		}
	}
	w.Output(observe.Stdout, []byte("hello\n"), 0)
	if err := w.Finish(func(r *Run) { r.Outcome, r.Reason = Success, ReasonDone }); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(nil); err != nil {
		t.Fatalf("second Finish: %v", err)
	}

	tr, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Incomplete || tr.TornTail || len(tr.Missing) > 0 {
		t.Errorf("incomplete=%v torn=%v missing=%v", tr.Incomplete, tr.TornTail, tr.Missing)
	}
	if tr.Run.Outcome != Success || tr.Run.ExitCode != 0 || tr.Run.Steps != 3 || tr.Run.Screenshots != 2 {
		t.Errorf("run = %+v", tr.Run)
	}
	if len(tr.Steps) != 3 || tr.Steps[2].Result == nil {
		t.Fatalf("steps = %+v", tr.Steps)
	}
	if a, b := tr.Steps[0].Observation.Screenshot, tr.Steps[1].Observation.Screenshot; a != b {
		t.Errorf("equal frames got two files: %s %s", a, b)
	}
	shots, _ := os.ReadDir(filepath.Join(dir, ScreenshotsDir))
	if len(shots) != 2 {
		t.Errorf("%d screenshot files, want 2", len(shots))
	}
	actions, _ := os.ReadFile(filepath.Join(dir, ActionsFile))
	if n := bytes.Count(actions, []byte("\n")); n != 3 {
		t.Errorf("actions.jsonl has %d lines, want 3", n)
	}
	if _, err := Create(dir, Run{}, Options{}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("Create over an existing trace: err = %v", err)
	}
}

func TestTornTail(t *testing.T) {
	tests := []struct {
		name     string
		content  string
		records  int
		torn     bool
		wantFail bool
	}{
		{"clean", `{"type":"step","step":1,"t_ms":1}` + "\n", 1, false, false},
		{"no newline", `{"type":"step","step":1,"t_ms":1}` + "\n" + `{"type":"st`, 1, true, false},
		{"garbled last", `{"type":"step","step":1,"t_ms":1}` + "\n" + `{"type":"st` + "\n", 1, true, false},
		{"garbled middle", `{"ty` + "\n" + `{"type":"step","step":1,"t_ms":1}` + "\n", 0, false, true},
		{"empty", "", 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, torn, err := ReadRecords(strings.NewReader(tt.content))
			if (err != nil) != tt.wantFail {
				t.Fatalf("err = %v", err)
			}
			if len(recs) != tt.records || torn != tt.torn {
				t.Errorf("records=%d torn=%v, want %d %v", len(recs), torn, tt.records, tt.torn)
			}
		})
	}
}

func TestLogCap(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(filepath.Join(dir, "t"), Run{}, Options{LogCap: 10})
	if err != nil {
		t.Fatal(err)
	}
	w.Output(observe.Stdout, []byte("0123456789abcdef"), 0)
	w.Output(observe.Stdout, []byte("more"), 100)
	if err := w.Finish(func(r *Run) { r.Outcome = Failure }); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "t", StdoutFile))
	if !strings.HasPrefix(string(data), "0123456789\n[agentbox: stdout truncated at 10 bytes; 110 more bytes were dropped]") {
		t.Errorf("stdout.log = %q", data)
	}
	tr, err := Open(filepath.Join(dir, "t"))
	if err != nil {
		t.Fatal(err)
	}
	if tr.Run.Logs.StdoutDropped != 110 || tr.Run.ExitCode != 1 {
		t.Errorf("logs = %+v exit=%d", tr.Run.Logs, tr.Run.ExitCode)
	}
}

func TestConcurrentScreenshotsAndFinish(t *testing.T) {
	w, err := Create(filepath.Join(t.TempDir(), "t"), Run{}, Options{Queue: 1, Encoders: 1})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				w.Screenshot(i*10+j, frame(4, 4, byte(i*10+j)))
			}
		}(i)
	}
	_ = w.Finish(nil) // must not panic while screenshots are queued
	wg.Wait()
}

func TestRunJSONFields(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	w, err := Create(dir, Run{ID: "x", Agent: AgentInfo{Name: "demo"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(func(r *Run) { r.Outcome, r.Reason = Interrupted, ReasonSignal }); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	data, _ := os.ReadFile(filepath.Join(dir, RunFile))
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"format", "version", "id", "status", "outcome", "reason", "exit_code", "agent", "app", "environment", "started", "ended", "steps"} {
		if _, ok := m[k]; !ok {
			t.Errorf("run.json lacks %q", k)
		}
	}
	if m["exit_code"].(float64) != 130 || m["format"] != Format {
		t.Errorf("run.json = %s", data)
	}
}

// TestFlush: once Flush returns, every screenshot queued before it is on
// disk (a fork compares with them while the run goes on).
func TestFlush(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	w, err := Create(dir, Run{ID: "flush"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var rels []string
	for i := range 5 {
		f := &observe.Frame{Width: 8, Height: 8, Pix: make([]byte, 4*8*8), Hash: uint64(i + 1)}
		rels = append(rels, w.Screenshot(i+1, f))
	}
	w.Flush()
	for _, rel := range rels {
		if _, err := os.Stat(filepath.Join(dir, rel)); err != nil {
			t.Errorf("after Flush: %v", err)
		}
	}
	if err := w.Finish(nil); err != nil {
		t.Fatal(err)
	}
}
