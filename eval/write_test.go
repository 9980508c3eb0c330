package eval

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWriteLeavesNoTempFile: when summary.json or junit.xml cannot be put
// in place, the write fails and nothing but what was there is left in
// the output directory (it used to leave summary.json.tmp behind).
func TestWriteLeavesNoTempFile(t *testing.T) {
	for _, blocked := range []string{SummaryFile, JUnitFile} {
		t.Run(blocked, func(t *testing.T) {
			dir := t.TempDir()
			// A non-empty directory under the file's name: the rename fails.
			if err := os.MkdirAll(filepath.Join(dir, blocked, "x"), 0o755); err != nil {
				t.Fatal(err)
			}
			s := &Summary{Format: "agentbox-eval", Version: 1, Suite: "s"}
			err := s.write(dir)
			if err == nil {
				t.Fatal("write succeeded over a directory")
			}
			t.Logf("error: %v", err)
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			want := []string{blocked}
			if blocked == JUnitFile {
				want = []string{JUnitFile, SummaryFile} // written before the failure
			}
			if !slices.Equal(got, want) {
				t.Errorf("the directory holds %q, want %q", got, want)
			}
		})
	}
}
