package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelpGolden: the commands that share sandboxFlags show every flag
// with the name, default and help they had before the sharing (the
// golden files were written by the code before it; README's flag table
// describes them). mcp takes run's, with its own defaults where an
// episode differs from a run.
func TestHelpGolden(t *testing.T) {
	for _, cmd := range []string{"run", "eval", "replay", "bench", "mcp"} {
		t.Run(cmd, func(t *testing.T) {
			var so, se bytes.Buffer
			if code := Main([]string{cmd, "--help"}, &so, &se); code != 0 {
				t.Fatalf("exit %d: %s", code, se.String())
			}
			golden(t, "help-"+cmd+".golden", so.Bytes())
		})
	}
}

// TestHiddenGuestBinary: --guest-binary is taken by run, eval and replay
// but not shown.
func TestHiddenGuestBinary(t *testing.T) {
	for _, args := range [][]string{
		{"run", "/nonexistent", "--agent", "idle", "--guest-binary", "/x", "--timeout", "0s"},
		{"eval", "/nonexistent.yaml", "--guest-binary", "/x", "--timeout", "0s"},
		{"replay", "/nonexistent", "--guest-binary", "/x", "--timeout", "-1s"},
	} {
		var so, se bytes.Buffer
		code := Main(args, &so, &se)
		if code != ExitUsage || !strings.Contains(se.String(), "--timeout must") {
			t.Errorf("%v: exit %d, %q; want the --timeout error, not an unknown flag", args, code, se.String())
		}
	}
}

// TestScreenUsageErrors: a bad screen is a usage error naming where it
// came from, on every way in, before any sandbox or backend is touched.
func TestScreenUsageErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	app := write("app", "#!/bin/sh\n") // a real target: the suite is valid but for its screen
	if err := os.Chmod(app, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"640x480xfoo", "x16", "0x0", "99999x99999", "640x480x16"} {
		quoted := `"` + bad + `"`
		suite := write("suite.yaml", "tasks:\n  - name: t\n    target: "+app+"\n    agent: idle\n    screen: "+bad+"\n")
		play := write("play.yaml", "task: t\nscreen: "+bad+"\nsteps:\n  - {action: wait, ms: 10}\n")
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"run", "/nonexistent", "--agent", "idle", "--screen", bad}, "--screen " + quoted + ": "},
			{[]string{"run", "/nonexistent", "--script", play}, "play.yaml:2: field \"screen\": " + quoted + ": "},
			{[]string{"eval", suite}, "suite.yaml:5: task 1: field \"screen\": " + quoted + ": "},
			{[]string{"bench", "--screens", "640x480," + bad}, "--screens " + quoted + ": "},
		} {
			// Were the screen let through, an unknown backend stops the
			// command before it starts anything.
			args := append(c.args, "--backend", "none-such")
			var so, se bytes.Buffer
			code := Main(args, &so, &se)
			if code != ExitUsage || !strings.Contains(se.String(), c.want) {
				t.Errorf("%q: exit %d, %q; want exit 2 and %q", args, code, se.String(), c.want)
			}
		}
	}
}

// TestRunBoundChecks: the run's bounds, one rule per flag, the same in
// every command that takes it.
func TestRunBoundChecks(t *testing.T) {
	suite := filepath.Join(t.TempDir(), "none.yaml")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "/nonexistent", "--agent", "idle", "--timeout", "0s"}, "--timeout must be positive, got 0s"},
		{[]string{"eval", suite, "--timeout", "-1s"}, "--timeout must be positive, got -1s"},
		{[]string{"replay", "/nonexistent", "--timeout", "-1s"}, "--timeout must not be negative (0: the recording's), got -1s"},
		{[]string{"run", "/nonexistent", "--agent", "idle", "--start-timeout", "0s"}, "--start-timeout must be positive"},
		{[]string{"replay", "/nonexistent", "--start-timeout", "0s"}, "--start-timeout must be positive"},
		{[]string{"run", "/nonexistent", "--agent", "idle", "--max-steps", "0"}, "--max-steps must be positive, got 0"},
		{[]string{"eval", suite, "--max-steps", "-3"}, "--max-steps must be positive, got -3"},
		{[]string{"run", "/nonexistent", "--agent", "idle", "--max-rate", "-1"}, "--max-rate must not be negative, got -1"},
		{[]string{"eval", suite, "--max-rate", "NaN"}, "--max-rate must not be negative, got NaN"},
		{[]string{"run", "/nonexistent", "--agent", "idle", "--ready-timeout", "-1s"}, "--ready-timeout must not be negative"},
		{[]string{"eval", suite, "--memory", "lots"}, `--memory "lots": want a size like 512m or 2g`},
		{[]string{"eval", suite, "--pids", "0"}, "--pids is 0: want 40 to 65536"},
		{[]string{"eval", suite, "--episodes", "-1"}, "--episodes must not be negative, got -1"},
		{[]string{"eval", suite, "--parallel", "0"}, "--parallel must be between 1 and 256, got 0"},
		{[]string{"eval", suite, "--pool", "-1"}, "--pool must be between 0 and 4096, got -1"},
		{[]string{"eval", suite, "--pool", "5000"}, "--pool must be between 0 and 4096, got 5000"},
		{[]string{"eval", suite, "--pool-max", "4"}, "--pool-max needs --pool"},
		{[]string{"eval", suite, "--pool", "4", "--pool-max", "2"}, "--pool-max must be between --pool (4) and 4096, got 2"},
		{[]string{"eval", suite, "--name", "notes"}, "eval takes no --name: a named sandbox's home carries what one run leaves to the next, and an eval's episodes must start alike"},
		{[]string{"eval", "--name", "notes"}, "eval takes no --name"},
		{[]string{"serve", "--backend", "docker", "--pool", "-1"}, "--pool is -1: want 0 to 4096"},
		{[]string{"serve", "--backend", "docker", "--pool-max", "3"}, "--pool-max needs --pool"},
		{[]string{"serve", "--backend", "docker", "--pool", "4", "--pool-max", "3"}, "--pool-max 3 is below --pool 4"},
	} {
		var so, se bytes.Buffer
		code := Main(c.args, &so, &se)
		if code != ExitUsage || !strings.Contains(se.String(), c.want) {
			t.Errorf("%q: exit %d, %q; want exit 2 and %q", c.args, code, se.String(), c.want)
		}
	}
}

// TestSizeFlag: a default size is written as a person writes it, and
// parseSize reads it back to the same bytes.
func TestSizeFlag(t *testing.T) {
	for _, c := range []struct {
		b    int64
		want string
	}{
		{1 << 30, "1g"},
		{256 << 20, "256m"},
		{192 << 20, "192m"},
		{1536 << 20, "1536m"},
		{1000, "1000"},
	} {
		got := sizeFlag(c.b)
		if got != c.want {
			t.Errorf("sizeFlag(%d) = %q, want %q", c.b, got, c.want)
		}
		if back, err := parseSize("--x", got); err != nil || back != c.b {
			t.Errorf("parseSize(%q) = %d, %v; want %d", got, back, err, c.b)
		}
	}
}
