package report

import (
	"bytes"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/codegirl-games/agentbox/trace"
)

// TestGrade: run.json's grade is on the page as data — outcome, score,
// each check — and a detail quoting a collected file cannot end the data
// script.
func TestGrade(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	tw, err := trace.Create(dir, trace.Run{ID: "r1"}, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := &trace.Grade{Outcome: trace.GradeIncorrect, Score: 0.5, Message: "check 2: B10 is 1200, want 1234", MS: 12, Checks: []trace.GradeCheck{
		{Check: "exists", File: "Documents/sales.ods", OK: true, Detail: "collected (10 bytes)", MS: 0.1},
		{Name: "the total", Check: "table", File: "Documents/sales.ods", Class: trace.GradeIncorrect, Detail: `B10 is "</script><b>x", want 1234`, Weight: 2, MS: 3},
	}}
	if err := tw.Finish(func(r *trace.Run) { r.Outcome = trace.Success; r.Grade = g }); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	html := mustRender(t, tr)
	p := pageData(t, html)
	if !reflect.DeepEqual(p.Grade, g) {
		t.Errorf("page grade %+v\nwant %+v", p.Grade, g)
	}
	if bytes.Contains(html, []byte("</script><b>")) {
		t.Error("a check's detail ends the data script")
	}
	for _, want := range []string{`D.grade`, `"Grade: "`} {
		if !bytes.Contains(html, []byte(want)) {
			t.Errorf("the page's script does not draw the grade (%s)", want)
		}
	}
}
