package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codegirl-games/agentbox/trace"
)

// TestCollectedFilesListed: the task's collected files are listed and
// linked (plain files under files/), one that is a link out of the trace
// is listed but not linked, and what was refused is shown with its reason.
func TestCollectedFilesListed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	tw, err := trace.Create(dir, trace.Run{ID: "r1"}, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	files := filepath.Join(dir, trace.FilesDir)
	if err := os.MkdirAll(filepath.Join(files, "Documents"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(files, "Documents", "out.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(files, "sneaky.txt")); err != nil {
		t.Fatal(err)
	}
	if err := tw.Finish(func(r *trace.Run) {
		r.Outcome = trace.Success
		r.Files = []trace.FileInfo{{Path: "Documents/out.txt", Size: 1, SHA256: "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"}, {Path: "sneaky.txt", Size: 1, SHA256: "00"}}
		r.FilesRefused = []trace.RefusedFile{{Path: "Documents/link", Reason: "a symbolic link (not followed)"}}
	}); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := pageData(t, mustRender(t, tr))
	if len(p.Files) != 2 || !strings.HasSuffix(p.Files[0].URL, "files/Documents/out.txt") || p.Files[1].URL != "" {
		t.Errorf("files = %+v, want out.txt linked and the link not", p.Files)
	}
	if len(p.FilesRefused) != 1 || p.FilesRefused[0].Reason != "a symbolic link (not followed)" {
		t.Errorf("files_refused = %+v", p.FilesRefused)
	}
}
