package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/codegirl-games/agentbox/environment"
	"github.com/codegirl-games/agentbox/internal/owner"
)

// fakeReaper is a backend with nothing to reap.
type fakeReaper struct{ fakeCapable }

func (*fakeReaper) Reap(context.Context, environment.ReapOptions) ([]environment.Reaped, error) {
	return nil, nil
}

var registerReaper sync.Once

// TestGCTempDirs: gc removes the temporary directories of agentbox
// processes that are gone, with what they hold, and keeps a live
// process's; --dry-run only lists them.
func TestGCTempDirs(t *testing.T) {
	registerReaper.Do(func() {
		environment.Register("test-reaper", func(environment.Options) (environment.Backend, error) {
			return &fakeReaper{fakeCapable{name: "test-reaper"}}, nil
		})
	})
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	live, err := owner.TempDir("serve")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid
	orphan := filepath.Join(tmp, fmt.Sprintf("agentbox-serve-%d.1-42", dead))
	if err := os.MkdirAll(filepath.Join(orphan, "upload"), 0o700); err != nil {
		t.Fatal(err)
	}
	gc := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := Main(append([]string{"gc", "--backend", "test-reaper"}, args...), &stdout, &stderr); code != 0 {
			t.Fatalf("gc %v: exit %d\n%s%s", args, code, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	want := fmt.Sprintf("temporary directory %s (serve, created ", orphan)
	why := fmt.Sprintf("owner pid %d is gone\n", dead)
	if out := gc("--dry-run"); !strings.Contains(out, "would remove "+want) || !strings.HasSuffix(out, why) || strings.Contains(out, live) {
		t.Errorf("gc --dry-run:\n%s", out)
	}
	if _, err := os.Stat(orphan); err != nil {
		t.Fatalf("--dry-run removed it: %v", err)
	}
	if out := gc(); !strings.Contains(out, "removed "+want) || strings.Contains(out, live) {
		t.Errorf("gc:\n%s", out)
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("the orphan is still there: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the live process's directory: %v", err)
	}
	if out := gc("--all"); out != "nothing to collect\n" {
		t.Errorf("gc --all once nothing is left:\n%s", out)
	}
}
