package report

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestEvalPage: the eval page's policy allows its one style by hash and no
// script at all; the page carries it; its text comes from summary.json and
// is escaped; each episode that has a trace inside the eval gets its run's
// report and a relative link to it, and a path that leaves the eval's
// directory or passes through a symbolic link gets neither.
func TestEvalPage(t *testing.T) {
	if strings.Contains(EvalCSP, "unsafe-inline") || strings.Contains(EvalCSP, "script-src") || !strings.Contains(EvalCSP, "default-src 'none'") {
		t.Errorf("EvalCSP %q", EvalCSP)
	}
	dir := t.TempDir()
	ran := write(t, 2, "", nil)
	if err := os.MkdirAll(filepath.Join(dir, "task"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(ran.Dir, filepath.Join(dir, "task", "001")); err != nil {
		t.Fatal(err)
	}
	outside := write(t, 1, "", nil)
	if err := os.Symlink(outside.Dir, filepath.Join(dir, "task", "002")); err != nil {
		t.Fatal(err)
	}
	one := 1.0
	ev := Eval{Suite: "s</title><script>x()</script>", RunID: "id", Started: time.Now(), Parallel: 1,
		Tasks:  []EvalTask{{Name: "task", Episodes: 3, Passed: 1}},
		Totals: EvalTask{Name: "total", Episodes: 3, Passed: 1},
		Episodes: []EvalEpisode{
			{Task: "task", N: 1, Category: "passed", Trace: "task/001", Grade: "verified", Score: &one},
			{Task: "task", N: 2, Category: "failed", Trace: "task/002", Message: "<img src=x onerror=alert(1)>"},
			{Task: "task", N: 3, Category: "failed", Trace: "../" + filepath.Base(filepath.Dir(outside.Dir)) + "/run"},
		}}
	out := filepath.Join(dir, FileName)
	st, err := WriteEval(context.Background(), dir, ev, out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Reports != 1 || len(st.Refused) != 2 {
		t.Errorf("reports %d, refused %q; want 1 and the link and the path out", st.Reports, st.Refused)
	}
	if _, err := os.Stat(filepath.Join(dir, "task", "001", FileName)); err != nil {
		t.Errorf("the episode's report was not written: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside.Dir, FileName)); err == nil {
		t.Errorf("a report was written outside the eval through the link")
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	meta := regexp.MustCompile(`<meta http-equiv="Content-Security-Policy" content="([^"]*)">`).FindStringSubmatch(page)
	if meta == nil || html.UnescapeString(meta[1]) != EvalCSP {
		t.Errorf("the page does not carry the policy: %q", meta)
	}
	if !strings.Contains(page, "<td>verified <span class=\"mono\">1.00</span></td>") || strings.Count(page, "<td><span class=\"none\">-</span></td>") < 2 {
		t.Errorf("the episodes' grades are not on the page (verified 1.00 for the first, - for the others)")
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "<img") {
		t.Errorf("text from the summary reached the page as markup")
	}
	m := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindAllStringSubmatch(page, -1)
	if len(m) != 1 {
		t.Fatalf("%d style elements, want 1", len(m))
	}
	h := sha256.Sum256([]byte(m[0][1]))
	if want := "style-src 'sha256-" + base64.StdEncoding.EncodeToString(h[:]) + "'"; !strings.Contains(EvalCSP, want) {
		t.Errorf("EvalCSP %q lacks %q: the page's style would not apply", EvalCSP, want)
	}
	links := regexp.MustCompile(`href="([^"]*)"`).FindAllStringSubmatch(page, -1)
	if len(links) != 1 || links[0][1] != "task/001/report.html" {
		t.Errorf("links %q, want the one episode inside", links)
	}
}
