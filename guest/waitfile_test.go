package guest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWaitFile: wait until file holds once the file was written after
// the launch (a save by temporary file and rename, as LibreOffice's) and
// is stable; it does not for a missing file, one not written since the
// launch, one still changing, or a link (inside or out of the home).
func TestWaitFile(t *testing.T) {
	launched := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	before, after := launched.Add(-time.Minute), launched.Add(time.Second)
	outside := filepath.Join(t.TempDir(), "secret.ods")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		setup  func(t *testing.T, home string)
		stable time.Duration
		met    bool
		seen   string
	}{
		{"saved by rename", func(t *testing.T, home string) {
			write(t, home, "Documents/sales.ods", "staged", before)
			write(t, home, "Documents/.~tmp123", "saved", after)
			if err := os.Rename(filepath.Join(home, "Documents/.~tmp123"), filepath.Join(home, "Documents/sales.ods")); err != nil {
				t.Fatal(err)
			}
		}, 50 * time.Millisecond, true, ""},
		{"missing", func(t *testing.T, home string) {}, 0, false, "~/Documents/sales.ods does not exist"},
		{"the staged input, unchanged", func(t *testing.T, home string) {
			write(t, home, "Documents/sales.ods", "staged", before)
		}, 0, false, "not written since the app was launched"},
		{"still changing", func(t *testing.T, home string) {
			write(t, home, "Documents/sales.ods", "saved", after)
		}, time.Hour, false, "still changing"},
		{"a link out of the home", func(t *testing.T, home string) {
			if err := os.Symlink(outside, filepath.Join(home, "Documents/sales.ods")); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(outside, after, after); err != nil {
				t.Fatal(err)
			}
		}, 0, false, "not a regular file"},
		{"a directory linked out of the home", func(t *testing.T, home string) {
			if err := os.Remove(filepath.Join(home, "Documents")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Dir(outside), filepath.Join(home, "Documents")); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(outside, filepath.Join(filepath.Dir(outside), "sales.ods")); err != nil {
				t.Fatal(err)
			}
		}, 0, false, "escapes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			if err := os.Mkdir(filepath.Join(home, "Documents"), 0o700); err != nil {
				t.Fatal(err)
			}
			tt.setup(t, home)
			// A deadline that passes is "not met"; one that holds is
			// reached long before it on any machine.
			deadline := time.Minute
			if !tt.met {
				deadline = 300 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			stable := tt.stable
			if stable == 0 {
				stable = 10 * time.Millisecond
			}
			met, seen, err := waitFile(ctx, home, "Documents/sales.ods", launched, stable, 10*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if met != tt.met || !strings.Contains(seen, tt.seen) {
				t.Errorf("met %v, seen %q; want %v, %q", met, seen, tt.met, tt.seen)
			}
		})
	}
}

func write(t *testing.T, home, rel, content string, mtime time.Time) {
	t.Helper()
	p := filepath.Join(home, rel)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}
