package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/internal/testenv"
	"github.com/codegirl-games/agentbox/trace"
)

// countApp is an app (sh) that adds a line to ~/count.txt, says so, and
// waits; the manifest collects the file.
func countApp(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	m := map[string]any{
		"command": "sh", "args": []string{"-c", "echo run >> ~/count.txt; echo counted; sleep 600"},
		"wait_for_window": false, "ready_output": "counted", "collect": []string{"~/count.txt"},
	}
	data, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, "agentbox.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// sandboxesLs is `agentbox sandboxes ls --json`, the rows of name only:
// another agentbox on this machine (the other e2e shard) may hold names
// of its own.
func sandboxesLs(t *testing.T, name string) []map[string]any {
	t.Helper()
	r := cliMain(t, "sandboxes", "ls", "--json")
	if r.code != 0 {
		t.Fatalf("sandboxes ls: %s", r)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("sandboxes ls --json: %v\n%s", err, r.stdout)
	}
	return slices.DeleteFunc(rows, func(row map[string]any) bool { return row["name"] != name })
}

// TestNamedSandbox: a file the app writes in its home in one run of a
// name is there in the next; a second run of the name while one runs is
// refused at once, naming the holder; gc leaves the name alone, gc
// --named does not; sandboxes rm removes it (and its Docker volume).
// Both backends.
func TestNamedSandbox(t *testing.T) {
	backends := map[string]func(t *testing.T) []string{
		"docker": func(t *testing.T) []string {
			testenv.Require(t, testenv.Image(testenv.TestImage))
			return []string{"--backend", "docker", "--image", testenv.TestImage}
		},
		"local": func(t *testing.T) []string {
			requireLocal(t)
			return []string{"--backend", "local"}
		},
	}
	for backend, flags := range backends {
		t.Run(backend, func(t *testing.T) {
			bf := flags(t)
			// Reachable by the local backend's sandbox user (nobody, as root):
			// not below t.TempDir's 0700.
			sbDir, err := os.MkdirTemp("", "agentbox-e2e-sandboxes-")
			if err != nil {
				t.Fatal(err)
			}
			os.Chmod(sbDir, 0o755)
			t.Cleanup(func() { os.RemoveAll(sbDir) })
			t.Setenv("AGENTBOX_SANDBOXES", sbDir)
			name := "e2e-" + backend + "-" + strings.ToLower(strings.ReplaceAll(time.Now().Format("150405.000"), ".", ""))
			if backend == "docker" {
				t.Cleanup(func() { exec.Command("docker", "volume", "rm", "-f", "agentbox-home-"+name).Run() })
			}
			app := countApp(t)
			short := filepath.Join(t.TempDir(), "short.yaml")
			long := filepath.Join(t.TempDir(), "long.yaml")
			os.WriteFile(short, []byte("task: count\nsteps:\n  - {action: wait, ms: 100}\n"), 0o644)
			os.WriteFile(long, []byte("task: count\nsteps:\n  - {action: wait, ms: 120000}\n"), 0o644)

			for i, want := range []string{"run\n", "run\nrun\n"} {
				r := agentbox(t, append([]string{"run", app, "--name", name, "--script", short}, bf...)...)
				if r.code != 0 {
					t.Fatalf("run %d: %s", i+1, r)
				}
				got, err := os.ReadFile(filepath.Join(r.dir, trace.FilesDir, "count.txt"))
				if err != nil || string(got) != want {
					t.Fatalf("run %d: count.txt = %q, %v; want %q", i+1, got, err, want)
				}
				if tr := openTrace(t, r.dir); tr.Run.Env.Sandbox != name {
					t.Fatalf("run.json's environment.sandbox = %q", tr.Run.Env.Sandbox)
				}
			}

			// A run that holds the name while a second one tries.
			bin := testenv.Build(t, "./cmd/agentbox")
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			holder := exec.CommandContext(ctx, bin, append([]string{"run", app, "--out", filepath.Join(t.TempDir(), "holder"), "--name", name, "--script", long, "--timeout", "10m"}, bf...)...)
			var hout bytes.Buffer
			holder.Stdout, holder.Stderr = &hout, &hout
			if err := holder.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { holder.Process.Kill(); holder.Wait() }()
			deadline := time.Now().Add(3 * time.Minute)
			for {
				rows := sandboxesLs(t, name)
				if len(rows) == 1 && rows[0]["locked_by"] != nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the holder never held %s: %v\n%s", name, rows, hout.String())
				}
				time.Sleep(200 * time.Millisecond)
			}
			r := agentbox(t, append([]string{"run", app, "--name", name, "--script", short}, bf...)...)
			if out := r.stdout + r.stderr; r.code != 3 || !strings.Contains(out, "sandbox "+name+" is held by run ") || !strings.Contains(out, "agentbox pid ") {
				t.Fatalf("a second run of a held name: %s", r)
			}
			if r := cliMain(t, "sandboxes", "rm", name); r.code == 0 || !strings.Contains(r.stdout+r.stderr, "is held by") {
				t.Fatalf("rm of a held name: %s", r)
			}
			holder.Process.Kill() // SIGKILL: its lock goes with it
			holder.Wait()
			cliMain(t, "gc", "--backend", backend) // the killed run's sandbox

			// gc leaves the name alone; its home is still there.
			if r := cliMain(t, "gc", "--backend", backend); r.code != 0 {
				t.Fatalf("gc: %s", r)
			}
			rows := sandboxesLs(t, name)
			if len(rows) != 1 || rows[0]["name"] != name || rows[0]["locked_by"] != nil {
				t.Fatalf("after gc: %v", rows)
			}
			r = agentbox(t, append([]string{"run", app, "--name", name, "--script", short}, bf...)...)
			got, _ := os.ReadFile(filepath.Join(r.dir, trace.FilesDir, "count.txt"))
			// The killed holder's app may or may not have counted before it
			// was killed (it held the name from before its sandbox was made).
			if r.code != 0 || (string(got) != "run\nrun\nrun\n" && string(got) != "run\nrun\nrun\nrun\n") {
				t.Fatalf("after the holder was killed: count.txt %q: %s", got, r)
			}
			if r := cliMain(t, "gc", "--backend", backend, "--named", "--dry-run"); r.code != 0 || !strings.Contains(r.stdout, "would remove") {
				t.Fatalf("gc --named --dry-run: %s", r)
			}
			if r := cliMain(t, "sandboxes", "rm", name); r.code != 0 {
				t.Fatalf("rm: %s", r)
			}
			if rows := sandboxesLs(t, name); len(rows) != 0 {
				t.Fatalf("after rm: %v", rows)
			}
			if backend == "docker" {
				if err := exec.Command("docker", "volume", "inspect", "agentbox-home-"+name).Run(); err == nil {
					t.Fatal("rm left the volume")
				}
			}
			if r := cliMain(t, "sandboxes", "rm", name); r.code != 2 {
				t.Fatalf("rm of none: %s", r)
			}
		})
	}
}

// TestNamedSandboxUsage: bad names and a backend without named sandboxes
// are usage errors, before anything starts.
func TestNamedSandboxUsage(t *testing.T) {
	t.Setenv("AGENTBOX_SANDBOXES", t.TempDir())
	app := stubApp(t, "")
	play := filepath.Join(t.TempDir(), "play.yaml")
	os.WriteFile(play, []byte("steps:\n  - {action: wait, ms: 1}\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--name", "Bad Name"}, "--name: sandbox name \"Bad Name\": use lower-case letters"},
		{[]string{"--name", strings.Repeat("x", 64)}, "at most 63"},
		{[]string{"--name", "ok", "--backend", "kubernetes"}, "--name: the kubernetes backend has no named sandboxes"},
	} {
		r := cliMain(t, append([]string{"run", app, "--script", play}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: %s", tc.args, r)
		}
	}
}
