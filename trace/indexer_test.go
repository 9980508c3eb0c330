package trace

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/codegirl-games/agentbox/action"
)

// fakeIndexer records what a Writer told it.
type fakeIndexer struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeIndexer) add(s string) { f.mu.Lock(); f.calls = append(f.calls, s); f.mu.Unlock() }
func (f *fakeIndexer) TraceCreated(dir string, run Run) {
	f.add("created " + run.Status)
}
func (f *fakeIndexer) TraceRecorded(dir string, n int, r Record) {
	f.add(fmt.Sprintf("%d %s %d", n, r.Type, r.Step))
}
func (f *fakeIndexer) TraceFinished(dir string, run Run) {
	f.add(fmt.Sprintf("finished %s %s %d", run.Status, run.Outcome, run.Steps))
}

// TestIndexerTold: the Writer's Indexer hears of the run, each record
// with its line in steps.jsonl, in order, and the end; the lines are
// those a reader numbers.
func TestIndexerTold(t *testing.T) {
	ix := &fakeIndexer{}
	dir := t.TempDir()
	w, err := Create(dir, Run{ID: "ix"}, Options{Encoders: 1, Indexer: ix})
	if err != nil {
		t.Fatal(err)
	}
	a := action.Action{Kind: action.Wait}
	w.Record(Record{Type: TypeStep, Step: 1, Action: &a})
	w.Record(Record{Type: TypeResult, Step: 1, Result: &action.Result{OK: true}})
	w.Record(Record{Type: TypeEvent, Event: "window_mapped"})
	w.Record(Record{Type: TypeStep, Step: 2, Action: &a})
	if err := w.Finish(func(r *Run) { r.Outcome = Success }); err != nil {
		t.Fatal(err)
	}
	w.Finish(nil) // idempotent: told once
	want := []string{"created running", "0 step 1", "1 result 1", "2 event 0", "3 step 2", "finished complete success 2"}
	if !slices.Equal(ix.calls, want) {
		t.Errorf("told %q\nwant %q", ix.calls, want)
	}
	tr, err := Open(dir)
	if err != nil || len(tr.Records) != 4 || tr.Records[3].Step != 2 {
		t.Fatalf("read back: %v", err)
	}
}
