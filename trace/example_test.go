package trace_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/codegirl-games/agentbox/action"
	"github.com/codegirl-games/agentbox/trace"
)

// A trace is written while the run happens — each step's record before its
// action runs, so a killed writer still leaves a readable trace — and read
// back with Open, which pairs every step with its result.
func Example() {
	dir, err := os.MkdirTemp("", "trace-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	w, err := trace.Create(filepath.Join(dir, "run-1"), trace.Run{ID: "run-1", Task: "open the menu", Agent: trace.AgentInfo{Name: "script"}}, trace.Options{})
	if err != nil {
		log.Fatal(err)
	}
	press := action.Action{Kind: action.Key, Keys: "F10"}
	w.Record(trace.Record{Type: trace.TypeStep, Step: 1, TMS: w.Since(), Actor: trace.ActorScript, Action: &press})
	w.Record(trace.Record{Type: trace.TypeResult, Step: 1, TMS: w.Since(), Result: &action.Result{OK: true}})
	if err := w.Finish(func(r *trace.Run) {
		r.Outcome, r.Reason, r.Steps = trace.Success, trace.ReasonDone, 1
	}); err != nil {
		log.Fatal(err)
	}

	t, err := trace.Open(w.Dir())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.Run.Status, t.Run.Outcome, t.Run.ExitCode)
	for _, s := range t.Steps {
		fmt.Println(s.Step, s.Actor, s.Action.Kind, s.Action.Keys, s.Result.Result.OK)
	}
	// Output:
	// complete success 0
	// 1 script key F10 true
}

// A trace whose writer was killed says "running" and is read as
// incomplete; its records up to the kill are all there.
func ExampleOpen_incomplete() {
	dir, err := os.MkdirTemp("", "trace-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	w, err := trace.Create(filepath.Join(dir, "run-2"), trace.Run{ID: "run-2"}, trace.Options{})
	if err != nil {
		log.Fatal(err)
	}
	wait := action.Action{Kind: action.Wait, MS: 100}
	w.Record(trace.Record{Type: trace.TypeStep, Step: 1, TMS: w.Since(), Action: &wait})
	// … and the writer is killed here: no result, no Finish.

	t, err := trace.Open(w.Dir())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.Run.Status, t.Incomplete, len(t.Steps), t.Steps[0].Result == nil)
	// Output:
	// running true 1 true
}
