package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHumanAgentUsage: --agent human is a run without an agent, driven at
// the live page: without --live nobody could drive it, and it takes no
// options; both are usage errors before anything starts.
func TestHumanAgentUsage(t *testing.T) {
	app := filepath.Join(t.TempDir(), "app")
	if err := os.WriteFile(app, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", app, "--agent", "human"}, "--agent human needs --live: a person drives the app from the live page"},
		{[]string{"run", app, "--agent", "human", "--live", "--agent-opt", "k=v"}, "--agent human takes no --agent-opt"},
	} {
		var so, se bytes.Buffer
		if code := Main(c.args, &so, &se); code != ExitUsage || !strings.Contains(se.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", c.args, code, se.String(), ExitUsage, c.want)
		}
	}
}
