package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codegirl-games/agentbox/internal/testenv"
)

// pythonWithPytest is the first of $AGENTBOX_PYTHON, python3 in PATH and
// /usr/bin/python3 that imports pytest: Debian's python3-pytest installs
// for /usr/bin/python3, which another python3 earlier in PATH (pyenv, a
// virtual environment) does not see.
func pythonWithPytest(ctx context.Context) (string, error) {
	var tried []string
	for _, p := range []string{os.Getenv("AGENTBOX_PYTHON"), "python3", "/usr/bin/python3"} {
		if p == "" {
			continue
		}
		path, err := exec.LookPath(p)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", p, err))
			continue
		}
		out, err := exec.CommandContext(ctx, path, "-c", "import pytest").CombinedOutput()
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v: %s", path, err, strings.TrimSpace(string(out))))
			continue
		}
		return path, nil
	}
	return "", errors.New(strings.Join(tried, "; "))
}

// TestPythonClient runs the Python client's tests (python/tests, with
// pytest) against the real binary serving the mover on Docker, and the
// example that plays it (examples/python/play_mover.py, run by one of
// them). Afterwards the server stops cleanly, every episode's trace is
// finalised and no sandbox is left.
func TestPythonClient(t *testing.T) {
	var py string
	testenv.Require(t, testenv.Image(testenv.RuntimeImage), testenv.Programs("python3"),
		testenv.Probe("pytest for a python3 (apt-get install python3-pytest python3-numpy python3-pip)", func(ctx context.Context) (err error) {
			py, err = pythonWithPytest(ctx)
			return err
		}))
	bin := testenv.Build(t, "./cmd/agentbox")
	out := t.TempDir()
	app := moverApp(t, "")
	s := startServe(t, "--backend", "docker", "--app", "mover="+app, "--out", out, "--max-envs", "8")

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	root := testenv.RepoRoot()
	cmd := exec.CommandContext(ctx, py, "-m", "pytest", "-v", "-p", "no:cacheprovider", filepath.Join(root, "python", "tests"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"AGENTBOX_TEST_URL="+s.url, "AGENTBOX_TEST_TOKEN="+s.token, "AGENTBOX_TEST_OUT="+out,
		"AGENTBOX_BIN="+bin, "AGENTBOX_TEST_APP="+app, "AGENTBOX_TEST_BACKEND=docker",
		"PYTHONDONTWRITEBYTECODE=1")
	t0 := time.Now()
	output, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s -m pytest python/tests: %v\n%s\nthe server said:\n%s", py, err, output, s.log())
	}
	lines := strings.Split(strings.TrimSpace(string(output)), "\n")
	t.Logf("%s -m pytest python/tests (%v): %s", py, time.Since(t0).Round(time.Second), lines[len(lines)-1])
	if testing.Verbose() {
		t.Logf("\n%s", output)
	}

	if code := s.stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM:\n%s", code, s.log())
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	episodes := 0
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(out, e.Name(), "run.json")); err != nil {
			continue
		}
		tr := openTrace(t, filepath.Join(out, e.Name()))
		episodes++
		if tr.Incomplete {
			t.Errorf("the trace %s is incomplete", e.Name())
		}
		assertNoContainers(t, tr.Run.ID)
	}
	if episodes < 20 {
		t.Errorf("%d episodes' traces under --out; the tests play more", episodes)
	}
}
